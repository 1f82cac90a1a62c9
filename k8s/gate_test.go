package k8s

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHeldAtRest(t *testing.T) {
	held := func(mut func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
		d.Status.ObservedGeneration = 3
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionUnknown, Reason: CanaryPausedReason}}
		if mut != nil {
			mut(d)
		}
		return d
	}
	rs := func(spec, replicas, ready, avail int32, terminating int32) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.ReplicaSetSpec{Replicas: &spec}}
		r.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 2, Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: avail}
		if terminating > 0 {
			r.Status.TerminatingReplicas = &terminating
		}
		return r
	}
	tests := []struct {
		name string
		d    *appsv1.Deployment
		rss  []*appsv1.ReplicaSet
		want bool
	}{
		{"held, every ReplicaSet settled", held(nil), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0), rs(2, 2, 2, 2, 0), rs(0, 0, 0, 0, 0)}, true},
		{"a pod not available yet", held(nil), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0), rs(2, 2, 2, 1, 0)}, false},
		{"a pod still to be created", held(nil), []*appsv1.ReplicaSet{rs(8, 7, 7, 7, 0)}, false},
		{"a pod terminating", held(nil), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 1)}, false},
		{"a scale-down not observed", held(nil), []*appsv1.ReplicaSet{func() *appsv1.ReplicaSet { r := rs(8, 8, 8, 8, 0); r.Generation = 3; return r }()}, false},
		{"progressing, not held", held(func(d *appsv1.Deployment) { d.Status.Conditions[0].Reason = ReplicaSetUpdatedReason }), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0)}, false},
		{"no condition", held(func(d *appsv1.Deployment) { d.Status.Conditions = nil }), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0)}, false},
		{"a new generation not observed", held(func(d *appsv1.Deployment) { d.Generation = 4 }), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0)}, false},
		{"being deleted", held(func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{} }), []*appsv1.ReplicaSet{rs(8, 8, 8, 8, 0)}, false},
	}
	for _, tt := range tests {
		if got := HeldAtRest(tt.d, tt.rss); got != tt.want {
			t.Errorf("%s: HeldAtRest = %v, want %v", tt.name, got, tt.want)
		}
	}
}
