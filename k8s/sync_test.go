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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// (1) A new Deployment: create the first ReplicaSet and record revision 1.
func TestDecideNewDeployment(t *testing.T) {
	tests := []struct {
		name         string
		giveDeploy   *appsv1.Deployment
		wantReplicas int32
		wantMax      string
		wantEvents   []string
		wantReason   string // of the Progressing condition
		wantPhase    Phase
	}{
		{
			// 10 replicas, maxSurge 25% = 3: room for 13, but a new RS never exceeds 10.
			name:         "rolling update",
			giveDeploy:   webDeployment(10, "nginx:1.0"),
			wantReplicas: 10,
			wantMax:      "13",
			wantEvents:   []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 10"},
			wantReason:   NewReplicaSetReason,
			wantPhase:    PhaseProgressing,
		},
		{
			name: "rolling update without surge",
			giveDeploy: func() *appsv1.Deployment {
				d := webDeployment(4, "nginx:1.0")
				d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(0))
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromInt32(1))
				return d
			}(),
			wantReplicas: 4,
			wantMax:      "4",
			wantEvents:   []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 4"},
			wantReason:   NewReplicaSetReason,
			wantPhase:    PhaseProgressing,
		},
		{
			name:         "recreate",
			giveDeploy:   useRecreate(webDeployment(3, "nginx:1.0")),
			wantReplicas: 3,
			wantMax:      "3",
			wantEvents:   []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 0 to 3"},
			wantReason:   NewReplicaSetReason,
			wantPhase:    PhaseProgressing,
		},
		{
			// Nothing to scale: no event, and with 0 of 0 pods the rollout is already complete.
			name:         "zero replicas",
			giveDeploy:   webDeployment(0, "nginx:1.0"),
			wantReplicas: 0,
			wantMax:      "0",
			wantReason:   NewRSAvailableReason,
			wantPhase:    PhaseComplete,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.giveDeploy
			d.Annotations[ChangeCauseAnnotation] = "first deploy"
			d.Annotations[corev1.LastAppliedConfigAnnotation] = `{"kind":"Deployment"}`
			d.Spec.MinReadySeconds = 5
			orig := d.DeepCopy()
			plan := decide(t, Snapshot{Deployment: d}, Request{})

			if !reflect.DeepEqual(d, orig) {
				t.Errorf("Decide() modified its snapshot")
			}
			hash := PodTemplateHash(&d.Spec.Template, nil)
			name := "web-" + hash
			wantSteps := []string{fmt.Sprintf("CreateReplicaSet %s %d", name, tt.wantReplicas), "UpdateDeploymentStatus"}
			if got := describePlan(plan); !reflect.DeepEqual(got, wantSteps) {
				t.Fatalf("steps = %q, want %q", got, wantSteps)
			}
			if got, want := eventsOf(plan), expand(tt.wantEvents, name, ""); !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}

			rs := plan.Steps[0].ReplicaSet
			wantLabels := map[string]string{"app": "web", hashKey: hash}
			if !reflect.DeepEqual(rs.Labels, wantLabels) {
				t.Errorf("ReplicaSet labels = %v, want %v", rs.Labels, wantLabels)
			}
			if !reflect.DeepEqual(rs.Spec.Template.Labels, wantLabels) {
				t.Errorf("template labels = %v, want %v", rs.Spec.Template.Labels, wantLabels)
			}
			if !reflect.DeepEqual(rs.Spec.Selector.MatchLabels, wantLabels) {
				t.Errorf("selector = %v, want %v", rs.Spec.Selector.MatchLabels, wantLabels)
			}
			if _, ok := d.Spec.Selector.MatchLabels[hashKey]; ok {
				t.Errorf("the Deployment's own selector got the hash label")
			}
			wantAnn := map[string]string{
				RevisionAnnotation:        "1",
				DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas),
				MaxReplicasAnnotation:     tt.wantMax,
				ChangeCauseAnnotation:     "first deploy",
			}
			if !reflect.DeepEqual(rs.Annotations, wantAnn) {
				t.Errorf("ReplicaSet annotations = %v, want %v", rs.Annotations, wantAnn)
			}
			if rs.Namespace != "prod" {
				t.Errorf("namespace = %q, want %q", rs.Namespace, "prod")
			}
			if rs.Spec.MinReadySeconds != 5 {
				t.Errorf("minReadySeconds = %d, want 5", rs.Spec.MinReadySeconds)
			}
			ref := metav1.GetControllerOf(rs)
			if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
				t.Errorf("controller ref = %+v, want a blocking apps/v1 Deployment ref to %s", ref, d.UID)
			}
			if !rs.CreationTimestamp.IsZero() {
				t.Errorf("creationTimestamp = %v, want zero in a create", rs.CreationTimestamp)
			}

			got := plan.Steps[1].Deployment
			if got.Annotations[RevisionAnnotation] != "1" {
				t.Errorf("deployment revision annotation = %q, want %q", got.Annotations[RevisionAnnotation], "1")
			}
			if !reflect.DeepEqual(got.Status, plan.Status) {
				t.Errorf("status step = %+v, want the plan's status %+v", got.Status, plan.Status)
			}
			c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != tt.wantReason {
				t.Fatalf("Progressing = %+v, want True %s", c, tt.wantReason)
			}
			if tt.wantReason == NewReplicaSetReason {
				if want := fmt.Sprintf("Created new replica set %q", name); c.Message != want {
					t.Errorf("Progressing message = %q, want %q", c.Message, want)
				}
				if want := planNow.Add(601 * time.Second); plan.RecheckAt == nil || !plan.RecheckAt.Time.Equal(want) {
					t.Errorf("RecheckAt = %v, want %v", plan.RecheckAt, want)
				}
			}
			if !c.LastUpdateTime.Time.Equal(planNow) {
				t.Errorf("Progressing lastUpdateTime = %v, want %v", c.LastUpdateTime, planNow)
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			if plan.Revision != 1 {
				t.Errorf("Revision = %d, want 1", plan.Revision)
			}
			if plan.NewReplicaSet != name {
				t.Errorf("NewReplicaSet = %q, want %q", plan.NewReplicaSet, name)
			}
			if plan.Status.ObservedGeneration != d.Generation {
				t.Errorf("observedGeneration = %d, want %d", plan.Status.ObservedGeneration, d.Generation)
			}
		})
	}
}

