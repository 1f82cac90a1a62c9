package activities

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/temporal-rollout/rollout/k8s"
)

var everything = labels.Everything()

// cacheCatchUp bounds how long Observe waits for the cache to show our own last writes.
const cacheCatchUp = 2 * time.Second

// Written is a ReplicaSet write the cache must reflect before the next decision: the
// generation our write produced, or 0 for a deletion.
type Written struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// ObserveInput names the Deployment and the writes of the previous sync.
type ObserveInput struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Written   []Written `json:"written,omitempty"`
}

// ObserveResult is the snapshot; Found is false when the Deployment does not exist.
type ObserveResult struct {
	Found    bool         `json:"found"`
	Snapshot k8s.Snapshot `json:"snapshot"`
}

// Observe reads the Deployment live and its ReplicaSets (owned, or orphans its selector matches)
// from the cache, waiting briefly for the cache to show the previous sync's writes and reading
// live what it still lags on. For Recreate it also counts running pods per ReplicaSet.
func (a *Activities) Observe(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	if in.Namespace == "" || in.Name == "" {
		return ObserveResult{}, nonRetryable(ErrInvalid, "observe: namespace and name are required, got %q/%q", in.Namespace, in.Name)
	}
	d, err := a.Client.AppsV1().Deployments(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ObserveResult{Found: false}, nil
	}
	if err != nil {
		return ObserveResult{}, classify("get deployment "+in.Namespace+"/"+in.Name, err)
	}
	d.ManagedFields = nil

	caughtUp := func(w Written) bool {
		rs, err := a.Cache.ReplicaSet(in.Namespace, w.Name)
		if w.Generation == 0 {
			return apierrors.IsNotFound(err)
		}
		return err == nil && rs.Generation >= w.Generation
	}
	waitFor(ctx, cacheCatchUp, func() bool {
		for _, w := range in.Written {
			if !caughtUp(w) {
				return false
			}
		}
		return true
	})
	live := map[string]*appsv1.ReplicaSet{}
	gone := map[string]bool{}
	for _, w := range in.Written {
		if caughtUp(w) {
			continue
		}
		rs, err := a.Client.AppsV1().ReplicaSets(in.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone[w.Name] = true
		case err != nil:
			return ObserveResult{}, classify("get replicaset "+in.Namespace+"/"+w.Name, err)
		default:
			live[w.Name] = rs
		}
	}

	cached, err := a.Cache.ReplicaSets(in.Namespace)
	if err != nil {
		return ObserveResult{}, classify("list replicasets in "+in.Namespace, err)
	}
	var selector labels.Selector
	if d.Spec.Selector != nil {
		selector, _ = metav1.LabelSelectorAsSelector(d.Spec.Selector)
	}
	var rss []*appsv1.ReplicaSet
	seen := map[string]bool{}
	consider := func(rs *appsv1.ReplicaSet) {
		if seen[rs.Name] || gone[rs.Name] {
			return
		}
		seen[rs.Name] = true
		ref := metav1.GetControllerOf(rs)
		owned := ref != nil && ref.UID == d.UID
		orphan := ref == nil && selector != nil && !selector.Empty() && selector.Matches(labels.Set(rs.Labels))
		if owned || orphan {
			c := rs.DeepCopy()
			c.ManagedFields = nil
			rss = append(rss, c)
		}
	}
	for _, rs := range live {
		consider(rs)
	}
	for _, rs := range cached {
		consider(rs)
	}
	sortReplicaSets(rss)

	snap := k8s.Snapshot{Deployment: d, ReplicaSets: rss}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, rs := range rss {
			n, err := a.Cache.RunningPods(string(rs.UID))
			if err != nil {
				return ObserveResult{}, classify("count pods of replicaset "+rs.Name, err)
			}
			if n > 0 {
				snap.Pods = append(snap.Pods, k8s.PodCount{ReplicaSetUID: rs.UID, Running: n})
			}
		}
	}
	return ObserveResult{Found: true, Snapshot: snap}, nil
}
