package watcher

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

func ptrTo[T any](v T) *T { return &v }

// coveredDeployment is prod/web with 3 replicas at generation 2, its status as given.
func coveredDeployment(st appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", UID: "web-uid", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptrTo(int32(3))},
		Status:     st,
	}
}

func progressing(reason string, status corev1.ConditionStatus) []appsv1.DeploymentCondition {
	return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason}}
}

func TestWorkerCovers(t *testing.T) {
	complete := appsv1.DeploymentStatus{
		ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: progressing(k8s.NewRSAvailableReason, corev1.ConditionTrue),
	}
	rolling := appsv1.DeploymentStatus{
		ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: progressing(k8s.ReplicaSetUpdatedReason, corev1.ConditionTrue),
	}
	tests := []struct {
		name string
		give *appsv1.Deployment
		want bool
	}{
		{name: "complete", give: coveredDeployment(complete), want: false},
		{name: "progressing", give: coveredDeployment(rolling), want: true},
		{
			name: "progressing without a Progressing condition (no deadline)",
			give: coveredDeployment(func() appsv1.DeploymentStatus { s := rolling; s.Conditions = nil; return s }()),
			want: true,
		},
		{
			name: "paused mid-rollout",
			give: func() *appsv1.Deployment { d := coveredDeployment(rolling); d.Spec.Paused = true; return d }(),
			want: false,
		},
		{
			name: "paused and complete",
			give: func() *appsv1.Deployment { d := coveredDeployment(complete); d.Spec.Paused = true; return d }(),
			want: false,
		},
		{
			name: "deadline exceeded",
			give: coveredDeployment(func() appsv1.DeploymentStatus {
				s := rolling
				s.Conditions = progressing(k8s.TimedOutReason, corev1.ConditionFalse)
				return s
			}()),
			want: false,
		},
		{
			// Not complete by `kubectl rollout status` rules: the watcher signalled the spec
			// change itself, and the sync it wakes waits in the worker.
			name: "generation not observed yet",
			give: coveredDeployment(func() appsv1.DeploymentStatus { s := complete; s.ObservedGeneration = 1; return s }()),
			want: true,
		},
		{
			name: "scaled up, not all available",
			give: coveredDeployment(func() appsv1.DeploymentStatus {
				s := complete
				s.AvailableReplicas = 2
				return s
			}()),
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WorkerCovers(tt.give); got != tt.want {
				t.Errorf("WorkerCovers() = %t, want %t (status %+v)", got, tt.want, tt.give.Status)
			}
		})
	}
}

// baseRS is prod/web-abc at resourceVersion 5, 3 replicas all available.
func baseRS() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "prod", Name: "web-abc", UID: "rs-uid", ResourceVersion: "5", Generation: 1,
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{k8s.RevisionAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid", Controller: ptrTo(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(int32(3))},
		Status: appsv1.ReplicaSetStatus{
			Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 1,
		},
	}
}

// changedRS is baseRS at a newer resourceVersion with f applied.
func changedRS(f func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := baseRS()
	rs.ResourceVersion = "6"
	f(rs)
	return rs
}

func TestReplicaSetChanged(t *testing.T) {
	scaledToZero := func(rs *appsv1.ReplicaSet) {
		rs.Spec.Replicas = ptrTo(int32(0))
		rs.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1}
	}
	tests := []struct {
		name    string
		give    *appsv1.ReplicaSet // old
		giveNew *appsv1.ReplicaSet
		want    bool
	}{
		{name: "same resourceVersion (a resync)", give: baseRS(), giveNew: baseRS(), want: false},
		{name: "nothing but the resourceVersion", give: baseRS(), giveNew: changedRS(func(*appsv1.ReplicaSet) {}), want: false},
		{name: "spec replicas", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptrTo(int32(4)) }), want: true},
		{name: "labels", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Labels["app"] = "other" }), want: true},
		{name: "annotations", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Annotations[k8s.RevisionAnnotation] = "2" }), want: true},
		{name: "owner", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.OwnerReferences = nil }), want: true},
		{
			name: "deletion",
			give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = ptrTo(metav1.Now()) }),
			want: true,
		},
		{name: "status replicas", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 2 }), want: true},
		{name: "ready replicas", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.ReadyReplicas = 2 }), want: true},
		{name: "available replicas", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas = 2 }), want: true},
		{
			name: "terminating replicas",
			give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.TerminatingReplicas = ptrTo(int32(1)) }),
			want: true,
		},
		{
			name: "conditions",
			give: baseRS(),
			giveNew: changedRS(func(rs *appsv1.ReplicaSet) {
				rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue}}
			}),
			want: true,
		},
		{name: "fullyLabeledReplicas only", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.FullyLabeledReplicas = 2 }), want: false},
		{name: "observedGeneration only", give: baseRS(), giveNew: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.ObservedGeneration = 2 }), want: false},
		{
			// At 0 replicas the observed generation gates the ReplicaSet's cleanup.
			name: "observedGeneration only, at 0 replicas",
			give: changedRS(scaledToZero),
			giveNew: changedRS(func(rs *appsv1.ReplicaSet) {
				scaledToZero(rs)
				rs.ResourceVersion = "7"
				rs.Status.ObservedGeneration = 2
			}),
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replicaSetChanged(tt.give, tt.giveNew); got != tt.want {
				t.Errorf("replicaSetChanged() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestStatusOnly(t *testing.T) {
	tests := []struct {
		name string
		give *appsv1.ReplicaSet // the new object; the old is baseRS
		want bool
	}{
		{name: "status counts", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas = 1 }), want: true},
		{name: "nothing", give: changedRS(func(*appsv1.ReplicaSet) {}), want: true},
		{name: "spec", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = 5 }), want: false},
		{name: "labels", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.Labels["x"] = "y" }), want: false},
		{name: "annotations", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.Annotations["x"] = "y" }), want: false},
		{name: "owners", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.OwnerReferences[0].UID = "other" }), want: false},
		{name: "deletion", give: changedRS(func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = ptrTo(metav1.Now()) }), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statusOnly(baseRS(), tt.give); got != tt.want {
				t.Errorf("statusOnly() = %t, want %t", got, tt.want)
			}
		})
	}
}

