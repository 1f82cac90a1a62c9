package activities

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/temporal-rollout/rollout/k8s"
)

func optedIn(d *appsv1.Deployment) {
	d.Annotations[k8s.ManagedAnnotation] = "true"
	surge := intstr.FromString("25%")
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &surge}
}

// TestParkPauseRelease parks an opted-in Deployment (and marks its ReplicaSets), pauses it by
// the saved flag, and hands it back with the user's spec and no marks left.
func TestParkPauseRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, withDeployment(testDeployment(), optedIn),
		testRS("web-old", "rs-old", dUID, 0),
		withRS(testRS("web-new", "rs-new", dUID, 3), func(rs *appsv1.ReplicaSet) {
			rs.Annotations[k8s.DesiredReplicasAnnotation] = k8s.WithheldReplicas
		}))
	res, err := f.a.ParkDeployment(ctx, ParkInput{Deployment: testRef(), Events: []k8s.Event{{Type: "Normal", Reason: "Parked", Message: "parked"}}})
	if err != nil || !res.Changed {
		t.Fatalf("ParkDeployment() = %+v, %v; want changed", res, err)
	}
	d := f.deployment(t)
	ps, parked, err := k8s.Parked(d)
	if !parked || err != nil || !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || ps.Paused || ps.Strategy.RollingUpdate.MaxSurge.String() != "25%" {
		t.Fatalf("parked deployment: paused %t strategy %+v saved %+v (%v)", d.Spec.Paused, d.Spec.Strategy, ps, err)
	}
	for _, name := range []string{"web-old", "web-new"} {
		if _, ok := f.rs(t, name).Annotations[k8s.ParkedAnnotation]; !ok {
			t.Errorf("ReplicaSet %s not marked parked", name)
		}
	}
	if got := f.events(); len(got) != 1 || !strings.Contains(got[0], "Parked") {
		t.Errorf("events = %q, want the Parked event", got)
	}
	if res, err := f.a.ParkDeployment(ctx, ParkInput{Deployment: testRef()}); err != nil || res.Changed || res.Skipped != "already parked" {
		t.Errorf("second ParkDeployment() = %+v, %v; want skipped, already parked", res, err)
	}

	if _, err := f.a.SetPaused(ctx, SetPausedInput{Namespace: testNS, Name: "web", Paused: true}); err != nil {
		t.Fatal(err)
	}
	if ps, _, _ := k8s.Parked(f.deployment(t)); !ps.Paused {
		t.Fatalf("SetPaused on a parked deployment did not set the saved flag")
	}

	d = f.deployment(t)
	delete(d.Annotations, k8s.ManagedAnnotation)
	if _, err := f.client.AppsV1().Deployments(testNS).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.a.ReleaseDeployment(ctx, ParkInput{Deployment: testRef()}); err != nil || !res.Changed {
		t.Fatalf("ReleaseDeployment() = %+v, %v; want changed", res, err)
	}
	d = f.deployment(t)
	if _, parked, _ := k8s.Parked(d); parked || !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" {
		t.Fatalf("released deployment: paused %t strategy %+v annotations %v; want the user's (paused by them)", d.Spec.Paused, d.Spec.Strategy, d.Annotations)
	}
	for _, name := range []string{"web-old", "web-new"} {
		rs := f.rs(t, name)
		if _, ok := rs.Annotations[k8s.ParkedAnnotation]; ok || rs.Annotations[k8s.DesiredReplicasAnnotation] == k8s.WithheldReplicas {
			t.Errorf("ReplicaSet %s keeps marks after release: %v", name, rs.Annotations)
		}
	}
	if got := f.rs(t, "web-new").Annotations[k8s.DesiredReplicasAnnotation]; got != "3" {
		t.Errorf("web-new desired-replicas = %q, want 3 given back", got)
	}
}

func TestParkRefusesWhatCannotBeParked(t *testing.T) {
	tests := []struct {
		name  string
		give  func(*appsv1.Deployment)
		guard bool
		want  string
	}{
		{"not opted in", func(*appsv1.Deployment) {}, false, "it no longer opts in"},
		{"Recreate", func(d *appsv1.Deployment) {
			d.Annotations[k8s.ManagedAnnotation] = "true"
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}, false, "strategy Recreate cannot be driven"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withDeployment(testDeployment(), tt.give))
			f.a.ManagedGuard = tt.guard
			res, err := f.a.ParkDeployment(context.Background(), ParkInput{Deployment: testRef()})
			if err != nil || res.Changed || !strings.Contains(res.Skipped, tt.want) {
				t.Fatalf("ParkDeployment() = %+v, %v; want skipped: %s", res, err, tt.want)
			}
			if f.deployment(t).Spec.Paused {
				t.Fatalf("the deployment was paused")
			}
		})
	}
	f := newFixture(t, withDeployment(testDeployment(), tests[1].give))
	f.a.ManagedGuard = true
	if res, err := f.a.ParkDeployment(context.Background(), ParkInput{Deployment: testRef()}); err != nil || !res.Changed {
		t.Fatalf("ParkDeployment(Recreate, guard) = %+v, %v; want parked", res, err)
	}
}
