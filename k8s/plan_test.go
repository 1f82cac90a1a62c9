package k8s

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// planNow is the clock of every Decide call; fixture timestamps are whole seconds before it.
var planNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(planNow.Add(-d)) }

const hashKey = appsv1.DefaultDeploymentUniqueLabelKey

// webDeployment is Deployment prod/web running image, RollingUpdate 25%/25%, as the apiserver
// stores it after defaulting.
func webDeployment(replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "web-uid", Generation: 1,
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptrTo(intstr.FromString("25%")),
					MaxUnavailable: ptrTo(intstr.FromString("25%")),
				},
			},
			RevisionHistoryLimit:    ptrTo(int32(10)),
			ProgressDeadlineSeconds: ptrTo(int32(600)),
		},
	}
}

func useRecreate(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// templateFor is d's pod template with another image.
func templateFor(d *appsv1.Deployment, image string) corev1.PodTemplateSpec {
	t := *d.Spec.Template.DeepCopy()
	t.Spec.Containers[0].Image = image
	return t
}

// rsName is the name the controller gives d's ReplicaSet for image.
func rsName(d *appsv1.Deployment, image string) string {
	t := templateFor(d, image)
	return ReplicaSetName(d.Name, PodTemplateHash(&t, nil))
}

// ownedRS is d's ReplicaSet for image as the controller leaves it: hashed name, labels and
// selector, controller reference, revision and replica annotations for d's current size, and
// status with `available` of `size` pods up.
func ownedRS(d *appsv1.Deployment, image string, revision int, size, available int32, created metav1.Time) *appsv1.ReplicaSet {
	tmpl := templateFor(d, image)
	hash := PodTemplateHash(&tmpl, nil)
	tmpl.Labels = cloneAndAdd(tmpl.Labels, hashKey, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = cloneAndAdd(sel.MatchLabels, hashKey, hash)
	name := ReplicaSetName(d.Name, hash)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         d.Namespace,
			UID:               types.UID(name + "-uid"),
			CreationTimestamp: created,
			Labels:            tmpl.Labels,
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Annotations: map[string]string{
				RevisionAnnotation:        fmt.Sprint(revision),
				DesiredReplicasAnnotation: fmt.Sprint(replicas(d)),
				MaxReplicasAnnotation:     fmt.Sprint(replicas(d) + MaxSurge(d)),
			},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(size),
			Selector: sel,
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{Replicas: size, ReadyReplicas: available, AvailableReplicas: available},
	}
}

// settledStatus is the status of a Deployment whose rollout finished an hour ago with n pods.
func settledStatus(d *appsv1.Deployment, n int32) appsv1.DeploymentStatus {
	t := ago(time.Hour)
	return appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            n,
		UpdatedReplicas:     n,
		ReadyReplicas:       n,
		AvailableReplicas:   n,
		TerminatingReplicas: ptrTo(int32(0)),
		Conditions: []appsv1.DeploymentCondition{
			NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.", t),
			NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, "ReplicaSet has successfully progressed.", t),
		},
	}
}

// describe renders a step on one line, so a plan can be compared as a list of strings.
func describe(s Step) string {
	switch s.Kind {
	case StepCreate:
		return fmt.Sprintf("%s %s %d", s.Kind, s.ReplicaSet.Name, rsReplicas(s.ReplicaSet))
	case StepScaleUp, StepScaleDown, StepUpdateRS:
		return fmt.Sprintf("%s %s %d->%d", s.Kind, s.ReplicaSet.Name, s.FromReplicas, rsReplicas(s.ReplicaSet))
	case StepClaim:
		return fmt.Sprintf("%s adopt=%v release=%v", s.Kind, refNames(s.Adopt), refNames(s.Release))
	case StepCleanup:
		return fmt.Sprintf("%s %v", s.Kind, refNames(s.Delete))
	case StepEvent:
		return fmt.Sprintf("%s %s", s.Kind, s.Events[0].Reason)
	}
	return string(s.Kind)
}

func describePlan(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, describe(s))
	}
	return out
}