// (4) Paused Deployments are scaled but not rolled out.
func TestDecidePaused(t *testing.T) {
	tests := []struct {
		name          string
		giveReplicas  int32
		giveImage     string // the Deployment's image; the ReplicaSet runs nginx:1.0
		givePaused    bool
		givePausedCnd bool // the Progressing condition already says DeploymentPaused
		wantSteps     []string
		wantPhase     Phase
		wantProgress  string // Status/Reason of the Progressing condition
	}{
		{
			name:         "template changed while paused: no new ReplicaSet",
			giveReplicas: 10,
			giveImage:    "nginx:1.1",
			givePaused:   true,
			wantSteps:    []string{"UpdateDeploymentStatus"},
			wantPhase:    PhasePaused,
			wantProgress: "Unknown/DeploymentPaused",
		},
		{
			name:         "scaled while paused",
			giveReplicas: 12,
			giveImage:    "nginx:1.1",
			givePaused:   true,
			wantSteps:    []string{"ScaleUpReplicaSet {old} 10->12", "UpdateDeploymentStatus"},
			wantPhase:    PhasePaused,
			wantProgress: "Unknown/DeploymentPaused",
		},
		{
			name:          "already paused and up to date: nothing to write",
			giveReplicas:  10,
			giveImage:     "nginx:1.0",
			givePaused:    true,
			givePausedCnd: true,
			wantSteps:     nil,
			wantPhase:     PhasePaused,
			wantProgress:  "Unknown/DeploymentPaused",
		},
		{
			// Resuming sets DeploymentResumed, and the sync in the same breath finds the
			// rollout complete.
			name:          "resumed",
			giveReplicas:  10,
			giveImage:     "nginx:1.0",
			givePausedCnd: true,
			wantSteps:     []string{"UpdateDeploymentStatus"},
			wantPhase:     PhaseComplete,
			wantProgress:  "True/NewReplicaSetAvailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(tt.giveReplicas, tt.giveImage)
			d.Spec.Paused = tt.givePaused
			d.Annotations[RevisionAnnotation] = "1"
			d.Status = settledStatus(d, 10)
			if tt.givePausedCnd {
				SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", ago(time.Hour)))
			}
			rs := ownedRS(webDeployment(10, "nginx:1.0"), "nginx:1.0", 1, 10, 10, ago(time.Hour))
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}}, Request{})

			if got, want := describePlan(plan), expand(tt.wantSteps, "", rs.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
			if c == nil {
				t.Fatalf("Progressing condition missing, want %s", tt.wantProgress)
			}
			if got := string(c.Status) + "/" + c.Reason; got != tt.wantProgress {
				t.Errorf("Progressing = %s, want %s", got, tt.wantProgress)
			}
			if c.Reason == PausedDeployReason && c.Message != "Deployment is paused" {
				t.Errorf("Progressing message = %q, want %q", c.Message, "Deployment is paused")
			}
		})
	}
}

