package k8s

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NewSnapshot is the one rule for what a sync of d sees, used by the worker's cached and live
// reads, the watcher and the tests alike:
//
//   - the ReplicaSets d controls (controllerRef UID = d's UID), whatever their labels, so a
//     sync can release those that no longer match;
//   - the orphans (no controllerRef) its selector matches, which it may adopt;
//   - for the Recreate strategy, per ReplicaSet in the snapshot, how many of the given pods it
//     controls are neither Succeeded nor Failed (terminating pods count: upstream's
//     oldPodsRunning waits for them too).
//
// ReplicaSets come out sorted by name and pod counts by ReplicaSet UID, so a snapshot reads
// the same whatever order the cache listed them in. The objects are not copied: callers hand
// in objects they will not mutate (Decide copies what it changes). An invalid or empty
// selector matches no orphan; Decide reports it.
func NewSnapshot(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) Snapshot {
	s := Snapshot{Deployment: d}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	matches := err == nil && d.Spec.Selector != nil && !sel.Empty()
	for _, rs := range replicaSets {
		if rs.Namespace != d.Namespace {
			continue
		}
		ref := metav1.GetControllerOf(rs)
		switch {
		case ref != nil && ref.UID == d.UID:
		case ref == nil && matches && sel.Matches(labels.Set(rs.Labels)):
		default:
			continue
		}
		s.ReplicaSets = append(s.ReplicaSets, rs)
	}
	sort.Slice(s.ReplicaSets, func(i, j int) bool { return s.ReplicaSets[i].Name < s.ReplicaSets[j].Name })
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		s.Pods = RunningPods(s.ReplicaSets, pods)
	}
	return s
}

// RunningPods counts, per ReplicaSet, the pods it controls that are neither Succeeded nor
// Failed, sorted by ReplicaSet UID; ReplicaSets with none are left out.
func RunningPods(replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) []PodCount {
	owned := map[string]bool{}
	for _, rs := range replicaSets {
		owned[string(rs.UID)] = true
	}
	running := map[string]int32{}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || !owned[string(ref.UID)] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		running[string(ref.UID)]++
	}
	var out []PodCount
	for _, rs := range replicaSets {
		if n := running[string(rs.UID)]; n > 0 {
			out = append(out, PodCount{ReplicaSetUID: rs.UID, Running: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReplicaSetUID < out[j].ReplicaSetUID })
	return out
}