func refNames(refs []ObjectRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// eventsOf lists the plan's events as "Type Reason: Message".
func eventsOf(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		for _, e := range s.Events {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
		}
	}
	return out
}

func stepOf(p Plan, kind StepKind) *Step {
	for i := range p.Steps {
		if p.Steps[i].Kind == kind {
			return &p.Steps[i]
		}
	}
	return nil
}

// expand replaces {new} and {old} in each string.
func expand(ss []string, newName, oldName string) []string {
	r := strings.NewReplacer("{new}", newName, "{old}", oldName)
	var out []string
	for _, s := range ss {
		out = append(out, r.Replace(s))
	}
	return out
}

func decide(t *testing.T, s Snapshot, req Request) Plan {
	t.Helper()
	p, err := Decide(s, req, planNow)
	if err != nil {
		t.Fatalf("Decide() error = %v, want nil", err)
	}
	return p
}

func TestDecideNoDeployment(t *testing.T) {
	if _, err := Decide(Snapshot{}, Request{}, planNow); err == nil {
		t.Errorf("Decide(no deployment) error = nil, want an error")
	}
}

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
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old}}, Request{Chain: tt.giveChain})

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
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, old}}, Request{Chain: tt.giveChain})

			if got, want := describePlan(plan), expand(tt.wantSteps, newRS.Name, old.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
		})
	}
}

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

