package activities

import (
	"context"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/temporal-rollout/rollout/k8s"
)

var everything = labels.Everything()

// ObserveInput names the Deployment.
type ObserveInput struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ObserveResult is the snapshot; Found is false when the Deployment does not exist.
type ObserveResult struct {
	Found    bool         `json:"found"`
	Snapshot k8s.Snapshot `json:"snapshot"`
}

// Observe reads what one sync decides on. The Deployment and the ReplicaSets its selector
// matches are read live (a consistent list), so a sync woken by the watcher never decides on
// a cache that has not caught up yet. ReplicaSets we own whose labels no longer match, which
// only need releasing, come from the cache. For Recreate it also counts running pods per
// ReplicaSet, live.
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
		pods, err := a.Client.CoreV1().Pods(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return ObserveResult{}, classify("list pods of deployment "+in.Namespace+"/"+in.Name, err)
		}
		running := map[string]int32{}
		for _, p := range pods.Items {
			ref := metav1.GetControllerOf(&p)
			if ref == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			running[string(ref.UID)]++
		}
		for _, rs := range snap.ReplicaSets {
			if n := running[string(rs.UID)]; n > 0 {
				snap.Pods = append(snap.Pods, k8s.PodCount{ReplicaSetUID: rs.UID, Running: n})
			}
		}
		// k8s.Snapshot documents Pods as sorted by UID; the loop above yields name order.
		sort.Slice(snap.Pods, func(i, j int) bool { return snap.Pods[i].ReplicaSetUID < snap.Pods[j].ReplicaSetUID })
	}
	return ObserveResult{Found: true, Snapshot: snap}, nil
}
