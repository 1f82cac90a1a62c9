package k8s

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// (9) The progress deadline.
func TestDecideProgressDeadline(t *testing.T) {
	tests := []struct {
		name          string
		giveCondition appsv1.DeploymentCondition
		giveNewAvail  int32
		giveDeadline  *int32
		wantSteps     []string
		wantCondition string // Status/Reason of Progressing, "" for none
		wantUpdatedAt metav1.Time
		wantPhase     Phase
		wantRecheck   *metav1.Time
	}{
		{
			// Last progress 601s ago with a 600s deadline.
			name:          "deadline passed",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(601*time.Second)),
			giveDeadline:  ptrTo(int32(600)),
			wantSteps:     []string{"UpdateDeploymentStatus"},
			wantCondition: "False/ProgressDeadlineExceeded",
			wantUpdatedAt: metav1.NewTime(planNow),
			wantPhase:     PhaseDeadlineExceeded,
		},
		{
			// Last progress 100s ago: check again at that time + 600s + 1s.
			name:          "within the deadline",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(100*time.Second)),
			giveDeadline:  ptrTo(int32(600)),
			wantCondition: "True/ReplicaSetUpdated",
			wantUpdatedAt: ago(100 * time.Second),
			wantPhase:     PhaseProgressing,
			wantRecheck:   ptrTo(metav1.NewTime(planNow.Add(501 * time.Second))),
		},
		{
			// Exactly at the deadline is not past it.
			name:          "at the deadline",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(600*time.Second)),
			giveDeadline:  ptrTo(int32(600)),
			wantCondition: "True/ReplicaSetUpdated",
			wantUpdatedAt: ago(600 * time.Second),
			wantPhase:     PhaseProgressing,
			wantRecheck:   ptrTo(metav1.NewTime(planNow.Add(time.Second))),
		},
		{
			// A new pod became available: progress, the clock starts again.
			name:          "progress resets the clock",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Hour)),
			giveNewAvail:  1,
			giveDeadline:  ptrTo(int32(600)),
			wantSteps:     []string{"UpdateDeploymentStatus"},
			wantCondition: "True/ReplicaSetUpdated",
			wantUpdatedAt: metav1.NewTime(planNow),
			wantPhase:     PhaseProgressing,
			wantRecheck:   ptrTo(metav1.NewTime(planNow.Add(601 * time.Second))),
		},
		{
			name:          "already timed out",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, "timed out", ago(time.Hour)),
			giveDeadline:  ptrTo(int32(600)),
			wantCondition: "False/ProgressDeadlineExceeded",
			wantUpdatedAt: ago(time.Hour),
			wantPhase:     PhaseDeadlineExceeded,
		},
		{
			name:          "no deadline",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Hour)),
			wantSteps:     []string{"UpdateDeploymentStatus"},
			wantPhase:     PhaseProgressing,
		},
		{
			name:          "infinite deadline",
			giveCondition: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Hour)),
			giveDeadline:  ptrTo(int32(math.MaxInt32)),
			wantSteps:     []string{"UpdateDeploymentStatus"},
			wantPhase:     PhaseProgressing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Stuck mid-rollout: 10 replicas, maxSurge 3, maxUnavailable 2; new at 6 with no
			// pod available, old at 7. The new RS cannot grow (13 = 10 + 3) and the old cannot
			// shrink (13 − 8 − 6 < 0).
			d := webDeployment(10, "nginx:1.1")
			d.Spec.ProgressDeadlineSeconds = tt.giveDeadline
			d.Annotations[RevisionAnnotation] = "2"
			d.Generation = 2
			newRS := ownedRS(d, "nginx:1.1", 2, 6, tt.giveNewAvail, ago(2*time.Hour))
			old := ownedRS(d, "nginx:1.0", 1, 7, 7, ago(3*time.Hour))
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration:  2,
				Replicas:            13,
				UpdatedReplicas:     6,
				ReadyReplicas:       7,
				AvailableReplicas:   7,
				UnavailableReplicas: 6,
				TerminatingReplicas: ptrTo(int32(0)),
				Conditions: []appsv1.DeploymentCondition{
					NewCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, MinimumReplicasUnavailable, "Deployment does not have minimum availability.", ago(2*time.Hour)),
					tt.giveCondition,
				},
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, old}}, Request{})

			if got := describePlan(plan); !reflect.DeepEqual(got, tt.wantSteps) {
				t.Errorf("steps = %q, want %q", got, tt.wantSteps)
			}
			c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
			switch {
			case tt.wantCondition == "" && c != nil:
				t.Errorf("Progressing = %+v, want none", c)
			case tt.wantCondition != "" && c == nil:
				t.Errorf("Progressing missing, want %s", tt.wantCondition)
			case c != nil:
				if got := string(c.Status) + "/" + c.Reason; got != tt.wantCondition {
					t.Errorf("Progressing = %s, want %s", got, tt.wantCondition)
				}
				if !c.LastUpdateTime.Equal(&tt.wantUpdatedAt) {
					t.Errorf("Progressing lastUpdateTime = %v, want %v", c.LastUpdateTime, tt.wantUpdatedAt)
				}
				if c.Reason == TimedOutReason && c.LastUpdateTime.Time.Equal(planNow) {
					if want := fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name); c.Message != want {
						t.Errorf("Progressing message = %q, want %q", c.Message, want)
					}
				}
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			if (plan.RecheckAt == nil) != (tt.wantRecheck == nil) || plan.RecheckAt != nil && !plan.RecheckAt.Equal(tt.wantRecheck) {
				t.Errorf("RecheckAt = %v, want %v", plan.RecheckAt, tt.wantRecheck)
			}
		})
	}
}