// (5) Rollback requests, by signal or by the deprecated annotation.
func TestDecideRollback(t *testing.T) {
	tests := []struct {
		name           string
		giveRequest    *int64
		giveAnnotation string // deprecated.deployment.rollback.to
		giveOnlyNew    bool   // no ReplicaSet for revision 1
		wantEvent      string
		wantImage      string
		wantCause      string
		wantNoWrite    bool
	}{
		{
			name:        "to revision 1",
			giveRequest: ptrTo(int64(1)),
			wantEvent:   `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:   "nginx:1.0",
			wantCause:   "deploy 1.0",
		},
		{
			name:        "to the previous revision",
			giveRequest: ptrTo(int64(0)),
			wantEvent:   `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:   "nginx:1.0",
			wantCause:   "deploy 1.0",
		},
		{
			name:           "deprecated annotation",
			giveAnnotation: "1",
			wantEvent:      `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:      "nginx:1.0",
			wantCause:      "deploy 1.0",
		},
		{
			name:           "signal wins over the annotation",
			giveRequest:    ptrTo(int64(2)),
			giveAnnotation: "1",
			wantEvent:      `Warning DeploymentRollbackTemplateUnchanged: The rollback revision contains the same template as current deployment "web"`,
			wantImage:      "nginx:1.1",
			wantCause:      "deploy 1.1",
		},
		{
			name:        "unknown revision",
			giveRequest: ptrTo(int64(7)),
			wantNoWrite: true,
			wantEvent:   "Warning DeploymentRollbackRevisionNotFound: Unable to find the revision to rollback to.",
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
		{
			name:           "unknown revision by annotation",
			giveAnnotation: "9",
			wantEvent:      "Warning DeploymentRollbackRevisionNotFound: Unable to find the revision to rollback to.",
			wantImage:      "nginx:1.1",
			wantCause:      "deploy 1.1",
		},
		{
			name:        "no previous revision",
			giveRequest: ptrTo(int64(0)),
			wantNoWrite: true,
			giveOnlyNew: true,
			wantEvent:   "Warning DeploymentRollbackRevisionNotFound: Unable to find last revision.",
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
		{
			name:        "current template",
			giveRequest: ptrTo(int64(2)),
			wantNoWrite: true,
			wantEvent:   `Warning DeploymentRollbackTemplateUnchanged: The rollback revision contains the same template as current deployment "web"`,
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			d.Annotations[ChangeCauseAnnotation] = "deploy 1.1"
			if tt.giveAnnotation != "" {
				d.Annotations[appsv1.DeprecatedRollbackTo] = tt.giveAnnotation
			}
			d.Status = settledStatus(d, 10)
			rs1 := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(2*time.Hour))
			rs1.Annotations[ChangeCauseAnnotation] = "deploy 1.0"
			rs2 := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(time.Hour))
			rs2.Annotations[ChangeCauseAnnotation] = "deploy 1.1"
			rss := []*appsv1.ReplicaSet{rs1, rs2}
			if tt.giveOnlyNew {
				rss = rss[1:]
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{RollbackTo: tt.giveRequest})

			if tt.wantNoWrite {
				// A signal that changes nothing writes nothing: only the event.
				reason, _, _ := strings.Cut(strings.TrimPrefix(tt.wantEvent, "Warning "), ":")
				if got, want := describePlan(plan), []string{"RecordEvent " + reason}; !reflect.DeepEqual(got, want) {
					t.Fatalf("steps = %q, want %q", got, want)
				}
				if got, want := eventsOf(plan), []string{tt.wantEvent}; !reflect.DeepEqual(got, want) {
					t.Errorf("events = %q, want %q", got, want)
				}
				if !plan.RollbackHandled {
					t.Errorf("RollbackHandled = false, want true")
				}
				return
			}
			if got, want := describePlan(plan), []string{"RollbackDeployment"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("steps = %q, want %q", got, want)
			}
			if got, want := eventsOf(plan), []string{tt.wantEvent}; !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			if !plan.RollbackHandled {
				t.Errorf("RollbackHandled = false, want true")
			}
			if plan.Phase != PhaseRollingBack {
				t.Errorf("Phase = %s, want %s", plan.Phase, PhaseRollingBack)
			}
			got := plan.Steps[0].Deployment
			wantTemplate := templateFor(d, tt.wantImage)
			if !reflect.DeepEqual(got.Spec.Template, wantTemplate) {
				t.Errorf("template = %+v, want %+v", got.Spec.Template, wantTemplate)
			}
			wantAnn := map[string]string{RevisionAnnotation: "2", ChangeCauseAnnotation: tt.wantCause}
			if !reflect.DeepEqual(got.Annotations, wantAnn) {
				t.Errorf("annotations = %v, want %v", got.Annotations, wantAnn)
			}
			if _, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; tt.giveAnnotation != "" && !ok {
				t.Errorf("Decide() removed the annotation from its snapshot")
			}
		})
	}
}

// (6) Invalid Deployments get a warning and nothing else.
func TestDecideInvalid(t *testing.T) {
	tests := []struct {
		name         string
		giveMutate   func(d *appsv1.Deployment)
		giveObserved int64
		wantSteps    []string
		wantEvent    string
		wantObserved int64
	}{
		{
			name:         "empty selector",
			giveMutate:   func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			giveObserved: 1,
			wantSteps:    []string{"RecordEvent SelectingAll", "UpdateDeploymentStatus"},
			wantEvent:    "Warning SelectingAll: This deployment is selecting all pods. A non-empty selector is required.",
			wantObserved: 2,
		},
		{
			name:         "empty selector, generation already observed",
			giveMutate:   func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			giveObserved: 2,
			wantSteps:    []string{"RecordEvent SelectingAll"},
			wantEvent:    "Warning SelectingAll: This deployment is selecting all pods. A non-empty selector is required.",
			wantObserved: 2,
		},
		{
			name:         "nil selector",
			giveMutate:   func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			giveObserved: 2,
			wantSteps:    []string{"RecordEvent SelectingAll"},
			wantEvent:    "Warning SelectingAll: This deployment is selecting all pods. A non-empty selector is required.",
			wantObserved: 2,
		},
		{
			name: "invalid selector",
			giveMutate: func(d *appsv1.Deployment) {
				d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
			},
			giveObserved: 1,
			wantSteps:    []string{"RecordEvent InvalidSelector"},
			wantObserved: 1,
		},
		{
			name:         "unsupported strategy",
			giveMutate:   func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" },
			giveObserved: 1,
			wantSteps:    []string{"RecordEvent InvalidStrategy"},
			wantObserved: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(3, "nginx:1.0")
			d.Generation = 2
			d.Status.ObservedGeneration = tt.giveObserved
			tt.giveMutate(d)
			// An orphan that would otherwise be adopted.
			orphan := ownedRS(webDeployment(3, "nginx:1.0"), "nginx:1.0", 1, 3, 3, ago(time.Hour))
			orphan.OwnerReferences = nil
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{orphan}}, Request{})

			if got := describePlan(plan); !reflect.DeepEqual(got, tt.wantSteps) {
				t.Errorf("steps = %q, want %q", got, tt.wantSteps)
			}
			if tt.wantEvent != "" {
				if got, want := eventsOf(plan), []string{tt.wantEvent}; !reflect.DeepEqual(got, want) {
					t.Errorf("events = %q, want %q", got, want)
				}
			}
			if plan.Phase != PhaseInvalid {
				t.Errorf("Phase = %s, want %s", plan.Phase, PhaseInvalid)
			}
			if plan.Message == "" {
				t.Errorf("Message = \"\", want an explanation")
			}
			if plan.Status.ObservedGeneration != tt.wantObserved {
				t.Errorf("observedGeneration = %d, want %d", plan.Status.ObservedGeneration, tt.wantObserved)
			}
		})
	}
}

// (7) Adoption of orphans and release of ReplicaSets that stopped matching.
func TestDecideClaim(t *testing.T) {
	d0 := webDeployment(3, "nginx:1.0")
	// current runs the Deployment's template; old(image) is an earlier, scaled-down revision.
	current := func() *appsv1.ReplicaSet { return ownedRS(d0, "nginx:1.0", 2, 3, 3, ago(time.Hour)) }
	old := func(image string) *appsv1.ReplicaSet { return ownedRS(d0, image, 1, 0, 0, ago(2*time.Hour)) }
	orphaned := func(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
		rs.OwnerReferences = nil
		return rs
	}
	relabeled := func(rs *appsv1.ReplicaSet, app string) *appsv1.ReplicaSet {
		rs.Labels = map[string]string{"app": app}
		return rs
	}
	renamed := func(rs *appsv1.ReplicaSet, name string) *appsv1.ReplicaSet {
		rs.Name, rs.UID = name, types.UID(name+"-uid")
		return rs
	}
	ref := func(rs *appsv1.ReplicaSet) ObjectRef { return ObjectRef{Name: rs.Name, UID: rs.UID} }

	tests := []struct {
		name         string
		giveRSs      []*appsv1.ReplicaSet
		giveDeleting bool
		wantSteps    []string
		wantAdopt    []ObjectRef
		wantRelease  []ObjectRef
		wantNewRS    string
		wantPhase    Phase
	}{
		{
			name:      "adopt a matching orphan",
			giveRSs:   []*appsv1.ReplicaSet{orphaned(current())},
			wantSteps: []string{fmt.Sprintf("ClaimReplicaSets adopt=[%s] release=[]", current().Name)},
			wantAdopt: []ObjectRef{ref(current())},
			wantNewRS: current().Name,
			wantPhase: PhaseComplete,
		},
		{
			name:        "release a ReplicaSet whose labels no longer match",
			giveRSs:     []*appsv1.ReplicaSet{current(), relabeled(old("nginx:0.9"), "legacy")},
			wantSteps:   []string{fmt.Sprintf("ClaimReplicaSets adopt=[] release=[%s]", old("nginx:0.9").Name)},
			wantRelease: []ObjectRef{ref(old("nginx:0.9"))},
			wantNewRS:   current().Name,
			wantPhase:   PhaseComplete,
		},
		{
			name:        "adopt and release in one step",
			giveRSs:     []*appsv1.ReplicaSet{orphaned(current()), relabeled(old("nginx:0.9"), "legacy")},
			wantSteps:   []string{fmt.Sprintf("ClaimReplicaSets adopt=[%s] release=[%s]", current().Name, old("nginx:0.9").Name)},
			wantAdopt:   []ObjectRef{ref(current())},
			wantRelease: []ObjectRef{ref(old("nginx:0.9"))},
			wantNewRS:   current().Name,
			wantPhase:   PhaseComplete,
		},
		{
			name: "leave alone what is not ours to take",
			giveRSs: []*appsv1.ReplicaSet{
				current(),
				func() *appsv1.ReplicaSet {
					rs := renamed(old("nginx:0.1"), "owned-elsewhere")
					rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: "api-uid", Controller: ptrTo(true)}}
					return rs
				}(),
				func() *appsv1.ReplicaSet {
					rs := orphaned(renamed(old("nginx:0.2"), "other-namespace"))
					rs.Namespace = "staging"
					return rs
				}(),
				func() *appsv1.ReplicaSet {
					rs := orphaned(renamed(old("nginx:0.3"), "being-deleted"))
					rs.DeletionTimestamp = ptrTo(ago(time.Second))
					return rs
				}(),
				relabeled(orphaned(renamed(old("nginx:0.4"), "unrelated")), "api"),
			},
			wantSteps: nil,
			wantNewRS: current().Name,
			wantPhase: PhaseComplete,
		},
		{
			// A Deployment being deleted neither adopts nor releases, and only syncs status.
			name: "deployment being deleted",
			giveRSs: []*appsv1.ReplicaSet{
				current(),
				orphaned(old("nginx:0.8")),
				relabeled(old("nginx:0.9"), "legacy"),
			},
			giveDeleting: true,
			wantSteps:    nil,
			wantNewRS:    current().Name,
			wantPhase:    PhaseDeleting,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := d0.DeepCopy()
			d.Annotations[RevisionAnnotation] = "2"
			d.Status = settledStatus(d, 3)
			if tt.giveDeleting {
				d.DeletionTimestamp = ptrTo(ago(time.Minute))
			}
			var before []*appsv1.ReplicaSet
			for _, rs := range tt.giveRSs {
				before = append(before, rs.DeepCopy())
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: tt.giveRSs}, Request{})

			if got := describePlan(plan); !reflect.DeepEqual(got, tt.wantSteps) {
				t.Errorf("steps = %q, want %q", got, tt.wantSteps)
			}
			if claim := stepOf(plan, StepClaim); claim != nil {
				if !reflect.DeepEqual(claim.Adopt, tt.wantAdopt) {
					t.Errorf("Adopt = %+v, want %+v", claim.Adopt, tt.wantAdopt)
				}
				if !reflect.DeepEqual(claim.Release, tt.wantRelease) {
					t.Errorf("Release = %+v, want %+v", claim.Release, tt.wantRelease)
				}
			}
			if plan.NewReplicaSet != tt.wantNewRS {
				t.Errorf("NewReplicaSet = %q, want %q", plan.NewReplicaSet, tt.wantNewRS)
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			if !reflect.DeepEqual(tt.giveRSs, before) {
				t.Errorf("Decide() modified the ReplicaSets of its snapshot")
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
	plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{reused, current}}, Request{})

	// maxSurge 3: 13 − 10 = 3 for the reused RS, and a scale-up ends the sync.
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

// TestDecideIsDeterministic: Decide runs inside the workflow, so the same snapshot must give
// the same plan every time. Go randomises map iteration order on every range, so repeating
// the call exposes any dependence on it.
func TestDecideIsDeterministic(t *testing.T) {
	d := webDeployment(10, "nginx:1.2")
	d.Annotations[RevisionAnnotation] = "2"
	d.Annotations["a"], d.Annotations["b"], d.Annotations["c"] = "1", "2", "3"
	d.Status = settledStatus(d, 10)
	old1 := ownedRS(d, "nginx:1.0", 1, 4, 4, ago(2*time.Hour))
	old2 := ownedRS(d, "nginx:1.1", 2, 6, 6, ago(time.Hour))
	snap := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old1, old2}}
	now := time.Now()
	first, err := Decide(snap, Request{}, now)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(first)
	for i := range 200 {
		plan, err := Decide(snap, Request{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(plan); string(got) != string(want) {
			t.Fatalf("run %d: plan = %s, want %s", i, got, want)
		}
	}
}