// (8) Old ReplicaSets beyond revisionHistoryLimit are deleted once the rollout is complete.
func TestDecideCleanup(t *testing.T) {
	tests := []struct {
		name        string
		giveLimit   *int32
		giveRequest *int64
		giveMutate  func(d *appsv1.Deployment, old []*appsv1.ReplicaSet)
		wantDelete  []string // revisions of the deleted ReplicaSets, in order
		wantPhase   Phase
	}{
		{
			// Three old revisions, limit 1: the two oldest by revision go, although the
			// creation timestamps run the other way.
			name:       "oldest beyond the limit",
			giveLimit:  ptrTo(int32(1)),
			wantDelete: []string{"1", "2"},
			wantPhase:  PhaseComplete,
		},
		{
			name:       "limit zero",
			giveLimit:  ptrTo(int32(0)),
			wantDelete: []string{"1", "2", "3"},
			wantPhase:  PhaseComplete,
		},
		{
			name:      "within the limit",
			giveLimit: ptrTo(int32(3)),
			wantPhase: PhaseComplete,
		},
		{
			name:      "unlimited",
			giveLimit: ptrTo(int32(math.MaxInt32)),
			wantPhase: PhaseComplete,
		},
		{
			name:      "no limit set",
			giveLimit: nil,
			wantPhase: PhaseComplete,
		},
		{
			name:      "pods still terminating are kept",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(_ *appsv1.Deployment, old []*appsv1.ReplicaSet) {
				old[0].Status.Replicas = 1
			},
			wantDelete: []string{"2"},
			// The terminating pod counts in status.replicas (4 of 3).
			wantPhase: PhaseProgressing,
		},
		{
			name:      "not yet observed by the ReplicaSet controller",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(_ *appsv1.Deployment, old []*appsv1.ReplicaSet) {
				old[1].Generation = 3
				old[1].Status.ObservedGeneration = 2
				old[1].Status.TerminatingReplicas = ptrTo(int32(0))
			},
			wantDelete: []string{"1"},
			wantPhase:  PhaseComplete,
		},
		{
			// Already being deleted: neither counted nor deleted again. Two remain, one over.
			name:      "being deleted",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(_ *appsv1.Deployment, old []*appsv1.ReplicaSet) {
				old[0].DeletionTimestamp = ptrTo(ago(time.Second))
			},
			wantDelete: []string{"2"},
			wantPhase:  PhaseComplete,
		},
		{
			name:      "rollout not complete",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(d *appsv1.Deployment, _ []*appsv1.ReplicaSet) {
				d.Status.UpdatedReplicas = 2
			},
			wantPhase: PhaseComplete,
		},
		{
			name:      "paused",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(d *appsv1.Deployment, _ []*appsv1.ReplicaSet) {
				d.Spec.Paused = true
			},
			wantDelete: []string{"1", "2"},
			wantPhase:  PhasePaused,
		},
		{
			// A paused Deployment with a rollback waiting keeps its history: the revision to
			// roll back to may be among the oldest.
			name:      "paused with a rollback pending",
			giveLimit: ptrTo(int32(1)),
			giveMutate: func(d *appsv1.Deployment, _ []*appsv1.ReplicaSet) {
				d.Spec.Paused = true
				d.Annotations[appsv1.DeprecatedRollbackTo] = "1"
			},
			wantPhase: PhasePaused,
		},
		{
			name:        "paused with a rollback signal pending",
			giveLimit:   ptrTo(int32(1)),
			giveRequest: ptrTo(int64(1)),
			giveMutate: func(d *appsv1.Deployment, _ []*appsv1.ReplicaSet) {
				d.Spec.Paused = true
			},
			wantPhase: PhasePaused,
		},
		{
			// Not paused: the rollback is carried out and nothing is cleaned up in that sync.
			name:        "rollback",
			giveLimit:   ptrTo(int32(1)),
			giveRequest: ptrTo(int64(1)),
			wantPhase:   PhaseRollingBack,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(3, "nginx:1.3")
			d.Spec.RevisionHistoryLimit = tt.giveLimit
			d.Annotations[RevisionAnnotation] = "4"
			d.Generation = 4
			d.Status = settledStatus(d, 3)
			var old []*appsv1.ReplicaSet
			for rev := 1; rev <= 3; rev++ {
				// Revision 1 is the most recently created, to show the order is by revision.
				old = append(old, ownedRS(d, fmt.Sprintf("nginx:1.%d", rev-1), rev, 0, 0, ago(time.Duration(rev)*time.Hour)))
			}
			if tt.giveMutate != nil {
				tt.giveMutate(d, old)
			}
			current := ownedRS(d, "nginx:1.3", 4, 3, 3, ago(time.Minute))
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: append([]*appsv1.ReplicaSet{current}, old...)}, Request{RollbackTo: tt.giveRequest})

			var wantNames []string
			for _, rev := range tt.wantDelete {
				for _, rs := range old {
					if rs.Annotations[RevisionAnnotation] == rev {
						wantNames = append(wantNames, rs.Name)
					}
				}
			}
			var gotNames []string
			for _, s := range plan.Steps {
				if s.Kind == StepCleanup {
					gotNames = append(gotNames, refNames(s.Delete)...)
					for _, ref := range s.Delete {
						if ref.UID != types.UID(ref.Name+"-uid") {
							t.Errorf("delete %s with UID %q, want %q", ref.Name, ref.UID, ref.Name+"-uid")
						}
					}
				}
			}
			if !reflect.DeepEqual(gotNames, wantNames) {
				t.Errorf("deleted = %v, want %v", gotNames, wantNames)
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
		})
	}
}

