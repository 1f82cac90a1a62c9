package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/temporal-rollout/rollout/k8s"
)

var classifyNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// rolloutFixture is a 10-replica RollingUpdate Deployment (maxSurge 3, maxUnavailable 2) just
// changed from nginx:1.0 to nginx:1.1, with the old ReplicaSet settled at 10 and the new one
// as the engine creates it: the objects the watcher's cache holds.
func rolloutFixture(t *testing.T) (*appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.ReplicaSet) {
	t.Helper()
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	replicas, deadline := int32(10), int32(600)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid", Generation: 1, Annotations: map[string]string{}},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			ProgressDeadlineSeconds: &deadline,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.0"}}},
			},
		},
	}
	// Revision 1 on nginx:1.0, settled: the engine creates it, the ReplicaSet controller
	// brings its pods up, and the worker writes the status.
	old := createdBy(t, d, nil)
	setRS(old, 10, 10, 10)
	old.Annotations[k8s.DesiredReplicasAnnotation] = "10"
	writeStatus(t, d, nil, old)

	d.Generation = 2
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.1"
	newRS := createdBy(t, d, []*appsv1.ReplicaSet{old})
	return d, old, newRS
}

// createdBy runs the engine and returns the ReplicaSet it creates, as the API server returns it.
func createdBy(t *testing.T, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	t.Helper()
	plan, err := k8s.Decide(k8s.Snapshot{Deployment: d, ReplicaSets: rss}, k8s.Request{Chain: true}, classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range plan.Steps {
		if st.Kind == k8s.StepCreate {
			rs := st.ReplicaSet.DeepCopy()
			rs.UID = types.UID("uid-" + rs.Spec.Template.Spec.Containers[0].Image)
			rs.CreationTimestamp = metav1.NewTime(classifyNow.Add(-time.Duration(len(rss)+1) * time.Minute))
			return rs
		}
	}
	t.Fatalf("plan %v creates no ReplicaSet", plan.Steps)
	return nil
}

func setRS(rs *appsv1.ReplicaSet, spec, actual, available int32) {
	rs.Spec.Replicas = &spec
	rs.Status = appsv1.ReplicaSetStatus{Replicas: actual, ReadyReplicas: available, AvailableReplicas: available, ObservedGeneration: rs.Generation}
}

// writeStatus stores in d what the worker writes after a sync of these ReplicaSets (and, for
// Recreate, running pods), with their sizes as they are.
func writeStatus(t *testing.T, d *appsv1.Deployment, pods []k8s.PodCount, rss ...*appsv1.ReplicaSet) {
	t.Helper()
	plan, err := k8s.Decide(k8s.Snapshot{Deployment: d, ReplicaSets: rss, Pods: pods}, k8s.Request{Chain: true}, classifyNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range plan.Steps {
		if st.Kind == k8s.StepUpdateStatus || st.Deployment != nil {
			d.Annotations = st.Deployment.Annotations
		}
	}
	d.Status = plan.Status
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		// give sets the ReplicaSets as they were at the last sync (the status the worker
		// wrote) and as the watcher sees them now.
		give func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet)
		// givePods: running pods of the old ReplicaSet (Recreate).
		givePods int32
		want     urgency
	}{
		{
			// Synced at new 5 (none available), old 8; now 3 new pods are available: old may
			// go down to 5 and new up to 8.
			name: "new pods available: the rollout can move",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				setRS(old, 8, 8, 8)
				setRS(newRS, 5, 5, 0)
				writeStatus(t, d, nil, old, newRS)
				setRS(newRS, 5, 5, 3)
				return d, []*appsv1.ReplicaSet{old, newRS}
			},
			want: urgencyMove,
		},
		{
			// Synced when new had no pods yet; now its 5 pods exist but none is ready. Only
			// the counts in status change.
			name: "pods created, not ready: status only",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				setRS(old, 8, 8, 8)
				setRS(newRS, 5, 0, 0)
				writeStatus(t, d, nil, old, newRS)
				setRS(newRS, 5, 5, 0)
				return d, []*appsv1.ReplicaSet{old, newRS}
			},
			want: urgencyStatus,
		},
		{
			// Synced with old scaled to 0 but its pods still there; now they are gone and all
			// 10 new pods are available: the sync completes the rollout.
			name: "last old pod gone: finish",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				setRS(old, 0, 2, 2)
				setRS(newRS, 10, 10, 10)
				writeStatus(t, d, nil, old, newRS)
				setRS(old, 0, 0, 0)
				return d, []*appsv1.ReplicaSet{old, newRS}
			},
			want: urgencyNow,
		},
		{
			// The status written already says all that the ReplicaSets say.
			name: "nothing new: no signal",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				setRS(old, 8, 8, 8)
				setRS(newRS, 5, 5, 0)
				writeStatus(t, d, nil, old, newRS)
				return d, []*appsv1.ReplicaSet{old, newRS}
			},
			want: urgencyNone,
		},
		{
			// Complete and idle, then a pod stops being available: not a rollout, so the
			// status is refreshed as soon as any change would be.
			name: "idle Deployment loses a pod: paced as any change",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				setRS(old, 0, 0, 0)
				setRS(newRS, 10, 10, 10)
				writeStatus(t, d, nil, old, newRS)
				writeStatus(t, d, nil, old, newRS)
				setRS(newRS, 10, 10, 9)
				return d, []*appsv1.ReplicaSet{old, newRS}
			},
			want: urgencyMove,
		},
		{
			// Recreate, template changed: the old ReplicaSet must go to 0 first.
			name: "Recreate: scale the old down",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				return d, []*appsv1.ReplicaSet{old}
			},
			want: urgencyMove,
		},
		{
			// Recreate, old at 0 and reporting no pods, but one still running (terminating):
			// the new ReplicaSet must wait, and the status is already written.
			name: "Recreate: an old pod still runs",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				setRS(old, 0, 0, 0)
				writeStatus(t, d, []k8s.PodCount{{ReplicaSetUID: old.UID, Running: 1}}, old)
				return d, []*appsv1.ReplicaSet{old}
			},
			givePods: 1,
			want:     urgencyNone,
		},
		{
			// The last old pod is gone: the sync creates the new ReplicaSet at full size, and
			// nothing is gained by waiting.
			name: "Recreate: old pods gone, create the new one now",
			give: func(d *appsv1.Deployment, old, newRS *appsv1.ReplicaSet) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				setRS(old, 0, 0, 0)
				writeStatus(t, d, []k8s.PodCount{{ReplicaSetUID: old.UID, Running: 1}}, old)
				return d, []*appsv1.ReplicaSet{old}
			},
			want: urgencyNow,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, old, newRS := rolloutFixture(t)
			d, rss := tt.give(d, old, newRS)
			s := k8s.Snapshot{Deployment: d, ReplicaSets: rss}
			if tt.givePods > 0 {
				s.Pods = []k8s.PodCount{{ReplicaSetUID: old.UID, Running: tt.givePods}}
			}
			if got := classify(s, classifyNow); got != tt.want {
				t.Errorf("classify() = %s, want %s", got, tt.want)
			}
		})
	}
}
