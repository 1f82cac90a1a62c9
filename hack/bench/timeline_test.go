package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTimeline follows one Deployment through an update: the new ReplicaSet appears 0.5s in,
// its pods are all available at 3s, the old one is gone at 3.5s, and the status says so at 4s.
func TestTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tpl := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}
	ten := int32(10)
	dep := func(st appsv1.DeploymentStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: &ten, Template: tpl("v2")}, Status: st}
	}
	rs := func(name, image string, gen int64, created float64, replicas, available int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen, CreationTimestamp: metav1.NewTime(at(created))},
			Spec:   appsv1.ReplicaSetSpec{Template: tpl(image)},
			Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: available}}
	}
	tl := newTimelineState(map[string]int64{"a": 2, "b": 2})
	old := rs("old", "v1", 1, -10, 10, 10)
	tl.onReplicaSet("a", old, t0.Add(-time.Second)) // seen before the phase: no reaction
	tl.begin(t0)
	stale := dep(appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 10, AvailableReplicas: 10})
	tl.onChange("a", stale, []*appsv1.ReplicaSet{old}, at(0.1))
	tl.onReplicaSet("a", old, at(0.2)) // a status-only event: no generation change
	nw := rs("new", "v2", 1, 0.5, 0, 0)
	tl.onReplicaSet("a", nw, at(0.5))
	tl.onReplicaSet("a", rs("new", "v2", 2, 0.5, 3, 0), at(0.7))
	old0 := rs("old", "v1", 2, -10, 2, 2)
	tl.onChange("a", stale, []*appsv1.ReplicaSet{old0, rs("new", "v2", 2, 0.5, 10, 10)}, at(3))
	gone := rs("old", "v1", 3, -10, 0, 0)
	tl.onChange("a", stale, []*appsv1.ReplicaSet{gone, rs("new", "v2", 2, 0.5, 10, 10)}, at(3.5))
	done := dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 10, UpdatedReplicas: 10, AvailableReplicas: 10})
	tl.onChange("a", done, []*appsv1.ReplicaSet{gone, rs("new", "v2", 2, 0.5, 10, 10)}, at(4))

	got := tl.summary()
	want := Timeline{Deployments: 1, ReactMedian: 0.5, ReactMax: 0.5, PodsMedian: 3, PodsMax: 3, StatusMedian: 0.5, StatusMax: 0.5}
	if got != want {
		t.Errorf("summary = %+v, want %+v", got, want)
	}
}
