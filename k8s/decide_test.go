package k8s

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecideNoDeployment(t *testing.T) {
	if _, err := Decide(Snapshot{}, Request{}, planNow); err == nil {
		t.Errorf("Decide(no deployment) error = nil, want an error")
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