// (10) A scaling event in the middle of a rollout is shared out proportionally.
func TestDecideScalingEvent(t *testing.T) {
	tests := []struct {
		name         string
		giveReplicas int32
		giveNew      int32
		giveOld      int32
		giveOldDesir string // desired-replicas on the old RS, "" for the Deployment's old size
		wantSteps    []string
		wantEvents   []string
		wantDesired  string
		wantMax      string
	}{
		{
			// Rolling out at 10 (25%: surge 3), new 6 + old 7 = 13, both annotated 10/13.
			// Scaled to 20 (surge 5): allowed 25, toAdd 12. Old first (larger):
			// round(7×25/13) = 13, +6; new: round(6×25/13) = 12, +6.
			name:         "scale up 10 to 20",
			giveReplicas: 20,
			giveNew:      6,
			giveOld:      7,
			wantSteps:    []string{"ScaleUpReplicaSet {old} 7->13", "ScaleUpReplicaSet {new} 6->12", "UpdateDeploymentStatus"},
			wantEvents: []string{
				"Normal ScalingReplicaSet: Scaled up replica set {old} from 7 to 13",
				"Normal ScalingReplicaSet: Scaled up replica set {new} from 6 to 12",
			},
			wantDesired: "20",
			wantMax:     "25",
		},
		{
			// Scaled to 5 (surge ceil(1.25) = 2): allowed 7, toAdd −6. Old first:
			// round(7×7/13) = 4, −3; new: round(6×7/13) = 3, −3.
			name:         "scale down 10 to 5",
			giveReplicas: 5,
			giveNew:      6,
			giveOld:      7,
			wantSteps:    []string{"ScaleDownReplicaSet {old} 7->4", "ScaleDownReplicaSet {new} 6->3", "UpdateDeploymentStatus"},
			wantEvents: []string{
				"Normal ScalingReplicaSet: Scaled down replica set {old} from 7 to 4",
				"Normal ScalingReplicaSet: Scaled down replica set {new} from 6 to 3",
			},
			wantDesired: "5",
			wantMax:     "7",
		},
		{
			// Scaled to 0: allowed 0, both give up their whole size.
			name:         "scale to zero",
			giveReplicas: 0,
			giveNew:      6,
			giveOld:      7,
			wantSteps:    []string{"ScaleDownReplicaSet {old} 7->0", "ScaleDownReplicaSet {new} 6->0", "UpdateDeploymentStatus"},
			wantEvents: []string{
				"Normal ScalingReplicaSet: Scaled down replica set {old} from 7 to 0",
				"Normal ScalingReplicaSet: Scaled down replica set {new} from 6 to 0",
			},
			wantDesired: "0",
			wantMax:     "0",
		},
		{
			// Only the new RS is active: it takes the whole new size.
			name:         "single active ReplicaSet",
			giveReplicas: 15,
			giveNew:      10,
			giveOld:      0,
			wantSteps:    []string{"ScaleUpReplicaSet {new} 10->15", "UpdateDeploymentStatus"},
			wantEvents:   []string{"Normal ScalingReplicaSet: Scaled up replica set {new} from 10 to 15"},
			wantDesired:  "15",
			wantMax:      "19",
		},
		{
			// The new RS is saturated at 10 and an old one sized for 8 still runs 2: the old
			// one goes to 0 instead of sharing.
			name:         "saturated new ReplicaSet",
			giveReplicas: 10,
			giveNew:      10,
			giveOld:      2,
			giveOldDesir: "8",
			wantSteps:    []string{"ScaleDownReplicaSet {old} 2->0", "UpdateDeploymentStatus"},
			wantEvents:   []string{"Normal ScalingReplicaSet: Scaled down replica set {old} from 2 to 0"},
			wantDesired:  "10",
			wantMax:      "13",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := webDeployment(10, "nginx:1.1")
			newRS := ownedRS(before, "nginx:1.1", 2, tt.giveNew, tt.giveNew, ago(time.Minute))
			old := ownedRS(before, "nginx:1.0", 1, tt.giveOld, tt.giveOld, ago(time.Hour))
			if tt.giveOldDesir != "" {
				old.Annotations[DesiredReplicasAnnotation] = tt.giveOldDesir
			}
			d := webDeployment(tt.giveReplicas, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			d.Generation = 3
			d.Status = settledStatus(d, tt.giveNew+tt.giveOld)
			d.Status.ObservedGeneration = 2
			d.Status.UpdatedReplicas = tt.giveNew
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, old}}, Request{})

			if got, want := describePlan(plan), expand(tt.wantSteps, newRS.Name, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if got, want := eventsOf(plan), expand(tt.wantEvents, newRS.Name, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			for _, s := range plan.Steps {
				if s.ReplicaSet == nil {
					continue
				}
				if got := s.ReplicaSet.Annotations[DesiredReplicasAnnotation]; got != tt.wantDesired {
					t.Errorf("%s desired-replicas = %q, want %q", s.ReplicaSet.Name, got, tt.wantDesired)
				}
				if got := s.ReplicaSet.Annotations[MaxReplicasAnnotation]; got != tt.wantMax {
					t.Errorf("%s max-replicas = %q, want %q", s.ReplicaSet.Name, got, tt.wantMax)
				}
			}
			if stepOf(plan, StepCreate) != nil {
				t.Errorf("a scaling event created a ReplicaSet")
			}
		})
	}
}