// ReplicaFailure conditions of the ReplicaSets are surfaced on the Deployment, the new
// ReplicaSet's first.
func TestDecideReplicaFailure(t *testing.T) {
	failure := func(msg string) appsv1.ReplicaSetCondition {
		return appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
			Message: msg, LastTransitionTime: ago(time.Minute),
		}
	}
	tests := []struct {
		name        string
		giveNewCond *appsv1.ReplicaSetCondition
		giveOldCond *appsv1.ReplicaSetCondition
		giveHad     bool // the Deployment already shows a ReplicaFailure
		wantMessage string
	}{
		{name: "from the new ReplicaSet", giveNewCond: ptrTo(failure("quota new")), wantMessage: "quota new"},
		{name: "from an old ReplicaSet", giveOldCond: ptrTo(failure("quota old")), wantMessage: "quota old"},
		{name: "new ReplicaSet first", giveNewCond: ptrTo(failure("quota new")), giveOldCond: ptrTo(failure("quota old")), wantMessage: "quota new"},
		{name: "cleared once gone", giveHad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			newRS := ownedRS(d, "nginx:1.1", 2, 5, 5, ago(time.Minute))
			old := ownedRS(d, "nginx:1.0", 1, 5, 5, ago(time.Hour))
			if tt.giveNewCond != nil {
				newRS.Status.Conditions = []appsv1.ReplicaSetCondition{*tt.giveNewCond}
			}
			if tt.giveOldCond != nil {
				old.Status.Conditions = []appsv1.ReplicaSetCondition{*tt.giveOldCond}
			}
			if tt.giveHad {
				d.Status.Conditions = []appsv1.DeploymentCondition{replicaSetToDeploymentCondition(failure("quota"))}
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, old}}, Request{})

			c := GetCondition(plan.Status, appsv1.DeploymentReplicaFailure)
			switch {
			case tt.wantMessage == "" && c != nil:
				t.Errorf("ReplicaFailure = %+v, want none", c)
			case tt.wantMessage != "" && c == nil:
				t.Errorf("ReplicaFailure missing, want %q", tt.wantMessage)
			case c != nil:
				if c.Message != tt.wantMessage || c.Status != corev1.ConditionTrue || c.Reason != "FailedCreate" {
					t.Errorf("ReplicaFailure = %s/%s %q, want True/FailedCreate %q", c.Status, c.Reason, c.Message, tt.wantMessage)
				}
				if want := ago(time.Minute); !c.LastUpdateTime.Equal(&want) {
					t.Errorf("ReplicaFailure lastUpdateTime = %v, want the ReplicaSet's transition time %v", c.LastUpdateTime, want)
				}
			}
		})
	}
}

// TestTemplateChangeStatus: a new pod template no ReplicaSet runs yet makes updatedReplicas 0
// at once, and nothing else; every other case is the sync's.
func TestTemplateChangeStatus(t *testing.T) {
	settled := func(image string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
		d := webDeployment(10, "nginx:1")
		d.Status = settledStatus(d, 10)
		rs := ownedRS(d, "nginx:1", 1, 10, 10, ago(time.Hour))
		d = d.DeepCopy()
		d.Spec.Template = templateFor(d, image)
		if image != "nginx:1" {
			d.Generation = 2
		}
		return d, rs
	}
	tests := []struct {
		name string
		give func() Snapshot
		want bool // a refresh to updatedReplicas 0
	}{
		{name: "new image, no ReplicaSet runs it", want: true, give: func() Snapshot {
			d, rs := settled("nginx:2")
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
		{name: "generation observed already", give: func() Snapshot {
			d, rs := settled("nginx:2")
			d.Status.ObservedGeneration = 2
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
		{name: "never synced", give: func() Snapshot {
			d, rs := settled("nginx:2")
			d.Status = appsv1.DeploymentStatus{}
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
		{name: "scaled, same template", give: func() Snapshot {
			d, rs := settled("nginx:1")
			d.Generation, d.Spec.Replicas = 2, ptrTo(int32(12))
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
		{name: "rolled back to a revision a ReplicaSet runs", give: func() Snapshot {
			d, rs := settled("nginx:0")
			old := ownedRS(d, "nginx:0", 0, 0, 0, ago(2*time.Hour))
			return NewSnapshot(d, []*appsv1.ReplicaSet{old, rs}, nil)
		}},
		{name: "updatedReplicas 0 already", give: func() Snapshot {
			d, rs := settled("nginx:2")
			d.Status.UpdatedReplicas = 0
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
		{name: "being deleted", give: func() Snapshot {
			d, rs := settled("nginx:2")
			now := ago(0)
			d.DeletionTimestamp = &now
			return NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.give()
			before := s.Deployment.DeepCopy()
			got := TemplateChangeStatus(s)
			if !reflect.DeepEqual(s.Deployment, before) {
				t.Fatalf("the snapshot's Deployment was modified")
			}
			if !tt.want {
				if got != nil {
					t.Fatalf("got a refresh (status %+v), want none", got.Status)
				}
				return
			}
			if got == nil {
				t.Fatalf("got no refresh, want updatedReplicas 0")
			}
			want := before.DeepCopy()
			want.Status.UpdatedReplicas = 0
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got status %+v, want %+v", got.Status, want.Status)
			}
		})
	}
}
