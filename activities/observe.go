package activities

import (
	"context"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/temporal-rollout/rollout/k8s"
)

var everything = labels.Everything()

// ObserveInput names the Deployment and the versions the sync must see at least: what the
// watcher saw when it signalled, and what our own last writes produced.
type ObserveInput struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	AtLeast   []k8s.ObjectVersion `json:"atLeast,omitempty"`
	// Live skips the cache (a sync after a stale decision reads live).
	Live bool `json:"live,omitempty"`
}

// ObserveResult is the snapshot; Found is false when the Deployment does not exist. FromCache
// tells where it came from.
type ObserveResult struct {
	Found     bool         `json:"found"`
	Snapshot  k8s.Snapshot `json:"snapshot"`
	FromCache bool         `json:"fromCache,omitempty"`
}

// cacheCatchUp bounds how long Observe waits for the cache before reading live.
const cacheCatchUp = time.Second

// Observe reads what one sync decides on: the Deployment, the ReplicaSets it owns or whose
// labels its selector matches, and for Recreate the running pods per ReplicaSet. It reads the
// worker's informer cache, as the upstream controller does, once the cache holds every
// version in AtLeast (it waits up to a second for that), so a sync never decides on state
// older than what woke it or what it wrote itself. Otherwise it reads live.
func (a *Activities) Observe(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	if in.Namespace == "" || in.Name == "" {
		return ObserveResult{}, nonRetryable(ErrInvalid, "observe: namespace and name are required, got %q/%q", in.Namespace, in.Name)
	}
	if a.Cache != nil && !in.Live && a.waitCaughtUp(ctx, in) {
		return a.observeCached(ctx, in)
	}
	return a.observeLive(ctx, in)
}

func (a *Activities) waitCaughtUp(ctx context.Context, in ObserveInput) bool {
	deadline := time.Now().Add(cacheCatchUp)
	for {
		if a.Cache.CaughtUp(in.Namespace, in.AtLeast) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// observeCached builds the snapshot from the informer cache.
func (a *Activities) observeCached(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	cached, err := a.Cache.Deployment(in.Namespace, in.Name)
	if apierrors.IsNotFound(err) {
		return ObserveResult{Found: false, FromCache: true}, nil
	}
	if err != nil {
		return ObserveResult{}, classify("get cached deployment "+in.Namespace+"/"+in.Name, err)
	}
	d := cached.DeepCopy()
	snap := k8s.Snapshot{Deployment: d}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil || selector.Empty() {
		return ObserveResult{Found: true, Snapshot: snap, FromCache: true}, nil
	}
	rss, err := a.Cache.ReplicaSets(in.Namespace)
	if err != nil {
		return ObserveResult{}, classify("list cached replicasets in "+in.Namespace, err)
	}
	for _, rs := range rss {
		ref := metav1.GetControllerOf(rs)
		owned := ref != nil && ref.UID == d.UID
		orphan := ref == nil && selector.Matches(labels.Set(rs.Labels))
		if owned || orphan {
			snap.ReplicaSets = append(snap.ReplicaSets, rs.DeepCopy())
		}
	}
	sortReplicaSets(snap.ReplicaSets)
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		// Pod deletions wake Recreate rollouts, and no version tells whether the cache has seen
		// them, so pods are listed live.
		if snap.Pods, err = a.runningPods(ctx, d, selector, snap.ReplicaSets); err != nil {
			return ObserveResult{}, err
		}
	}
	return ObserveResult{Found: true, Snapshot: snap, FromCache: true}, nil
}

// observeLive reads the Deployment and the ReplicaSets its selector matches live (a
// consistent list). ReplicaSets we own whose labels no longer match, which only need
// releasing, come from the cache. Pods for Recreate are listed live.
func (a *Activities) observeLive(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	d, err := a.Client.AppsV1().Deployments(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ObserveResult{Found: false}, nil
	}
	if err != nil {
		return ObserveResult{}, classify("get deployment "+in.Namespace+"/"+in.Name, err)
	}
	d.ManagedFields = nil
	snap := k8s.Snapshot{Deployment: d}

	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil || selector.Empty() {
		// The engine reports an invalid or empty selector; nothing to list.
		return ObserveResult{Found: true, Snapshot: snap}, nil
	}
	list, err := a.Client.AppsV1().ReplicaSets(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return ObserveResult{}, classify("list replicasets of deployment "+in.Namespace+"/"+in.Name, err)
	}
	seen := map[string]bool{}
	for i := range list.Items {
		rs := &list.Items[i]
		ref := metav1.GetControllerOf(rs)
		if ref == nil || ref.UID == d.UID {
			rs.ManagedFields = nil
			snap.ReplicaSets = append(snap.ReplicaSets, rs)
		}
		seen[rs.Name] = true
	}
	if a.Cache != nil {
		cached, err := a.Cache.ReplicaSets(in.Namespace)
		if err != nil {
			return ObserveResult{}, classify("list cached replicasets in "+in.Namespace, err)
		}
		for _, rs := range cached {
			// A matching ReplicaSet missing from the live list is gone; only the cache lags.
			if selector.Matches(labels.Set(rs.Labels)) {
				continue
			}
			if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID && !seen[rs.Name] {
				snap.ReplicaSets = append(snap.ReplicaSets, rs.DeepCopy())
			}
		}
	}
	sortReplicaSets(snap.ReplicaSets)

	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		if snap.Pods, err = a.runningPods(ctx, d, selector, snap.ReplicaSets); err != nil {
			return ObserveResult{}, err
		}
	}
	return ObserveResult{Found: true, Snapshot: snap}, nil
}

// runningPods lists the Deployment's pods live and counts, per ReplicaSet, those neither
// Succeeded nor Failed, sorted by ReplicaSet UID.
func (a *Activities) runningPods(ctx context.Context, d *appsv1.Deployment, selector labels.Selector, rss []*appsv1.ReplicaSet) ([]k8s.PodCount, error) {
	pods, err := a.Client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, classify("list pods of deployment "+d.Namespace+"/"+d.Name, err)
	}
	running := map[string]int32{}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		running[string(ref.UID)]++
	}
	var out []k8s.PodCount
	for _, rs := range rss {
		if n := running[string(rs.UID)]; n > 0 {
			out = append(out, k8s.PodCount{ReplicaSetUID: rs.UID, Running: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReplicaSetUID < out[j].ReplicaSetUID })
	return out, nil
}