// Two writes to one ReplicaSet in a sync become one step that tells the whole change.
func TestDecideMergesWrites(t *testing.T) {
	// The new RS carries revision 1 while the old one has 2 (a rollback to an old template
	// reuses its ReplicaSet): the sync first bumps the revision to 3, then scales it up. Both
	// land in one ScaleUp from the original size, with the new revision and history.
	d := webDeployment(10, "nginx:1.0")
	d.Annotations[RevisionAnnotation] = "2"
	d.Generation = 3
	reused := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(2*time.Hour))
	current := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(time.Hour))
	d.Status = settledStatus(d, 10)
	d.Status.ObservedGeneration = 2
	plan := decideChained(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{reused, current}}, Request{}, false)

	// One move, as upstream: maxSurge 3: 13 − 10 = 3 for the reused RS, and a scale-up ends
	// the sync.
	wantSteps := []string{fmt.Sprintf("ScaleUpReplicaSet %s 0->3", reused.Name), "UpdateDeploymentStatus"}
	if got := describePlan(plan); !reflect.DeepEqual(got, wantSteps) {
		t.Fatalf("steps = %q, want %q", got, wantSteps)
	}
	wantEvents := []string{fmt.Sprintf("Normal ScalingReplicaSet: Scaled up replica set %s from 0 to 3", reused.Name)}
	if got := eventsOf(plan); !reflect.DeepEqual(got, wantEvents) {
		t.Errorf("events = %q, want %q", got, wantEvents)
	}
	up := plan.Steps[0].ReplicaSet
	tests := []struct {
		name string
		key  string
		want string
	}{
		{name: "revision", key: RevisionAnnotation, want: "3"},
		{name: "history", key: RevisionHistoryAnnotation, want: "1"},
		{name: "desired", key: DesiredReplicasAnnotation, want: "10"},
		{name: "max", key: MaxReplicasAnnotation, want: "13"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := up.Annotations[tt.key]; got != tt.want {
				t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	if plan.Revision != 3 {
		t.Errorf("Revision = %d, want 3", plan.Revision)
	}
}
