package k8s

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// (2) A template change under RollingUpdate: create the new ReplicaSet and, in the same sync,
// scale the old one down as far as availability allows.
func TestDecideTemplateChange(t *testing.T) {
	tests := []struct {
		name            string
		giveSurge       intstr.IntOrString
		giveUnavailable intstr.IntOrString
		giveChain       bool
		wantSteps       []string
		wantEvents      []string
	}{
		{
			// 10 replicas, 25%/25%: maxSurge 3, maxUnavailable 2. The new RS starts at
			// 13 − 10 = 3. Then maxScaledDown = 13 − (10 − 2) − (3 − 0 available) = 2, and
			// 10 available − 8 minimum = 2: old goes 10 → 8.
			name:            "25 percent",
			giveSurge:       intstr.FromString("25%"),
			giveUnavailable: intstr.FromString("25%"),
			wantSteps:       []string{"CreateReplicaSet {new} 3", "ScaleDownReplicaSet {old} 10->8", "UpdateDeploymentStatus"},
			wantEvents: []string{
				"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 3",
				"Normal ScalingReplicaSet: Scaled down replica set {old} from 10 to 8",
			},
		},
		{
			// Chained: as above, then old 8 + new 3 = 11 leaves room for 2 more new pods, so
			// the new RS is created at 5. Then 13 − 8 − 5 = 0: the sync ends. The create goes
			// after the scale-down, so the total never passes 13 between the two writes.
			name:            "25 percent chained",
			giveSurge:       intstr.FromString("25%"),
			giveUnavailable: intstr.FromString("25%"),
			giveChain:       true,
			wantSteps:       []string{"ScaleDownReplicaSet {old} 10->8", "CreateReplicaSet {new} 5", "UpdateDeploymentStatus"},
			wantEvents: []string{
				"Normal ScalingReplicaSet: Scaled down replica set {old} from 10 to 8",
				"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 5",
			},
		},
		{
			// maxSurge 0, maxUnavailable 1: the new RS is created empty (10 ≥ 10), then
			// 10 − 9 − 0 = 1 old pod may go.
			name:            "no surge",
			giveSurge:       intstr.FromInt32(0),
			giveUnavailable: intstr.FromInt32(1),
			wantSteps:       []string{"CreateReplicaSet {new} 0", "ScaleDownReplicaSet {old} 10->9", "UpdateDeploymentStatus"},
			wantEvents:      []string{"Normal ScalingReplicaSet: Scaled down replica set {old} from 10 to 9"},
		},
		{
			// maxSurge 1, maxUnavailable 0: new starts at 1, and 11 − 10 − 1 = 0 old pods may go
			// until it is available.
			name:            "no unavailability",
			giveSurge:       intstr.FromInt32(1),
			giveUnavailable: intstr.FromInt32(0),
			wantSteps:       []string{"CreateReplicaSet {new} 1", "UpdateDeploymentStatus"},
			wantEvents:      []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Spec.Strategy.RollingUpdate.MaxSurge = &tt.giveSurge
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &tt.giveUnavailable
			d.Annotations[RevisionAnnotation] = "1"
			d.Status = settledStatus(d, 10)
			d.Generation = 2
			old := ownedRS(d, "nginx:1.0", 1, 10, 10, ago(time.Hour))
			plan := decideChained(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old}}, Request{}, tt.giveChain)

			newName := rsName(d, "nginx:1.1")
			if got, wantSteps := describePlan(plan), expand(tt.wantSteps, newName, old.Name); !reflect.DeepEqual(got, wantSteps) {
				t.Errorf("steps = %q, want %q", got, wantSteps)
			}
			if got, want := eventsOf(plan), expand(tt.wantEvents, newName, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			if create := stepOf(plan, StepCreate); create != nil {
				if got := create.ReplicaSet.Annotations[RevisionAnnotation]; got != "2" {
					t.Errorf("new ReplicaSet revision = %q, want %q", got, "2")
				}
			}
			if plan.Revision != 2 {
				t.Errorf("Revision = %d, want 2", plan.Revision)
			}
			c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
			if c == nil || c.Reason != NewReplicaSetReason || c.Status != corev1.ConditionTrue {
				t.Errorf("Progressing = %+v, want True %s", c, NewReplicaSetReason)
			} else if want := ago(time.Hour); !c.LastTransitionTime.Equal(&want) {
				// Still True: the transition time of the finished rollout stays.
				t.Errorf("Progressing lastTransitionTime = %v, want %v", c.LastTransitionTime, want)
			}
			if plan.Phase != PhaseProgressing {
				t.Errorf("Phase = %s, want %s", plan.Phase, PhaseProgressing)
			}
		})
	}
}