func entry(manager string, op metav1.ManagedFieldsOperationType, subresource string, at time.Time) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager: manager, Operation: op, Subresource: subresource, APIVersion: "apps/v1",
		Time: ptrTo(metav1.NewTime(at)), FieldsType: "FieldsV1",
	}
}

func TestWrittenOnlyBy(t *testing.T) {
	const us = kube.FieldManager
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	update, apply := metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	with := func(entries ...metav1.ManagedFieldsEntry) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries}}
	}
	tests := []struct {
		name    string
		give    *appsv1.ReplicaSet // old
		giveNew *appsv1.ReplicaSet
		want    bool
	}{
		{name: "no managedFields at all", give: with(), giveNew: with(), want: false},
		{name: "created by us", give: &appsv1.ReplicaSet{}, giveNew: with(entry(us, update, "", t0)), want: true},
		{name: "created by kubectl", give: &appsv1.ReplicaSet{}, giveNew: with(entry("kubectl", update, "", t0)), want: false},
		{
			name:    "our entry moved",
			give:    with(entry(us, update, "", t0), entry("kubectl", apply, "", t0)),
			giveNew: with(entry(us, update, "", t1), entry("kubectl", apply, "", t0)),
			want:    true,
		},
		{
			name:    "our status subresource entry appeared",
			give:    with(entry(us, update, "", t0)),
			giveNew: with(entry(us, update, "", t0), entry(us, update, "status", t1)),
			want:    true,
		},
		{
			name:    "someone else's entry moved",
			give:    with(entry(us, update, "", t0), entry("kubectl", apply, "", t0)),
			giveNew: with(entry(us, update, "", t0), entry("kubectl", apply, "", t1)),
			want:    false,
		},
		{
			name:    "both moved",
			give:    with(entry(us, update, "", t0), entry("kubectl", apply, "", t0)),
			giveNew: with(entry(us, update, "", t1), entry("kubectl", apply, "", t1)),
			want:    false,
		},
		{
			name:    "the replicaset controller's status write",
			give:    with(entry(us, update, "", t0)),
			giveNew: with(entry(us, update, "", t0), entry("kube-controller-manager", update, "status", t1)),
			want:    false,
		},
		{
			name:    "no entry moved (a write that changed no field owner)",
			give:    with(entry(us, update, "", t0)),
			giveNew: with(entry(us, update, "", t0)),
			want:    false,
		},
		{
			name:    "an entry dropped, none moved",
			give:    with(entry(us, update, "", t0), entry("kubectl", apply, "", t0)),
			giveNew: with(entry(us, update, "", t0)),
			want:    false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writtenOnlyBy(tt.give, tt.giveNew, us); got != tt.want {
				t.Errorf("writtenOnlyBy() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestSpecChanged(t *testing.T) {
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Namespace: "prod", Name: "web", UID: "web-uid", Generation: 2, ResourceVersion: "10",
		}}
	}
	changed := func(f func(*appsv1.Deployment)) *appsv1.Deployment {
		d := base()
		d.ResourceVersion = "11"
		f(d)
		return d
	}
	tests := []struct {
		name string
		give *appsv1.Deployment // the new object; the old is base
		want bool
	}{
		{name: "new generation", give: changed(func(d *appsv1.Deployment) { d.Generation = 3 }), want: true},
		{name: "new UID", give: changed(func(d *appsv1.Deployment) { d.UID = "web-uid-2" }), want: true},
		{name: "being deleted", give: changed(func(d *appsv1.Deployment) { d.DeletionTimestamp = ptrTo(metav1.Now()) }), want: true},
		{name: "status only", give: changed(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 2 }), want: false},
		{name: "resourceVersion only", give: changed(func(*appsv1.Deployment) {}), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := specChanged(base(), tt.give); got != tt.want {
				t.Errorf("specChanged() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestStartOptionsCluster(t *testing.T) {
	in := contract.Input{Namespace: "prod", Name: "web", Cluster: "eu"}
	got := StartOptions("deployment-controller.eu", true, in)
	if got.ID != "deployment/eu/prod/web" || got.TaskQueue != "deployment-controller.eu" || got.StaticSummary != "Deployment prod/web in cluster eu" {
		t.Errorf("ID, TaskQueue, StaticSummary = %q, %q, %q, want %q, %q, %q", got.ID, got.TaskQueue, got.StaticSummary,
			"deployment/eu/prod/web", "deployment-controller.eu", "Deployment prod/web in cluster eu")
	}
	if n := got.TypedSearchAttributes.Size(); n != 3 {
		t.Fatalf("search attributes = %d, want 3", n)
	}
	for key, want := range map[string]string{contract.SearchAttrNamespace: "prod", contract.SearchAttrDeployment: "web", contract.SearchAttrCluster: "eu"} {
		v, ok := got.TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(key))
		if !ok || v != want {
			t.Errorf("%s = %q (set %t), want %q", key, v, ok, want)
		}
	}
}

func TestStartOptions(t *testing.T) {
	in := contract.Input{Namespace: "prod", Name: "web"}
	tests := []struct {
		name     string
		give     bool // search attributes
		wantSize int  // search attributes set
	}{
		{name: "without search attributes", give: false, wantSize: 0},
		{name: "with search attributes", give: true, wantSize: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StartOptions("tq", tt.give, in)
			if got.ID != "deployment/prod/web" || got.TaskQueue != "tq" || got.StaticSummary != "Deployment prod/web" {
				t.Errorf("ID, TaskQueue, StaticSummary = %q, %q, %q, want %q, %q, %q",
					got.ID, got.TaskQueue, got.StaticSummary, "deployment/prod/web", "tq", "Deployment prod/web")
			}
			if n := got.TypedSearchAttributes.Size(); n != tt.wantSize {
				t.Fatalf("search attributes = %d, want %d", n, tt.wantSize)
			}
			if tt.wantSize == 0 {
				return
			}
			for key, want := range map[string]string{contract.SearchAttrNamespace: "prod", contract.SearchAttrDeployment: "web"} {
				v, ok := got.TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(key))
				if !ok || v != want {
					t.Errorf("%s = %q (set %t), want %q", key, v, ok, want)
				}
			}
		})
	}
}

