package activities

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/temporal-rollout/rollout/k8s"
)

// ObserveInput names the Deployment and the versions the sync must see at least: what the
// watcher saw when it signalled, and what our own last writes produced.
type ObserveInput struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	AtLeast   []k8s.ObjectVersion `json:"atLeast,omitempty"`
	// Live skips the cache (a sync after a stale decision reads live).
	Live bool `json:"live,omitempty"`
	// Command: the sync carries out a user's command (a rollback), so its live reads go
	// under the commands' client budget (see Activities.CommandClient).
	Command bool `json:"command,omitempty"`
}

// ObserveResult is the snapshot; Found is false when the Deployment does not exist (confirmed
// by a live read). FromCache tells where it came from.
type ObserveResult struct {
	Found     bool         `json:"found"`
	Snapshot  k8s.Snapshot `json:"snapshot"`
	FromCache bool         `json:"fromCache,omitempty"`
	// Managed: the worker runs in managed mode (see Activities.Managed).
	Managed bool `json:"managed,omitempty"`
	// ManagedGuard: --managed-guard (see k8s.Request.ManagedGuard).
	ManagedGuard bool `json:"managedGuard,omitempty"`
	// LocalWait: --local-wait (see Activities.LocalWait).
	LocalWait time.Duration `json:"localWait,omitempty"`
	// UIURL: --ui-url (see Activities.UIURL).
	UIURL string `json:"uiURL,omitempty"`
}

// cacheCatchUp bounds how long Observe waits for the cache before reading live.
const cacheCatchUp = time.Second

// Observe reads what one sync decides on (k8s.NewSnapshot's rule), redacted for the history
// (see redactSnapshot). It reads the worker's
// informer cache, as the upstream controller reads its listers, once the cache holds every
// version in AtLeast (it waits up to a second for that), so a sync never decides on state
// older than what woke it or what it wrote itself. Otherwise, and whenever the cache does not
// hold the Deployment, it reads live: only the API server may say a Deployment is gone.
func (a *Activities) Observe(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	res, err := a.observe(ctx, in)
	res.Managed, res.ManagedGuard, res.LocalWait = a.Managed, a.Managed && a.ManagedGuard, a.LocalWait
	res.UIURL = a.UIURL
	return res, err
}

func (a *Activities) observe(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	if in.Namespace == "" || in.Name == "" {
		return ObserveResult{}, nonRetryable(ErrInvalid, "observe: namespace and name are required, got %q/%q", in.Namespace, in.Name)
	}
	if in.Command {
		ctx = asCommand(ctx)
	}
	if a.Cache != nil && !in.Live && a.waitCaughtUp(ctx, in.Namespace, in.AtLeast, cacheCatchUp) {
		d, err := a.Cache.Deployment(in.Namespace, in.Name)
		if err == nil {
			return ObserveResult{Found: true, Snapshot: a.redactSnapshot(a.Cache.Snapshot(d)), FromCache: true}, nil
		}
		if !apierrors.IsNotFound(err) {
			return ObserveResult{}, classify("get cached deployment "+in.Namespace+"/"+in.Name, err)
		}
	}
	return a.observeLive(ctx, in)
}

// waitCaughtUp polls the cache until it holds want, for at most bound.
func (a *Activities) waitCaughtUp(ctx context.Context, namespace string, want []k8s.ObjectVersion, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for {
		if a.Cache.CaughtUp(namespace, want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// observeLive reads the Deployment and the ReplicaSets its selector matches live (a
// consistent list). ReplicaSets it controls whose labels no longer match, which only need
// releasing, come from the cache. Pods for Recreate are listed live.
func (a *Activities) observeLive(ctx context.Context, in ObserveInput) (ObserveResult, error) {
	d, err := a.client(ctx).AppsV1().Deployments(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ObserveResult{Found: false}, nil
	}
	if err != nil {
		return ObserveResult{}, classify("get deployment "+in.Namespace+"/"+in.Name, err)
	}
	d.ManagedFields = nil
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil || selector.Empty() {
		// The engine reports an invalid or empty selector; nothing to list.
		return ObserveResult{Found: true, Snapshot: a.redactSnapshot(k8s.NewSnapshot(d, nil, nil))}, nil
	}
	list, err := a.client(ctx).AppsV1().ReplicaSets(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return ObserveResult{}, classify("list replicasets of deployment "+in.Namespace+"/"+in.Name, err)
	}
	var rss []*appsv1.ReplicaSet
	seen := map[string]bool{}
	for i := range list.Items {
		rs := &list.Items[i]
		rs.ManagedFields = nil
		rss = append(rss, rs)
		seen[rs.Name] = true
	}
	if a.Cache != nil {
		// A matching ReplicaSet missing from the live list is gone; only the cache lags.
		for _, rs := range a.Cache.Snapshot(d).ReplicaSets {
			if !seen[rs.Name] && !selector.Matches(labels.Set(rs.Labels)) {
				rss = append(rss, rs)
			}
		}
	}
	var pods []*corev1.Pod
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		list, err := a.client(ctx).CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return ObserveResult{}, classify("list pods of deployment "+d.Namespace+"/"+d.Name, err)
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	return ObserveResult{Found: true, Snapshot: a.redactSnapshot(k8s.NewSnapshot(d, rss, pods))}, nil
}