// A rollout in the middle: each sync takes one step, scaling up first, then down.
func TestDecideRollingContinues(t *testing.T) {
	tests := []struct {
		name         string
		giveNew      int32
		giveNewAvail int32
		giveOld      int32
		giveOldAvail int32
		giveChain    bool
		wantSteps    []string
	}{
		{
			// 10 replicas, maxSurge 3, maxUnavailable 2. Old 10 + new 3 = 13: no room to grow.
			// The new pods are available: 13 − 8 − 0 = 5 may go, and 13 available − 8 minimum
			// = 5 are spare: old 10 → 5.
			name:    "scale old down once new pods are available",
			giveNew: 3, giveNewAvail: 3, giveOld: 10, giveOldAvail: 10,
			// The counts in status come from the ReplicaSets' status, which this write does
			// not change: no status update.
			wantSteps: []string{"ScaleDownReplicaSet {old} 10->5"},
		},
		{
			// Old 5 + new 3 = 8 < 13: new may grow by min(13 − 8, 10 − 3) = 5 to 8, and a
			// scale-up ends the sync.
			name:    "scale new up into the room",
			giveNew: 3, giveNewAvail: 3, giveOld: 5, giveOldAvail: 5,
			wantSteps: []string{"ScaleUpReplicaSet {new} 3->8", "UpdateDeploymentStatus"},
		},
		{
			// Old 8 + new 5 = 13, none of the new pods available: 13 − 8 − 5 = 0 may go.
			name:    "wait while new pods are not available",
			giveNew: 5, giveNewAvail: 0, giveOld: 8, giveOldAvail: 8,
			wantSteps: nil,
		},
		{
			// Old 10 with 4 not available, new 3 not available: 13 − 8 − 3 = 2 may go, taken
			// from the unhealthy old pods first: 10 → 8. Then 6 available ≤ 8: no more.
			name:    "unhealthy old replicas go first",
			giveNew: 3, giveNewAvail: 0, giveOld: 10, giveOldAvail: 6,
			wantSteps: []string{"ScaleDownReplicaSet {old} 10->8", "UpdateDeploymentStatus"},
		},
		{
			// Chained, the two syncs above are one: old 10 → 5, then new 3 → 8 into the room,
			// then 13 − 8 − (8 − 3) = 0 may go. The status counts come from the ReplicaSets'
			// status, which these writes do not change: no status write.
			name:    "chained: old down then new up",
			giveNew: 3, giveNewAvail: 3, giveOld: 10, giveOldAvail: 10, giveChain: true,
			wantSteps: []string{"ScaleDownReplicaSet {old} 10->5", "ScaleUpReplicaSet {new} 3->8"},
		},
		{
			// Chained, new 8 all available, old 5: 13 − 8 − 0 = 5 may go and 13 − 8 = 5 are
			// spare, so old 5 → 0; then new 8 → 10. The old pods are still there, so the
			// rollout is not complete yet.
			name:    "chained: the last step",
			giveNew: 8, giveNewAvail: 8, giveOld: 5, giveOldAvail: 5, giveChain: true,
			wantSteps: []string{"ScaleDownReplicaSet {old} 5->0", "ScaleUpReplicaSet {new} 8->10"},
		},
		{
			// Chained but nothing is possible: the same as one sync.
			name:    "chained: wait while new pods are not available",
			giveNew: 5, giveNewAvail: 0, giveOld: 8, giveOldAvail: 8, giveChain: true,
			wantSteps: nil,
		},
		{
			// Chained after a scale-down the observation has not caught up with: old is at 5
			// but still reports 8 available. New 3 (all available) + old 5 = 8: new goes to
			// 8; then 13 − 8 − 5 = 0 may go, whatever old reports.
			name:    "chained: after a scale-down not yet observed",
			giveNew: 3, giveNewAvail: 3, giveOld: 5, giveOldAvail: 8, giveChain: true,
			wantSteps: []string{"ScaleUpReplicaSet {new} 3->8", "UpdateDeploymentStatus"},
		},
		{
			// The ReplicaSet controller lags: old was scaled 8 → 5 but still reports 8
			// available; new is at 8 with 5 available. 13 − 8 − 3 = 2 may go. Upstream counts
			// 5 + 8 = 13 available, 5 above the minimum of 8, and takes old to 0: once its
			// pods are gone only 5 of the 8 needed are available.
			name:    "stale old status, as upstream",
			giveNew: 8, giveNewAvail: 5, giveOld: 5, giveOldAvail: 8,
			wantSteps: []string{"ScaleDownReplicaSet {old} 5->0"},
		},
		{
			// Chained, old counts no more than its size: 5 + 5 = 10 available, 2 spare, so
			// old goes to 3 and new into the room, to 10.
			name:    "chained: stale old status is capped at its size",
			giveNew: 8, giveNewAvail: 5, giveOld: 5, giveOldAvail: 8, giveChain: true,
			wantSteps: []string{"ScaleDownReplicaSet {old} 5->3", "ScaleUpReplicaSet {new} 8->10"},
		},
		{
			// Everything on the new ReplicaSet and available: nothing to do.
			name:    "finished",
			giveNew: 10, giveNewAvail: 10, giveOld: 0, giveOldAvail: 0,
			wantSteps: []string{"UpdateDeploymentStatus"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			d.Generation = 2
			newRS := ownedRS(d, "nginx:1.1", 2, tt.giveNew, tt.giveNewAvail, ago(time.Minute))
			old := ownedRS(d, "nginx:1.0", 1, tt.giveOld, tt.giveOldAvail, ago(time.Hour))
			// The status written for exactly these ReplicaSets by the previous sync.
			avail := tt.giveNewAvail + tt.giveOldAvail
			availCond := NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.", ago(time.Hour))
			if avail < 8 {
				availCond = NewCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, MinimumReplicasUnavailable, "Deployment does not have minimum availability.", ago(time.Hour))
			}
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration:  2,
				Replicas:            tt.giveNew + tt.giveOld,
				UpdatedReplicas:     tt.giveNew,
				ReadyReplicas:       avail,
				AvailableReplicas:   avail,
				UnavailableReplicas: tt.giveNew + tt.giveOld - avail,
				TerminatingReplicas: ptrTo(int32(0)),
				Conditions: []appsv1.DeploymentCondition{
					availCond,
					NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Minute)),
				},
			}
			plan := decideChained(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, old}}, Request{}, tt.giveChain)

			if got, want := describePlan(plan), expand(tt.wantSteps, newRS.Name, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
		})
	}
}
