package k8s

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// (3) Recreate: old pods go first, and the new ReplicaSet is created only once none runs.
func TestDecideRecreate(t *testing.T) {
	tests := []struct {
		name          string
		giveOld       int32 // spec.replicas of the old ReplicaSet
		giveOldStatus int32 // status.replicas of the old ReplicaSet
		givePods      int32 // running pods of the old ReplicaSet; -1 for no pod list
		giveNewPods   int32 // running pods of an existing, empty new ReplicaSet; 0: no such RS
		wantSteps     []string
		wantEvents    []string
	}{
		{
			name:          "old ReplicaSet active: scale it to zero only",
			giveOld:       3,
			giveOldStatus: 3,
			givePods:      3,
			wantSteps:     []string{"ScaleDownReplicaSet {old} 3->0", "UpdateDeploymentStatus"},
			wantEvents:    []string{"Normal ScalingReplicaSet: Scaled down replica set {old} from 3 to 0"},
		},
		{
			name:          "old ReplicaSet still reports pods",
			giveOld:       0,
			giveOldStatus: 2,
			givePods:      -1,
			wantSteps:     []string{"UpdateDeploymentStatus"},
		},
		{
			// The ReplicaSet is at 0 but a pod of it has not terminated yet.
			name:          "old pod still running",
			giveOld:       0,
			giveOldStatus: 0,
			givePods:      1,
			wantSteps:     []string{"UpdateDeploymentStatus"},
		},
		{
			name:          "old pods gone: create the new ReplicaSet at full size",
			giveOld:       0,
			giveOldStatus: 0,
			givePods:      0,
			wantSteps:     []string{"CreateReplicaSet {new} 3", "UpdateDeploymentStatus"},
			wantEvents:    []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 3"},
		},
		{
			name:          "no pod list at all",
			giveOld:       0,
			giveOldStatus: 0,
			givePods:      -1,
			wantSteps:     []string{"CreateReplicaSet {new} 3", "UpdateDeploymentStatus"},
			wantEvents:    []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 3"},
		},
		{
			// The new ReplicaSet exists at 0 with pods of its own still around: only old pods
			// block, so it is scaled up.
			name:          "pods of the new ReplicaSet do not block",
			giveOld:       0,
			giveOldStatus: 0,
			givePods:      0,
			giveNewPods:   2,
			wantSteps:     []string{"ScaleUpReplicaSet {new} 0->3", "UpdateDeploymentStatus"},
			wantEvents:    []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := useRecreate(webDeployment(3, "nginx:1.1"))
			d.Annotations[RevisionAnnotation] = "1"
			d.Status = settledStatus(d, 3)
			d.Generation = 2
			old := ownedRS(d, "nginx:1.0", 1, tt.giveOld, tt.giveOldStatus, ago(time.Hour))
			old.Status.Replicas = tt.giveOldStatus
			s := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old}}
			if tt.givePods >= 0 {
				s.Pods = []PodCount{{ReplicaSetUID: old.UID, Running: tt.givePods}}
			}
			if tt.giveNewPods > 0 {
				newRS := ownedRS(d, "nginx:1.1", 2, 0, 0, ago(time.Minute))
				s.ReplicaSets = append(s.ReplicaSets, newRS)
				s.Pods = append(s.Pods, PodCount{ReplicaSetUID: newRS.UID, Running: tt.giveNewPods})
			}
			plan := decide(t, s, Request{})

			newName := rsName(d, "nginx:1.1")
			if got, want := describePlan(plan), expand(tt.wantSteps, newName, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if got, want := eventsOf(plan), expand(tt.wantEvents, newName, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			if create := stepOf(plan, StepCreate); create != nil {
				if got := create.ReplicaSet.Annotations[MaxReplicasAnnotation]; got != "3" {
					t.Errorf("max-replicas = %q, want %q (no surge under Recreate)", got, "3")
				}
			}
		})
	}
}