// countingPacer holds a signal for its first n calls.
type countingPacer struct {
	n, calls int
}

func (p *countingPacer) Wait(time.Time) time.Duration {
	p.calls++
	if p.calls <= p.n {
		return 20 * time.Millisecond
	}
	return 0
}

// A signal waits while the Pacer holds it, and goes once it lets it; a canceled context ends
// the wait.
func TestPace(t *testing.T) {
	tests := []struct {
		name      string
		hold      int
		cancel    bool
		wantCalls int
		wantAtLst time.Duration
	}{
		{name: "budget free", hold: 0, wantCalls: 1},
		{name: "held three times", hold: 3, wantCalls: 4, wantAtLst: 60 * time.Millisecond},
		{name: "canceled while held", hold: 1000, cancel: true, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &countingPacer{n: tt.hold}
			w := &Watcher{opts: Options{Pacer: p}}
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				cancel()
			}
			defer cancel()
			start := time.Now()
			w.pace(ctx)
			if took := time.Since(start); p.calls != tt.wantCalls || took < tt.wantAtLst {
				t.Errorf("pace: %d calls in %s, want %d calls in at least %s", p.calls, took, tt.wantCalls, tt.wantAtLst)
			}
		})
	}
}

// TestStartSummary: a run started by the watcher says in the Temporal UI what the Deployment
// rolls out, and how.
func TestStartSummary(t *testing.T) {
	in := contract.Input{Namespace: "shop", Name: "web", Cluster: "eu"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: map[string]string{
		k8s.StepsAnnotation:    `[{"setWeight":20},{"pause":{}},{"setWeight":60}]`,
		k8s.TrafficAnnotation:  `{"httpRoute":{"name":"shop"},"stableService":"web-stable","canaryService":"web-canary"}`,
		k8s.RevisionAnnotation: "4",
	}}}
	d.Spec.Replicas = ptrTo(int32(3))
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx:1.27"}, {Name: "proxy", Image: "envoy:1.31"}}
	summary, details := StartSummary(in, d)
	if want := "shop/web: app=nginx:1.27 proxy=envoy:1.31, canary in 3 steps, traffic on httproute shop in cluster eu"; summary != want {
		t.Errorf("summary %q, want %q", summary, want)
	}
	if want := "- images: `app=nginx:1.27`, `proxy=envoy:1.31`\n- strategy: canary in 3 steps, traffic on httproute shop\n- replicas: 3\n- revision at this run's start: 4"; details != want {
		t.Errorf("details %q, want %q", details, want)
	}
	d.Annotations = nil
	d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	if summary, _ := StartSummary(contract.Input{Namespace: "shop", Name: "web"}, d); summary != "shop/web: app=nginx:1.27 proxy=envoy:1.31, recreate" {
		t.Errorf("recreate: summary %q", summary)
	}
}
