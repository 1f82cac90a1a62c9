package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

const testNS = "default"

const (
	dUID  types.UID = "d-uid"
	rsUID types.UID = "rs-uid"
)

// retryable is the wantErr of an error that Temporal may retry (no non-retryable type).
const retryable = "retryable"

var (
	rsGVR = appsv1.SchemeGroupVersion.WithResource("replicasets")
	dGVR  = appsv1.SchemeGroupVersion.WithResource("deployments")
	rsGR  = schema.GroupResource{Group: "apps", Resource: "replicasets"}
	dGR   = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

func ptr[T any](v T) *T { return &v }

func testRef() DeploymentRef { return DeploymentRef{Namespace: testNS, Name: "web", UID: dUID} }

func podTemplate(image, hash string) corev1.PodTemplateSpec {
	labels := map[string]string{"app": "web"}
	if hash != "" {
		labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1"}},
			Containers:     []corev1.Container{{Name: "app", Image: image}},
		},
	}
}

// testDeployment is Deployment default/web at generation 2, revision 1, image nginx:1.
func testDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: "web", UID: dUID, Generation: 2, ResourceVersion: "10",
			Annotations: map[string]string{k8s.RevisionAnnotation: "1"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("nginx:1", ""),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3},
	}
}

func controllerRef(uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: uid,
		Controller: ptr(true), BlockOwnerDeletion: ptr(true),
	}
}

// otherOwner is a non-controller owner reference that adoption and release must keep.
var otherOwner = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm-uid"}

// testRS is a ReplicaSet of the test Deployment's template (hash "abc") controlled by owner;
// an empty owner makes it an orphan.
func testRS(name string, uid, owner types.UID, replicas int32) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: name, UID: uid, Generation: 1, ResourceVersion: "5",
			Labels:      map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"},
			Annotations: map[string]string{k8s.RevisionAnnotation: "1"},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}},
			Template: podTemplate("nginx:1", "abc"),
		},
	}
	if owner != "" {
		rs.OwnerReferences = []metav1.OwnerReference{controllerRef(owner)}
	}
	return rs
}

func withRS(rs *appsv1.ReplicaSet, f func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs = rs.DeepCopy()
	f(rs)
	return rs
}

func withDeployment(d *appsv1.Deployment, f func(*appsv1.Deployment)) *appsv1.Deployment {
	d = d.DeepCopy()
	f(d)
	return d
}

type fixture struct {
	a      *Activities
	client *fake.Clientset
	rec    *record.FakeRecorder
	m      *Metrics
}

// newFixture serves objs from a fake clientset, with a fake recorder and fresh metrics.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	var live []runtime.Object
	for _, o := range objs {
		if o != nil && !reflect.ValueOf(o).IsNil() {
			live = append(live, o)
		}
	}
	client := fake.NewClientset(live...)
	rec := record.NewFakeRecorder(100)
	m := NewMetrics(prometheus.NewRegistry())
	return &fixture{a: &Activities{Client: client, Recorder: rec, Metrics: m}, client: client, rec: rec, m: m}
}

// failFirst answers the first n calls of verb on resource ("deployments/status" names a
// subresource) with err; n < 0 answers every call. Later calls reach the object tracker.
func (f *fixture) failFirst(verb, resource string, n int, err error) {
	res, sub, _ := strings.Cut(resource, "/")
	calls := 0
	f.client.PrependReactor(verb, res, func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != sub {
			return false, nil, nil
		}
		calls++
		if n < 0 || calls <= n {
			return true, nil, err
		}
		return false, nil, nil
	})
}

func actionKey(a k8stesting.Action) string {
	r := a.GetResource().Resource
	if s := a.GetSubresource(); s != "" {
		r += "/" + s
	}
	return a.GetVerb() + " " + r
}

// actions lists the recorded calls as "verb resource[/subresource]", leaving out list and
// watch calls of the informers.
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "watch" {
			continue
		}
		out = append(out, actionKey(a))
	}
	return out
}

// actionsOf returns the recorded calls of one verb and resource.
func (f *fixture) actionsOf(verb, resource string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && strings.SplitN(actionKey(a), " ", 2)[1] == resource {
			out = append(out, a)
		}
	}
	return out
}

// events drains the recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// rs reads a ReplicaSet from the tracker without recording an action; nil when absent.
func (f *fixture) rs(t *testing.T, name string) *appsv1.ReplicaSet {
	t.Helper()
	obj, err := f.client.Tracker().Get(rsGVR, testNS, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get replicaset %s: %v", name, err)
	}
	return obj.(*appsv1.ReplicaSet)
}

// deployment reads the Deployment default/web from the tracker; nil when absent.
func (f *fixture) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	obj, err := f.client.Tracker().Get(dGVR, testNS, "web")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get deployment: %v", err)
	}
	return obj.(*appsv1.Deployment)
}

// errKind names err for comparison: "" for nil, the type of a non-retryable application
// error, or retryable.
func errKind(err error) string {
	if err == nil {
		return ""
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return appErr.Type()
	}
	return retryable
}

// checkErr fails unless err is of the wanted kind ("" for none, retryable, or an Err* type,
// checked with IsKind).
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if got := errKind(err); got != want {
		t.Fatalf("error = %v (kind %q), want kind %q", err, got, want)
	}
	if want != "" && want != retryable && !IsKind(err, want) {
		t.Fatalf("IsKind(%v, %q) = false, want true", err, want)
	}
}

func conflict(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New("the object has been modified"))
}

// ownersOf returns the ownerReferences sorted by UID (a strategic merge patch may put an added
// one first), nil for none.
func ownersOf(rs *appsv1.ReplicaSet) []metav1.OwnerReference {
	if rs == nil || len(rs.OwnerReferences) == 0 {
		return nil
	}
	refs := slices.Clone(rs.OwnerReferences)
	slices.SortFunc(refs, func(a, b metav1.OwnerReference) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return refs
}

// rsState is the part of a ReplicaSet that writeReplicaSet may change, and what it must keep.
type rsState struct {
	UID             types.UID
	Replicas        int32
	MinReadySeconds int32
	Annotations     map[string]string
	Labels          map[string]string
}

func stateOf(rs *appsv1.ReplicaSet) rsState {
	s := rsState{UID: rs.UID, MinReadySeconds: rs.Spec.MinReadySeconds, Annotations: rs.Annotations, Labels: rs.Labels}
	if rs.Spec.Replicas != nil {
		s.Replicas = *rs.Spec.Replicas
	}
	return s
}

func TestScaleUpReplicaSet(t *testing.T) {
	stale := testRS("web-abc", rsUID, dUID, 1)
	target := withRS(stale, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Replicas = ptr(int32(3))
		rs.Spec.MinReadySeconds = 5
		rs.Annotations[k8s.DesiredReplicasAnnotation] = "3"
		rs.Annotations[k8s.MaxReplicasAnnotation] = "4"
	})
	// fresh is what a concurrent writer left: another replica count, a foreign annotation and
	// label, a newer resourceVersion and generation.
	fresh := withRS(stale, func(rs *appsv1.ReplicaSet) {
		rs.ResourceVersion = "9"
		rs.Generation = 2
		rs.Spec.Replicas = ptr(int32(2))
		rs.Annotations["example.com/note"] = "kept"
		rs.Labels["team"] = "x"
	})
	scaled := k8s.Event{Type: corev1.EventTypeNormal, Reason: "ScalingReplicaSet", Message: "Scaled up replica set web-abc from 1 to 3"}
	scaledEvent := "Normal ScalingReplicaSet Scaled up replica set web-abc from 1 to 3"
	status := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3}
	})

	tests := []struct {
		name       string
		giveStored *appsv1.ReplicaSet // the ReplicaSet in the cluster; nil for none
		give       WriteReplicaSetInput
		giveFail   int // Update calls answered with giveErr first; -1 for all
		giveErr    error
		// giveStatusConflict answers the ThenStatus write with a conflict.
		giveStatusConflict bool

		want         WriteReplicaSetResult
		wantErr      string
		wantEvents   []string
		wantActions  []string
		wantStored   *rsState // nil: not checked
		wantUpdateRV string   // resourceVersion of the last update sent; "" unchecked
		wantStatus   *appsv1.DeploymentStatus
	}{
		{
			name:        "success records the event",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantEvents:  []string{scaledEvent},
			wantActions: []string{"get replicasets", "update replicasets"},
			wantStored:  &rsState{UID: rsUID, Replicas: 3, MinReadySeconds: 5, Annotations: target.Annotations, Labels: stale.Labels},
		},
		{
			name:        "a conflict from a change the decision did not read is retried on a fresh read",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			giveFail:    1,
			giveErr:     conflict(rsGR, "web-abc"),
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantEvents:  []string{scaledEvent},
			wantActions: []string{"get replicasets", "update replicasets", "get replicasets", "update replicasets"},
			wantStored:  &rsState{UID: rsUID, Replicas: 3, MinReadySeconds: 5, Annotations: target.Annotations, Labels: stale.Labels},
		},
		{
			name:        "a ReplicaSet whose spec changed since the decision is stale before any write",
			giveStored:  fresh,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     ErrStale,
			wantActions: []string{"get replicasets"},
			wantStored:  &rsState{UID: rsUID, Replicas: 2, Annotations: fresh.Annotations, Labels: fresh.Labels},
		},
		{
			name: "a ReplicaSet whose availability dropped since the decision is stale",
			giveStored: withRS(stale, func(rs *appsv1.ReplicaSet) {
				rs.ResourceVersion = "9"
				rs.Status.AvailableReplicas--
			}),
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     ErrStale,
			wantActions: []string{"get replicasets"},
		},
		{
			name:        "a persistent conflict is stale",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			giveFail:    -1,
			giveErr:     conflict(rsGR, "web-abc"),
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     ErrStale,
			wantActions: repeat([]string{"get replicasets", "update replicasets"}, conflictRetries+1),
			wantStored:  &rsState{UID: rsUID, Replicas: 1, Annotations: stale.Annotations, Labels: stale.Labels},
		},
		{
			name:        "deleted ReplicaSet is not found",
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, Events: []k8s.Event{scaled}},
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     ErrNotFound,
			wantActions: []string{"get replicasets"},
		},
		{
			name: "the update carries the current resourceVersion and keeps others' labels and annotations",
			giveStored: withRS(stale, func(rs *appsv1.ReplicaSet) {
				rs.ResourceVersion = "9"
				rs.Annotations["example.com/note"] = "kept"
				rs.Labels["team"] = "x"
			}),
			give:         WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1},
			want:         WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantActions:  []string{"get replicasets", "update replicasets"},
			wantUpdateRV: "9",
			wantStored: &rsState{UID: rsUID, Replicas: 3, MinReadySeconds: 5,
				Annotations: withRS(target, func(rs *appsv1.ReplicaSet) { rs.Annotations["example.com/note"] = "kept" }).Annotations,
				Labels:      withRS(stale, func(rs *appsv1.ReplicaSet) { rs.Labels["team"] = "x" }).Labels},
		},
		{
			name:        "server unavailable stays retryable",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}},
			giveFail:    1,
			giveErr:     apierrors.NewServiceUnavailable("etcd leader election"),
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     retryable,
			wantActions: []string{"get replicasets", "update replicasets"},
		},
		{
			name:    "nil ReplicaSet is invalid",
			give:    WriteReplicaSetInput{Deployment: testRef()},
			wantErr: ErrInvalid,
		},
		{
			name:       "negative replicas are invalid",
			giveStored: stale,
			give: WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: withRS(target, func(rs *appsv1.ReplicaSet) {
				rs.Spec.Replicas = ptr(int32(-1))
			})},
			wantErr:    ErrInvalid,
			wantStored: &rsState{UID: rsUID, Replicas: 1, Annotations: stale.Annotations, Labels: stale.Labels},
		},
		{
			name: "missing replicas are invalid",
			give: WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: withRS(target, func(rs *appsv1.ReplicaSet) {
				rs.Spec.Replicas = nil
			})},
			wantErr: ErrInvalid,
		},
		{
			name:        "ThenStatus writes the deployment status after the ReplicaSet",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}, ThenStatus: status},
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantEvents:  []string{scaledEvent},
			wantActions: []string{"get replicasets", "update replicasets", "get deployments", "update deployments/status"},
			wantStatus:  &status.Status,
		},
		{
			name:        "ThenStatus is not written after a stale ReplicaSet write",
			giveStored:  stale,
			give:        WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, ThenStatus: status},
			giveFail:    -1,
			giveErr:     conflict(rsGR, "web-abc"),
			want:        WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:     ErrStale,
			wantActions: repeat([]string{"get replicasets", "update replicasets"}, conflictRetries+1),
			wantStatus:  &testDeployment().Status,
		},
		{
			name:               "a stale ThenStatus fails the activity after the ReplicaSet write",
			giveStored:         stale,
			give:               WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, Events: []k8s.Event{scaled}, ThenStatus: status},
			giveStatusConflict: true,
			want:               WriteReplicaSetResult{Name: "web-abc", Replicas: 3},
			wantErr:            ErrStale,
			wantEvents:         []string{scaledEvent},
			wantActions:        append([]string{"get replicasets", "update replicasets"}, repeat([]string{"get deployments", "update deployments/status"}, conflictRetries+1)...),
			wantStored:         &rsState{UID: rsUID, Replicas: 3, MinReadySeconds: 5, Annotations: target.Annotations, Labels: stale.Labels},
			wantStatus:         &testDeployment().Status,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment(), tt.giveStored)
			if tt.giveErr != nil {
				f.failFirst("update", "replicasets", tt.giveFail, tt.giveErr)
			}
			if tt.giveStatusConflict {
				f.failFirst("update", "deployments/status", -1, conflict(dGR, "web"))
			}

			got, err := f.a.ScaleUpReplicaSet(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %q, want %q", got, tt.wantEvents)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			if tt.wantStored != nil {
				if got := stateOf(f.rs(t, "web-abc")); !reflect.DeepEqual(got, *tt.wantStored) {
					t.Errorf("stored replicaset = %+v, want %+v", got, *tt.wantStored)
				}
			}
			if tt.wantUpdateRV != "" {
				updates := f.actionsOf("update", "replicasets")
				last := updates[len(updates)-1].(k8stesting.UpdateAction).GetObject().(*appsv1.ReplicaSet)
				if last.ResourceVersion != tt.wantUpdateRV {
					t.Errorf("last update resourceVersion = %q, want %q (the fresh object's)", last.ResourceVersion, tt.wantUpdateRV)
				}
			}
			if tt.wantStatus != nil {
				if got := f.deployment(t).Status; !reflect.DeepEqual(got, *tt.wantStatus) {
					t.Errorf("deployment status = %+v, want %+v", got, *tt.wantStatus)
				}
			}
		})
	}
}

// ScaleDown and UpdateReplicaSet are the same write under other names in the history.
func TestReplicaSetWritesShareOneImplementation(t *testing.T) {
	stale := testRS("web-abc", rsUID, dUID, 3)
	target := withRS(stale, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(1)) })
	tests := []struct {
		name string
		give func(*Activities, context.Context, WriteReplicaSetInput) (WriteReplicaSetResult, error)
		want WriteReplicaSetResult
	}{
		{name: "ScaleDownReplicaSet", give: (*Activities).ScaleDownReplicaSet, want: WriteReplicaSetResult{Name: "web-abc", Replicas: 1}},
		{name: "UpdateReplicaSet", give: (*Activities).UpdateReplicaSet, want: WriteReplicaSetResult{Name: "web-abc", Replicas: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, stale)
			got, err := tt.give(f.a, context.Background(), WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 3})
			checkErr(t, err, "")
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := *f.rs(t, "web-abc").Spec.Replicas; got != 1 {
				t.Errorf("stored replicas = %d, want 1", got)
			}
		})
	}
}

func TestCreateReplicaSet(t *testing.T) {
	newRS := withRS(testRS("web-abc", "", dUID, 1), func(rs *appsv1.ReplicaSet) { rs.ResourceVersion = "" })
	scaled := k8s.Event{Type: corev1.EventTypeNormal, Reason: "ScalingReplicaSet", Message: "Scaled up replica set web-abc from 0 to 1"}
	quota := apierrors.NewForbidden(rsGR, "web-abc", errors.New("exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10"))
	quotaMsg := fmt.Sprintf("Failed to create new replica set %q: %v", "web-abc", quota)
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: "replicasets \"web-abc\" is forbidden: unable to create new content in namespace default because it is being terminated",
		Details: &metav1.StatusDetails{Name: "web-abc", Group: "apps", Kind: "replicasets", Causes: []metav1.StatusCause{{
			Type: corev1.NamespaceTerminatingCause, Message: "namespace default is being terminated", Field: "metadata.namespace",
		}}},
	}}
	status := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1}
	})
	ours := withRS(testRS("web-abc", rsUID, dUID, 1), func(rs *appsv1.ReplicaSet) { rs.Generation = 4 })

	tests := []struct {
		name         string
		giveExisting *appsv1.ReplicaSet // a ReplicaSet already stored under the name
		give         CreateInput
		giveErr      error // the create call's answer instead of the tracker's

		want               CreateResult
		wantErr            string
		wantEvents         []string
		wantActions        []string
		wantCollisionCount *int32
		wantProgressing    *appsv1.DeploymentCondition // Type, Status, Reason and Message compared
		wantStatus         *appsv1.DeploymentStatus
	}{
		{
			name:        "success records ScalingReplicaSet",
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}},
			want:        CreateResult{Name: "web-abc", Created: true},
			wantEvents:  []string{"Normal ScalingReplicaSet Scaled up replica set web-abc from 0 to 1"},
			wantActions: []string{"create replicasets"},
		},
		{
			name:        "success then writes status",
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ThenStatus: status},
			want:        CreateResult{Name: "web-abc", Created: true},
			wantEvents:  []string{"Normal ScalingReplicaSet Scaled up replica set web-abc from 0 to 1"},
			wantActions: []string{"create replicasets", "get deployments", "update deployments/status"},
			wantStatus:  &status.Status,
		},
		{
			name: "AlreadyExists with our controllerRef and the same template (but for the hash) is ours",
			giveExisting: withRS(ours, func(rs *appsv1.ReplicaSet) {
				rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "other-hash"
			}),
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ThenStatus: status},
			want:        CreateResult{Name: "web-abc", Existed: true},
			wantActions: []string{"create replicasets", "get replicasets", "get deployments", "update deployments/status"},
			wantStatus:  &status.Status,
		},
		{
			name: "AlreadyExists with a different template is a collision",
			giveExisting: withRS(ours, func(rs *appsv1.ReplicaSet) {
				rs.Spec.Template.Spec.Containers[0].Image = "nginx:0"
			}),
			give:               CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ThenStatus: status},
			want:               CreateResult{Name: "web-abc", Collision: true},
			wantActions:        []string{"create replicasets", "get replicasets", "get deployments", "update deployments/status"},
			wantCollisionCount: ptr(int32(1)),
		},
		{
			name:               "AlreadyExists with the same template but another owner is a collision",
			giveExisting:       testRS("web-abc", rsUID, "other-uid", 1),
			give:               CreateInput{Deployment: testRef(), ReplicaSet: newRS},
			want:               CreateResult{Name: "web-abc", Collision: true},
			wantActions:        []string{"create replicasets", "get replicasets", "get deployments", "update deployments/status"},
			wantCollisionCount: ptr(int32(1)),
		},
		{
			name:            "quota refusal records the condition and a warning",
			give:            CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ProgressDeadline: true, ThenStatus: status},
			giveErr:         quota,
			want:            CreateResult{Name: "web-abc"},
			wantErr:         ErrCreateFailed,
			wantEvents:      []string{"Warning ReplicaSetCreateError " + quotaMsg},
			wantActions:     []string{"create replicasets", "get deployments", "update deployments/status"},
			wantProgressing: &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: k8s.FailedRSCreateReason, Message: quotaMsg},
		},
		{
			name:        "quota refusal without a progress deadline leaves the status alone",
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}},
			giveErr:     quota,
			want:        CreateResult{Name: "web-abc"},
			wantErr:     ErrCreateFailed,
			wantEvents:  []string{"Warning ReplicaSetCreateError " + quotaMsg},
			wantActions: []string{"create replicasets"},
			wantStatus:  &testDeployment().Status,
		},
		{
			name:        "terminating namespace is stale",
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ProgressDeadline: true},
			giveErr:     terminating,
			want:        CreateResult{Name: "web-abc"},
			wantErr:     ErrStale,
			wantActions: []string{"create replicasets"},
		},
		{
			name:        "server timeout stays retryable",
			give:        CreateInput{Deployment: testRef(), ReplicaSet: newRS, Events: []k8s.Event{scaled}, ProgressDeadline: true},
			giveErr:     apierrors.NewServerTimeout(rsGR, "create", 1),
			want:        CreateResult{Name: "web-abc"},
			wantErr:     retryable,
			wantActions: []string{"create replicasets"},
		},
		{
			name:    "nil ReplicaSet is invalid",
			give:    CreateInput{Deployment: testRef()},
			wantErr: ErrInvalid,
		},
		{
			name:    "ReplicaSet in another namespace is invalid",
			give:    CreateInput{Deployment: testRef(), ReplicaSet: withRS(newRS, func(rs *appsv1.ReplicaSet) { rs.Namespace = "elsewhere" })},
			wantErr: ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment(), tt.giveExisting)
			if tt.giveErr != nil {
				f.failFirst("create", "replicasets", -1, tt.giveErr)
			}

			got, err := f.a.CreateReplicaSet(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %q, want %q", got, tt.wantEvents)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			d := f.deployment(t)
			if got := d.Status.CollisionCount; !reflect.DeepEqual(got, tt.wantCollisionCount) {
				t.Errorf("status.collisionCount = %v, want %v", ptrString(got), ptrString(tt.wantCollisionCount))
			}
			got1 := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
			switch {
			case tt.wantProgressing == nil && got1 != nil:
				t.Errorf("Progressing condition = %+v, want none", *got1)
			case tt.wantProgressing != nil && got1 == nil:
				t.Errorf("Progressing condition = none, want %+v", *tt.wantProgressing)
			case tt.wantProgressing != nil:
				w := *tt.wantProgressing
				if got1.Status != w.Status || got1.Reason != w.Reason || got1.Message != w.Message {
					t.Errorf("Progressing condition = %s/%s %q, want %s/%s %q", got1.Status, got1.Reason, got1.Message, w.Status, w.Reason, w.Message)
				}
			}
			if tt.wantStatus != nil && !reflect.DeepEqual(d.Status, *tt.wantStatus) {
				t.Errorf("deployment status = %+v, want %+v", d.Status, *tt.wantStatus)
			}
			if tt.want.Created {
				if got := f.rs(t, "web-abc"); got == nil || !reflect.DeepEqual(ownersOf(got), []metav1.OwnerReference{controllerRef(dUID)}) {
					t.Errorf("created replicaset = %v, want one controlled by the deployment", got)
				}
			}
		})
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestClaimReplicaSets(t *testing.T) {
	orphan := testRS("web-old", "rs-old", "", 0)
	stray := withRS(testRS("web-stray", "rs-stray", dUID, 0), func(rs *appsv1.ReplicaSet) { rs.Labels["app"] = "other" })

	tests := []struct {
		name           string
		giveDeployment *appsv1.Deployment // nil: none in the cluster
		giveRSs        []*appsv1.ReplicaSet
		give           ClaimInput
		givePatchErr   error // every patch's answer instead of the tracker's

		want        ClaimResult
		wantErr     string
		wantOwners  map[string][]metav1.OwnerReference // ReplicaSet -> ownerReferences after
		wantPatches int
	}{
		{
			name:           "adoption patches in the controllerRef",
			giveDeployment: testDeployment(),
			giveRSs:        []*appsv1.ReplicaSet{orphan},
			give:           ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			want:           ClaimResult{Adopted: []string{"web-old"}},
			wantOwners:     map[string][]metav1.OwnerReference{"web-old": {controllerRef(dUID)}},
			wantPatches:    1,
		},
		{
			name:           "adoption keeps other owners",
			giveDeployment: testDeployment(),
			giveRSs: []*appsv1.ReplicaSet{withRS(orphan, func(rs *appsv1.ReplicaSet) {
				rs.OwnerReferences = []metav1.OwnerReference{otherOwner}
			})},
			give:        ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			want:        ClaimResult{Adopted: []string{"web-old"}},
			wantOwners:  map[string][]metav1.OwnerReference{"web-old": {otherOwner, controllerRef(dUID)}}, // by UID
			wantPatches: 1,
		},
		{
			name:           "adoption is refused when the deployment was replaced",
			giveDeployment: withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.UID = "d-uid-2" }),
			giveRSs:        []*appsv1.ReplicaSet{orphan},
			give:           ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			wantErr:        ErrStale,
			wantOwners:     map[string][]metav1.OwnerReference{"web-old": nil},
		},
		{
			name: "adoption is refused when the deployment is being deleted",
			giveDeployment: withDeployment(testDeployment(), func(d *appsv1.Deployment) {
				d.DeletionTimestamp = &metav1.Time{}
				d.Finalizers = []string{"foregroundDeletion"}
			}),
			giveRSs:    []*appsv1.ReplicaSet{orphan},
			give:       ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			wantErr:    ErrStale,
			wantOwners: map[string][]metav1.OwnerReference{"web-old": nil},
		},
		{
			name:       "adoption is refused when the deployment is gone",
			giveRSs:    []*appsv1.ReplicaSet{orphan},
			give:       ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			wantErr:    ErrNotFound,
			wantOwners: map[string][]metav1.OwnerReference{"web-old": nil},
		},
		{
			name:           "adoption skips a ReplicaSet deleted meanwhile",
			giveDeployment: testDeployment(),
			give:           ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-gone", UID: "rs-gone"}}},
			wantPatches:    1,
		},
		{
			name:           "adoption refused by the apiserver is invalid",
			giveDeployment: testDeployment(),
			giveRSs:        []*appsv1.ReplicaSet{orphan},
			give:           ClaimInput{Deployment: testRef(), Adopt: []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}}},
			givePatchErr:   apierrors.NewForbidden(rsGR, "web-old", errors.New("denied by policy")),
			wantErr:        ErrInvalid,
			wantPatches:    1,
		},
		{
			name:        "release patches the controllerRef out",
			giveRSs:     []*appsv1.ReplicaSet{stray},
			give:        ClaimInput{Deployment: testRef(), Release: []k8s.ObjectRef{{Name: "web-stray", UID: "rs-stray"}}},
			want:        ClaimResult{Released: []string{"web-stray"}},
			wantOwners:  map[string][]metav1.OwnerReference{"web-stray": nil},
			wantPatches: 1,
		},
		{
			name: "release keeps other owners",
			giveRSs: []*appsv1.ReplicaSet{withRS(stray, func(rs *appsv1.ReplicaSet) {
				rs.OwnerReferences = append([]metav1.OwnerReference{otherOwner}, rs.OwnerReferences...)
			})},
			give:        ClaimInput{Deployment: testRef(), Release: []k8s.ObjectRef{{Name: "web-stray", UID: "rs-stray"}}},
			want:        ClaimResult{Released: []string{"web-stray"}},
			wantOwners:  map[string][]metav1.OwnerReference{"web-stray": {otherOwner}},
			wantPatches: 1,
		},
		{
			name:        "release ignores NotFound",
			give:        ClaimInput{Deployment: testRef(), Release: []k8s.ObjectRef{{Name: "web-gone", UID: "rs-gone"}}},
			wantPatches: 1,
		},
		{
			name:         "release ignores a failed UID precondition",
			giveRSs:      []*appsv1.ReplicaSet{stray},
			give:         ClaimInput{Deployment: testRef(), Release: []k8s.ObjectRef{{Name: "web-stray", UID: "rs-stray-old"}}},
			givePatchErr: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, "web-stray", nil),
			wantOwners:   map[string][]metav1.OwnerReference{"web-stray": {controllerRef(dUID)}},
			wantPatches:  1,
		},
		{
			name:           "adopt and release in one call",
			giveDeployment: testDeployment(),
			giveRSs:        []*appsv1.ReplicaSet{orphan, stray},
			give: ClaimInput{
				Deployment: testRef(),
				Adopt:      []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}},
				Release:    []k8s.ObjectRef{{Name: "web-stray", UID: "rs-stray"}},
			},
			want:        ClaimResult{Adopted: []string{"web-old"}, Released: []string{"web-stray"}},
			wantOwners:  map[string][]metav1.OwnerReference{"web-old": {controllerRef(dUID)}, "web-stray": nil},
			wantPatches: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{tt.giveDeployment}
			for _, rs := range tt.giveRSs {
				objs = append(objs, rs)
			}
			f := newFixture(t, objs...)
			if tt.givePatchErr != nil {
				f.failFirst("patch", "replicasets", -1, tt.givePatchErr)
			}

			got, err := f.a.ClaimReplicaSets(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			for name, want := range tt.wantOwners {
				if got := ownersOf(f.rs(t, name)); !reflect.DeepEqual(got, want) {
					t.Errorf("ownerReferences of %s = %+v, want %+v", name, got, want)
				}
			}
			patches := f.actionsOf("patch", "replicasets")
			if len(patches) != tt.wantPatches {
				t.Errorf("patches = %d, want %d", len(patches), tt.wantPatches)
			}
			for _, p := range patches {
				if got := p.(k8stesting.PatchAction).GetPatchType(); got != types.StrategicMergePatchType {
					t.Errorf("patch type = %s, want %s", got, types.StrategicMergePatchType)
				}
			}
		})
	}
}

// The adoption and release patches pin the ReplicaSet's UID, so a replaced ReplicaSet of the
// same name fails the write on a real apiserver.
func TestClaimPatchesCarryTheUID(t *testing.T) {
	f := newFixture(t, testDeployment(), testRS("web-old", "rs-old", "", 0), testRS("web-stray", "rs-stray", dUID, 0))
	_, err := f.a.ClaimReplicaSets(context.Background(), ClaimInput{
		Deployment: testRef(),
		Adopt:      []k8s.ObjectRef{{Name: "web-old", UID: "rs-old"}},
		Release:    []k8s.ObjectRef{{Name: "web-stray", UID: "rs-stray"}},
	})
	checkErr(t, err, "")
	want := map[string]string{"web-old": `"uid":"rs-old"`, "web-stray": `"uid":"rs-stray"`}
	for _, a := range f.actionsOf("patch", "replicasets") {
		p := a.(k8stesting.PatchAction)
		if got := string(p.GetPatch()); !strings.Contains(got, want[p.GetName()]) {
			t.Errorf("patch of %s = %s, want it to contain %s", p.GetName(), got, want[p.GetName()])
		}
	}
}

func TestCleanupReplicaSets(t *testing.T) {
	tests := []struct {
		name    string
		giveRSs []*appsv1.ReplicaSet
		give    []k8s.ObjectRef
		giveErr error // every delete's answer instead of the tracker's

		want     CleanupResult
		wantErr  string
		wantLeft []string
	}{
		{
			name:    "deletes each with its UID",
			giveRSs: []*appsv1.ReplicaSet{testRS("web-1", "uid-1", dUID, 0), testRS("web-2", "uid-2", dUID, 0), testRS("web-3", "uid-3", dUID, 0)},
			give:    []k8s.ObjectRef{{Name: "web-1", UID: "uid-1"}, {Name: "web-2", UID: "uid-2"}},
			want:    CleanupResult{Deleted: []string{"web-1", "web-2"}},
			wantLeft: []string{
				"web-3",
			},
		},
		{
			name:    "NotFound counts as done",
			giveRSs: []*appsv1.ReplicaSet{testRS("web-1", "uid-1", dUID, 0)},
			give:    []k8s.ObjectRef{{Name: "web-gone", UID: "uid-gone"}, {Name: "web-1", UID: "uid-1"}},
			want:    CleanupResult{Deleted: []string{"web-1"}},
		},
		{
			name:     "a ReplicaSet replaced under the same name is kept",
			giveRSs:  []*appsv1.ReplicaSet{testRS("web-1", "uid-new", dUID, 0)},
			give:     []k8s.ObjectRef{{Name: "web-1", UID: "uid-1"}},
			wantLeft: []string{"web-1"},
		},
		{
			name:     "refusal is invalid",
			giveRSs:  []*appsv1.ReplicaSet{testRS("web-1", "uid-1", dUID, 0)},
			give:     []k8s.ObjectRef{{Name: "web-1", UID: "uid-1"}},
			giveErr:  apierrors.NewForbidden(rsGR, "web-1", errors.New("denied")),
			wantErr:  ErrInvalid,
			wantLeft: []string{"web-1"},
		},
		{
			name:     "internal error stays retryable",
			giveRSs:  []*appsv1.ReplicaSet{testRS("web-1", "uid-1", dUID, 0)},
			give:     []k8s.ObjectRef{{Name: "web-1", UID: "uid-1"}},
			giveErr:  apierrors.NewInternalError(errors.New("etcd")),
			wantErr:  retryable,
			wantLeft: []string{"web-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, rs := range tt.giveRSs {
				objs = append(objs, rs)
			}
			f := newFixture(t, objs...)
			// Enforce the UID precondition as the apiserver does; the tracker ignores it.
			f.client.PrependReactor("delete", "replicasets", func(action k8stesting.Action) (bool, runtime.Object, error) {
				del := action.(k8stesting.DeleteAction)
				pre := del.GetDeleteOptions().Preconditions
				obj, err := f.client.Tracker().Get(rsGVR, del.GetNamespace(), del.GetName())
				if err != nil || pre == nil || pre.UID == nil {
					return false, nil, nil
				}
				if uid := obj.(*appsv1.ReplicaSet).UID; uid != *pre.UID {
					return true, nil, apierrors.NewConflict(rsGR, del.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, uid))
				}
				return false, nil, nil
			})
			if tt.giveErr != nil {
				f.failFirst("delete", "replicasets", -1, tt.giveErr)
			}

			got, err := f.a.CleanupReplicaSets(context.Background(), CleanupInput{Deployment: testRef(), Delete: tt.give})

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			deletes := f.actionsOf("delete", "replicasets")
			for i, a := range deletes {
				pre := a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
				if pre == nil || pre.UID == nil || *pre.UID != tt.give[i].UID {
					t.Errorf("delete %d preconditions = %+v, want UID %s", i, pre, tt.give[i].UID)
				}
			}
			var left []string
			list, err := f.client.Tracker().List(rsGVR, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), testNS)
			if err != nil {
				t.Fatal(err)
			}
			for _, rs := range list.(*appsv1.ReplicaSetList).Items {
				left = append(left, rs.Name)
			}
			if !reflect.DeepEqual(left, tt.wantLeft) {
				t.Errorf("left = %q, want %q", left, tt.wantLeft)
			}
		})
	}
}

func TestUpdateDeploymentStatus(t *testing.T) {
	want := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Annotations[k8s.RevisionAnnotation] = "2"
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	})
	// fresh changed metadata only: same generation, newer resourceVersion.
	fresh := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.ResourceVersion = "11"
		d.Annotations["example.com/note"] = "kept"
	})
	// concurrent is what another writer leaves between our read and our write (the fake
	// clientset does not bump resourceVersions; the conflict is injected).
	concurrent := withDeployment(fresh, func(d *appsv1.Deployment) { d.ResourceVersion = "10" })

	tests := []struct {
		name          string
		giveStored    *appsv1.Deployment
		give          *appsv1.Deployment
		giveEvents    []k8s.Event
		giveConflicts int
		giveStrict    bool

		want            DeploymentWriteResult
		wantErr         string
		wantStatus      appsv1.DeploymentStatus
		wantAnnotations map[string]string
		wantEvents      []string
		wantActions     []string
	}{
		{
			name:            "writes status and records events",
			giveStored:      testDeployment(),
			give:            want,
			giveEvents:      []k8s.Event{{Type: corev1.EventTypeNormal, Reason: "DeploymentRollout", Message: "done"}},
			want:            DeploymentWriteResult{},
			wantStatus:      want.Status,
			wantAnnotations: want.Annotations,
			wantEvents:      []string{"Normal DeploymentRollout done"},
			wantActions:     []string{"get deployments", "update deployments/status"},
		},
		{
			name:          "a conflict from a metadata change is retried on a fresh read, keeping it",
			giveStored:    concurrent,
			give:          want,
			giveEvents:    []k8s.Event{{Type: corev1.EventTypeNormal, Reason: "DeploymentRollout", Message: "done"}},
			giveConflicts: 1,
			wantStatus:    want.Status,
			wantAnnotations: withDeployment(concurrent, func(d *appsv1.Deployment) {
				d.Annotations[k8s.RevisionAnnotation] = "2"
			}).Annotations,
			wantEvents:  []string{"Normal DeploymentRollout done"},
			wantActions: []string{"get deployments", "update deployments/status", "get deployments", "update deployments/status"},
		},
		{
			name:            "strict: written on the decision's version, with no read",
			giveStored:      testDeployment(),
			give:            want,
			giveStrict:      true,
			wantStatus:      want.Status,
			wantAnnotations: want.Annotations,
			wantActions:     []string{"update deployments/status"},
		},
		{
			name:            "strict: a conflict is stale, not retried on a fresh read",
			giveStored:      concurrent,
			give:            want,
			giveStrict:      true,
			giveConflicts:   1,
			wantErr:         ErrStale,
			wantStatus:      concurrent.Status,
			wantAnnotations: concurrent.Annotations,
			wantActions:     []string{"update deployments/status"},
		},
		{
			name:            "a deployment with a new generation since the decision is stale before any write",
			giveStored:      withDeployment(fresh, func(d *appsv1.Deployment) { d.Generation = 3 }),
			give:            want,
			giveEvents:      []k8s.Event{{Type: corev1.EventTypeNormal, Reason: "DeploymentRollout", Message: "done"}},
			wantErr:         ErrStale,
			wantStatus:      fresh.Status,
			wantAnnotations: fresh.Annotations,
			wantActions:     []string{"get deployments"},
		},
		{
			name:            "a replaced deployment is stale",
			giveStored:      withDeployment(concurrent, func(d *appsv1.Deployment) { d.UID = "d-uid-2" }),
			give:            want,
			wantErr:         ErrStale,
			wantStatus:      concurrent.Status,
			wantAnnotations: concurrent.Annotations,
			wantActions:     []string{"get deployments"},
		},
		{
			name:        "deleted deployment is not found",
			give:        want,
			wantErr:     ErrNotFound,
			wantActions: []string{"get deployments"},
		},
		{
			name: "kubectl's last-applied-configuration, left out of the decision, is kept",
			giveStored: withDeployment(testDeployment(), func(d *appsv1.Deployment) {
				d.Annotations[corev1.LastAppliedConfigAnnotation] = `{"kind":"Deployment"}`
			}),
			give:       want,
			want:       DeploymentWriteResult{},
			wantStatus: want.Status,
			wantAnnotations: map[string]string{
				k8s.RevisionAnnotation: "2", corev1.LastAppliedConfigAnnotation: `{"kind":"Deployment"}`,
			},
			wantActions: []string{"get deployments", "update deployments/status"},
		},
		{
			name:    "no deployment is invalid",
			wantErr: ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.giveStored)
			if tt.giveConflicts > 0 {
				f.failFirst("update", "deployments/status", tt.giveConflicts, conflict(dGR, "web"))
			}

			got, err := f.a.UpdateDeploymentStatus(context.Background(), DeploymentWriteInput{Deployment: tt.give, Events: tt.giveEvents, Strict: tt.giveStrict})

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %q, want %q", got, tt.wantEvents)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			if d := f.deployment(t); d != nil {
				if !reflect.DeepEqual(d.Status, tt.wantStatus) {
					t.Errorf("status = %+v, want %+v", d.Status, tt.wantStatus)
				}
				if !reflect.DeepEqual(d.Annotations, tt.wantAnnotations) {
					t.Errorf("annotations = %v, want %v", d.Annotations, tt.wantAnnotations)
				}
			}
		})
	}
}

func TestRollbackDeployment(t *testing.T) {
	stored := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Spec.Template = podTemplate("nginx:2", "")
		d.Annotations = map[string]string{k8s.RevisionAnnotation: "3", appsv1.DeprecatedRollbackTo: "1"}
	})
	want := withDeployment(stored, func(d *appsv1.Deployment) {
		d.Spec.Template = podTemplate("nginx:1", "")
		d.Annotations = map[string]string{k8s.RevisionAnnotation: "3", "kubernetes.io/change-cause": "v1"}
	})
	// redactedWant is want as the history records it: the template's spec is a placeholder.
	redactedWant := withDeployment(want, func(d *appsv1.Deployment) { specDigester{}.redactTemplate(&d.Spec.Template) })
	rolledBack := k8s.Event{Type: corev1.EventTypeNormal, Reason: k8s.RollbackDone, Message: `Rolled back deployment "web" to revision 1`}

	tests := []struct {
		name          string
		giveStored    *appsv1.Deployment
		giveRS        *appsv1.ReplicaSet
		give          *appsv1.Deployment
		giveConflicts int

		want            DeploymentWriteResult
		wantErr         string
		wantImage       string
		wantAnnotations map[string]string
		wantLabels      map[string]string
		wantEvents      []string
		wantActions     []string
	}{
		{
			name:            "writes template and annotations",
			giveStored:      stored,
			give:            want,
			want:            DeploymentWriteResult{},
			wantImage:       "nginx:1",
			wantAnnotations: want.Annotations,
			wantEvents:      []string{`Normal DeploymentRollback Rolled back deployment "web" to revision 1`},
			wantActions:     []string{"get deployments", "update deployments"},
		},
		{
			name:            "conflict is stale: a concurrent edit is not overwritten",
			giveStored:      withDeployment(stored, func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "x"} }),
			give:            want,
			giveConflicts:   1,
			wantErr:         ErrStale,
			wantImage:       "nginx:2",
			wantAnnotations: stored.Annotations,
			wantLabels:      map[string]string{"team": "x"},
			wantActions:     []string{"get deployments", "update deployments"},
		},
		{
			name:            "a deployment changed since the decision is stale before any write",
			giveStored:      withDeployment(stored, func(d *appsv1.Deployment) { d.ResourceVersion = "12"; d.Labels = map[string]string{"team": "x"} }),
			give:            want,
			wantErr:         ErrStale,
			wantImage:       "nginx:2",
			wantAnnotations: stored.Annotations,
			wantLabels:      map[string]string{"team": "x"},
			wantActions:     []string{"get deployments"},
		},
		{
			name:            "a redacted template is restored from the ReplicaSet it came from",
			giveStored:      stored,
			giveRS:          withRS(testRS("web-abc", rsUID, dUID, 0), func(rs *appsv1.ReplicaSet) { rs.Spec.Template = podTemplate("nginx:1", "") }),
			give:            redactedWant,
			want:            DeploymentWriteResult{},
			wantImage:       "nginx:1",
			wantAnnotations: want.Annotations,
			wantEvents:      []string{`Normal DeploymentRollback Rolled back deployment "web" to revision 1`},
			wantActions:     []string{"get deployments", "list replicasets", "update deployments"},
		},
		{
			name:            "a redacted template in no ReplicaSet any more is stale",
			giveStored:      stored,
			give:            redactedWant,
			wantErr:         ErrStale,
			wantImage:       "nginx:2",
			wantAnnotations: stored.Annotations,
			wantActions:     []string{"get deployments", "list replicasets"},
		},
		{
			name:        "deleted deployment is not found",
			give:        want,
			wantErr:     ErrNotFound,
			wantActions: []string{"get deployments"},
		},
		{
			name:    "no deployment is invalid",
			wantErr: ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.giveStored, tt.giveRS)
			if tt.giveConflicts > 0 {
				f.failFirst("update", "deployments", tt.giveConflicts, conflict(dGR, "web"))
			}

			got, err := f.a.RollbackDeployment(context.Background(), DeploymentWriteInput{Deployment: tt.give, Events: []k8s.Event{rolledBack}})

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %q, want %q", got, tt.wantEvents)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			if d := f.deployment(t); d != nil {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != tt.wantImage {
					t.Errorf("image = %q, want %q", got, tt.wantImage)
				}
				if !reflect.DeepEqual(d.Annotations, tt.wantAnnotations) {
					t.Errorf("annotations = %v, want %v", d.Annotations, tt.wantAnnotations)
				}
				if !reflect.DeepEqual(d.Labels, tt.wantLabels) {
					t.Errorf("labels = %v, want %v", d.Labels, tt.wantLabels)
				}
			}
		})
	}
}

func TestSetPaused(t *testing.T) {
	paused := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.Spec.Paused = true })
	tests := []struct {
		name       string
		giveStored *appsv1.Deployment
		give       SetPausedInput

		want        SetPausedResult
		wantErr     string
		wantPaused  bool
		wantActions []string
		wantPatch   string // the merge patch sent; "" for none
	}{
		{
			name:        "pauses",
			giveStored:  testDeployment(),
			give:        SetPausedInput{Namespace: testNS, Name: "web", Paused: true},
			want:        SetPausedResult{Changed: true},
			wantPaused:  true,
			wantActions: []string{"get deployments", "patch deployments"},
			wantPatch:   `{"metadata":{"uid":"d-uid"},"spec":{"paused":true}}`,
		},
		{
			name:        "already paused is left alone",
			giveStored:  paused,
			give:        SetPausedInput{Namespace: testNS, Name: "web", Paused: true},
			want:        SetPausedResult{},
			wantPaused:  true,
			wantActions: []string{"get deployments"},
		},
		{
			name:        "resumes",
			giveStored:  paused,
			give:        SetPausedInput{Namespace: testNS, Name: "web", Paused: false},
			want:        SetPausedResult{Changed: true},
			wantActions: []string{"get deployments", "patch deployments"},
			wantPatch:   `{"metadata":{"uid":"d-uid"},"spec":{"paused":false}}`,
		},
		{
			name:        "already running is left alone",
			giveStored:  testDeployment(),
			give:        SetPausedInput{Namespace: testNS, Name: "web", Paused: false},
			want:        SetPausedResult{},
			wantActions: []string{"get deployments"},
		},
		{
			name:        "missing deployment is not found",
			give:        SetPausedInput{Namespace: testNS, Name: "web", Paused: true},
			wantErr:     ErrNotFound,
			wantActions: []string{"get deployments"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.giveStored)

			got, err := f.a.SetPaused(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			for _, a := range f.actionsOf("patch", "deployments") {
				p := a.(k8stesting.PatchAction)
				if p.GetPatchType() != types.MergePatchType || string(p.GetPatch()) != tt.wantPatch {
					t.Errorf("patch = %s %s, want %s %s", p.GetPatchType(), p.GetPatch(), types.MergePatchType, tt.wantPatch)
				}
			}
			if d := f.deployment(t); d != nil && d.Spec.Paused != tt.wantPaused {
				t.Errorf("spec.paused = %t, want %t", d.Spec.Paused, tt.wantPaused)
			}
		})
	}
}

func TestSetImage(t *testing.T) {
	tests := []struct {
		name          string
		give          SetImageInput
		giveConflicts int

		want        SetImageResult
		wantErr     string
		wantImages  [2]string // init, app after the call
		wantCause   string    // kubernetes.io/change-cause after; "" for absent
		wantActions []string
	}{
		{
			name:        "sets the image and the change cause",
			give:        SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, WorkflowID: "wf-1"},
			want:        SetImageResult{Changed: true, ChangeCause: "temporal workflow wf-1: set image app=nginx:2"},
			wantImages:  [2]string{"busybox:1", "nginx:2"},
			wantCause:   "temporal workflow wf-1: set image app=nginx:2",
			wantActions: []string{"get deployments", "update deployments"},
		},
		{
			name:        "init containers too, in name order, without a workflow",
			give:        SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"init": "busybox:2", "app": "nginx:2"}},
			want:        SetImageResult{Changed: true, ChangeCause: "set image app=nginx:2,init=busybox:2"},
			wantImages:  [2]string{"busybox:2", "nginx:2"},
			wantCause:   "set image app=nginx:2,init=busybox:2",
			wantActions: []string{"get deployments", "update deployments"},
		},
		{
			name:        "unknown container is invalid",
			give:        SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2", "sidecar": "envoy:1"}},
			wantErr:     ErrInvalid,
			wantImages:  [2]string{"busybox:1", "nginx:1"},
			wantActions: []string{"get deployments"},
		},
		{
			name:        "empty image is invalid",
			give:        SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": " "}},
			wantErr:     ErrInvalid,
			wantImages:  [2]string{"busybox:1", "nginx:1"},
			wantActions: []string{"get deployments"},
		},
		{
			name:        "same image changes nothing",
			give:        SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:1"}, WorkflowID: "wf-1"},
			want:        SetImageResult{},
			wantImages:  [2]string{"busybox:1", "nginx:1"},
			wantActions: []string{"get deployments"},
		},
		{
			name:       "no images is a no-op",
			give:       SetImageInput{Namespace: testNS, Name: "web"},
			wantImages: [2]string{"busybox:1", "nginx:1"},
		},
		{
			name:          "conflict re-reads and retries",
			give:          SetImageInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}},
			giveConflicts: 1,
			want:          SetImageResult{Changed: true, ChangeCause: "set image app=nginx:2"},
			wantImages:    [2]string{"busybox:1", "nginx:2"},
			wantCause:     "set image app=nginx:2",
			wantActions:   []string{"get deployments", "update deployments", "get deployments", "update deployments"},
		},
		{
			name:        "missing deployment is not found",
			give:        SetImageInput{Namespace: testNS, Name: "missing", Images: map[string]string{"app": "nginx:2"}},
			wantErr:     ErrNotFound,
			wantImages:  [2]string{"busybox:1", "nginx:1"},
			wantActions: []string{"get deployments"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment())
			if tt.giveConflicts > 0 {
				f.failFirst("update", "deployments", tt.giveConflicts, conflict(dGR, "web"))
			}

			got, err := f.a.SetImage(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			got.Wrote = nil // versions are checked in TestWritesReportVersions
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
			d := f.deployment(t)
			spec := d.Spec.Template.Spec
			if got := [2]string{spec.InitContainers[0].Image, spec.Containers[0].Image}; got != tt.wantImages {
				t.Errorf("images (init, app) = %q, want %q", got, tt.wantImages)
			}
			if got := d.Annotations[k8s.ChangeCauseAnnotation]; got != tt.wantCause {
				t.Errorf("change-cause = %q, want %q", got, tt.wantCause)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	owned := func(name string, uid types.UID, owner types.UID, app string) *appsv1.ReplicaSet {
		return withRS(testRS(name, uid, owner, 1), func(rs *appsv1.ReplicaSet) {
			rs.Labels["app"] = app
			rs.ManagedFields = managed
		})
	}
	pod := func(name string, owner types.UID, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: map[string]string{"app": "web"}},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: owner, Controller: ptr(true)}}
		}
		return p
	}
	// UIDs run against the names, so name order and UID order differ.
	objs := func(d *appsv1.Deployment) []runtime.Object {
		return []runtime.Object{
			d,
			owned("web-b", "uid-1", dUID, "web"),   // ours, matching
			owned("web-a", "uid-2", "", "web"),     // orphan, matching: to adopt
			owned("web-c", "uid-0", dUID, "other"), // ours, no longer matching: to release (cache only)
			owned("other-x", "uid-x", "other-d", "web"), // matching but another controller's
			owned("db-1", "uid-db", "", "db"),           // orphan, not matching
			withRS(owned("web-z", "uid-z", dUID, "web"), // ours, in another namespace
				func(rs *appsv1.ReplicaSet) { rs.Namespace = "elsewhere" }),
			pod("p-b-running", "uid-1", corev1.PodRunning),
			pod("p-b-pending", "uid-1", corev1.PodPending),
			pod("p-b-succeeded", "uid-1", corev1.PodSucceeded),
			pod("p-a-running", "uid-2", corev1.PodRunning),
			pod("p-a-failed", "uid-2", corev1.PodFailed),
			pod("p-x-running", "uid-x", corev1.PodRunning),
			pod("p-bare", "", corev1.PodRunning),
		}
	}
	deployment := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.ManagedFields = managed })
	recreate := withDeployment(deployment, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	})

	tests := []struct {
		name           string
		giveDeployment *appsv1.Deployment
		give           ObserveInput
		giveCache      bool

		wantFound     bool
		wantErr       string
		wantRSs       []string
		wantPods      []k8s.PodCount
		wantPodList   bool
		wantFromCache bool // and no API read
	}{
		{
			name:           "missing deployment is not found",
			giveDeployment: deployment,
			give:           ObserveInput{Namespace: testNS, Name: "missing"},
			giveCache:      true,
		},
		{
			name:           "owned, orphans and cached released ReplicaSets, sorted by name",
			giveDeployment: deployment,
			give:           ObserveInput{Namespace: testNS, Name: "web"},
			giveCache:      true,
			wantFound:      true,
			wantRSs:        []string{"web-a", "web-b", "web-c"},
			wantFromCache:  true,
		},
		{
			name:           "live read adds the cache's released ReplicaSets",
			giveDeployment: deployment,
			give:           ObserveInput{Namespace: testNS, Name: "web", Live: true},
			giveCache:      true,
			wantFound:      true,
			wantRSs:        []string{"web-a", "web-b", "web-c"},
		},
		{
			name:           "without a cache only matching ReplicaSets",
			giveDeployment: deployment,
			give:           ObserveInput{Namespace: testNS, Name: "web"},
			wantFound:      true,
			wantRSs:        []string{"web-a", "web-b"},
		},
		{
			name:           "recreate counts running pods per ReplicaSet from the cache",
			giveDeployment: recreate,
			give:           ObserveInput{Namespace: testNS, Name: "web"},
			giveCache:      true,
			wantFound:      true,
			wantRSs:        []string{"web-a", "web-b", "web-c"},
			wantPods:       []k8s.PodCount{{ReplicaSetUID: "uid-1", Running: 2}, {ReplicaSetUID: "uid-2", Running: 1}},
			wantFromCache:  true,
		},
		{
			name:           "recreate counts running pods per ReplicaSet live",
			giveDeployment: recreate,
			give:           ObserveInput{Namespace: testNS, Name: "web", Live: true},
			giveCache:      true,
			wantFound:      true,
			wantRSs:        []string{"web-a", "web-b", "web-c"},
			wantPods:       []k8s.PodCount{{ReplicaSetUID: "uid-1", Running: 2}, {ReplicaSetUID: "uid-2", Running: 1}},
			wantPodList:    true,
		},
		{
			// k8s.NewSnapshot keeps the owned ReplicaSets; Decide stops at the selector.
			name: "empty selector adopts no orphan from the cache",
			giveDeployment: withDeployment(recreate, func(d *appsv1.Deployment) {
				d.Spec.Selector = &metav1.LabelSelector{}
			}),
			give:          ObserveInput{Namespace: testNS, Name: "web"},
			giveCache:     true,
			wantFound:     true,
			wantRSs:       []string{"web-b", "web-c"},
			wantPods:      []k8s.PodCount{{ReplicaSetUID: "uid-1", Running: 2}},
			wantFromCache: true,
		},
		{
			name: "empty selector lists nothing live",
			giveDeployment: withDeployment(recreate, func(d *appsv1.Deployment) {
				d.Spec.Selector = &metav1.LabelSelector{}
			}),
			give:      ObserveInput{Namespace: testNS, Name: "web"},
			wantFound: true,
		},
		{
			name:           "no name is invalid",
			giveDeployment: deployment,
			give:           ObserveInput{Namespace: testNS},
			wantErr:        ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, objs(tt.giveDeployment)...)
			if tt.giveCache {
				f.a.Cache = startCache(t, f, "")
			}
			f.client.ClearActions()

			got, err := f.a.Observe(context.Background(), tt.give)

			checkErr(t, err, tt.wantErr)
			if got.Found != tt.wantFound {
				t.Fatalf("Found = %t, want %t", got.Found, tt.wantFound)
			}
			var names []string
			for _, rs := range got.Snapshot.ReplicaSets {
				names = append(names, rs.Name)
				if rs.ManagedFields != nil {
					t.Errorf("replicaset %s managedFields = %v, want none", rs.Name, rs.ManagedFields)
				}
			}
			if !reflect.DeepEqual(names, tt.wantRSs) {
				t.Errorf("replicasets = %q, want %q", names, tt.wantRSs)
			}
			if !reflect.DeepEqual(got.Snapshot.Pods, tt.wantPods) {
				t.Errorf("pods = %+v, want %+v", got.Snapshot.Pods, tt.wantPods)
			}
			if got := len(f.actionsOf("list", "pods")) > 0; got != tt.wantPodList {
				t.Errorf("pods listed = %t, want %t", got, tt.wantPodList)
			}
			if d := got.Snapshot.Deployment; tt.wantFound && (d == nil || d.UID != dUID || d.ManagedFields != nil) {
				t.Errorf("snapshot deployment = %+v, want default/web without managedFields", d)
			}
			if got.FromCache != tt.wantFromCache {
				t.Errorf("FromCache = %t, want %t", got.FromCache, tt.wantFromCache)
			}
			if reads := f.actions(); tt.wantFromCache && len(reads) > 0 {
				t.Errorf("API calls = %q, want none from the cache", reads)
			}
		})
	}
}

// startCache starts a kube.Cache of namespace on the fixture's clientset; it stops with the
// test.
func startCache(t *testing.T, f *fixture, namespace string) *kube.Cache {
	t.Helper()
	c, err := kube.NewCache(f.client, namespace)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// stoppedCache is a cache that has listed objs and then stopped, so it misses every later
// change, as a lagging watch would.
func stoppedCache(t *testing.T, objs ...runtime.Object) *kube.Cache {
	t.Helper()
	c, err := kube.NewCache(fake.NewClientset(objs...), testNS)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	c.Shutdown()
	return c
}

// Only the API server may say a Deployment is gone: when the cache does not hold it (it was
// just created, or deleted and created again), Observe confirms with a live read.
func TestObserveConfirmsMissingDeploymentLive(t *testing.T) {
	recreated := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.UID = "d-uid-2"; d.ResourceVersion = "30" })
	tests := []struct {
		name      string
		giveCache []runtime.Object // what the cache listed before it stopped
		giveLive  []runtime.Object
		give      ObserveInput

		wantFound     bool
		wantUID       types.UID
		wantFromCache bool
		wantRSs       []string
		wantActions   []string
	}{
		{
			name:        "not cached, found live: a new Deployment is not taken for deleted",
			giveLive:    []runtime.Object{testDeployment(), testRS("web-a", "uid-a", dUID, 1)},
			give:        ObserveInput{Namespace: testNS, Name: "web"},
			wantFound:   true,
			wantUID:     dUID,
			wantRSs:     []string{"web-a"},
			wantActions: []string{"get deployments", "list replicasets"},
		},
		{
			name:        "not cached, not live: gone",
			give:        ObserveInput{Namespace: testNS, Name: "web"},
			wantActions: []string{"get deployments"},
		},
		{
			name:        "a newer version than the cache's is read live",
			giveCache:   []runtime.Object{testDeployment()},
			giveLive:    []runtime.Object{recreated},
			give:        ObserveInput{Namespace: testNS, Name: "web", AtLeast: []k8s.ObjectVersion{k8s.DeploymentVersion(recreated)}},
			wantFound:   true,
			wantUID:     "d-uid-2",
			wantActions: []string{"get deployments", "list replicasets"},
		},
		{
			name:          "cached and caught up: no API read",
			giveCache:     []runtime.Object{testDeployment(), testRS("web-a", "uid-a", dUID, 1)},
			give:          ObserveInput{Namespace: testNS, Name: "web", AtLeast: []k8s.ObjectVersion{k8s.DeploymentVersion(testDeployment())}},
			wantFound:     true,
			wantUID:       dUID,
			wantFromCache: true,
			wantRSs:       []string{"web-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.giveLive...)
			f.a.Cache = stoppedCache(t, tt.giveCache...)

			got, err := f.a.Observe(context.Background(), tt.give)

			checkErr(t, err, "")
			if got.Found != tt.wantFound || got.FromCache != tt.wantFromCache {
				t.Fatalf("Found, FromCache = %t, %t, want %t, %t", got.Found, got.FromCache, tt.wantFound, tt.wantFromCache)
			}
			if d := got.Snapshot.Deployment; tt.wantFound && (d == nil || d.UID != tt.wantUID) {
				t.Errorf("snapshot deployment = %+v, want uid %s", d, tt.wantUID)
			}
			var names []string
			for _, rs := range got.Snapshot.ReplicaSets {
				names = append(names, rs.Name)
			}
			if !reflect.DeepEqual(names, tt.wantRSs) {
				t.Errorf("replicasets = %q, want %q", names, tt.wantRSs)
			}
			if got := f.actions(); !reflect.DeepEqual(got, tt.wantActions) {
				t.Errorf("actions = %q, want %q", got, tt.wantActions)
			}
		})
	}
}

func TestRecordEvent(t *testing.T) {
	tests := []struct {
		name string
		give []k8s.Event
		want []string
	}{
		{
			name: "types other than Warning are Normal",
			give: []k8s.Event{
				{Type: corev1.EventTypeWarning, Reason: "SelectingAll", Message: "selects all pods"},
				{Type: "", Reason: "Plain", Message: "no type"},
				{Type: "Bogus", Reason: "Odd", Message: "odd type"},
			},
			want: []string{
				"Warning SelectingAll selects all pods involvedObject{kind=Deployment,apiVersion=apps/v1}",
				"Normal Plain no type involvedObject{kind=Deployment,apiVersion=apps/v1}",
				"Normal Odd odd type involvedObject{kind=Deployment,apiVersion=apps/v1}",
			},
		},
		{
			name: "no events",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.rec.IncludeObject = true
			if err := f.a.RecordEvent(context.Background(), RecordEventInput{Deployment: testRef(), Events: tt.give}); err != nil {
				t.Fatal(err)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
		})
	}
}

// Without a recorder and metrics the activities still work.
func TestNoRecorderNoMetrics(t *testing.T) {
	client := fake.NewClientset(testDeployment())
	a := &Activities{Client: client}
	if err := a.RecordEvent(context.Background(), RecordEventInput{Deployment: testRef(), Events: []k8s.Event{{Reason: "X"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.SetPaused(context.Background(), SetPausedInput{Namespace: testNS, Name: "web", Paused: true})
	if err != nil || !got.Changed {
		t.Errorf("SetPaused = %+v, %v, want changed, nil", got, err)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		give error
		want string
	}{
		{name: "nil", give: nil, want: ""},
		{name: "not found", give: apierrors.NewNotFound(dGR, "web"), want: ErrNotFound},
		{name: "conflict", give: conflict(dGR, "web"), want: ErrStale},
		{name: "invalid", give: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", nil), want: ErrInvalid},
		{name: "bad request", give: apierrors.NewBadRequest("bad"), want: ErrInvalid},
		{name: "forbidden", give: apierrors.NewForbidden(dGR, "web", errors.New("no")), want: ErrInvalid},
		{name: "too many requests", give: apierrors.NewTooManyRequests("slow down", 1), want: retryable},
		{name: "plain", give: errors.New("connection refused"), want: retryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify("write", tt.give)
			if got := errKind(err); got != tt.want {
				t.Errorf("classify(%v) kind = %q, want %q", tt.give, got, tt.want)
			}
			if tt.give != nil && !errors.Is(err, tt.give) {
				t.Errorf("classify(%v) = %v, want it to wrap the cause", tt.give, err)
			}
		})
	}
}

func TestIsKind(t *testing.T) {
	tests := []struct {
		name     string
		give     error
		giveKind string
		want     bool
	}{
		{name: "same kind", give: nonRetryable(ErrStale, "x"), giveKind: ErrStale, want: true},
		{name: "other kind", give: nonRetryable(ErrStale, "x"), giveKind: ErrInvalid, want: false},
		{name: "wrapped", give: fmt.Errorf("outer: %w", nonRetryable(ErrNotFound, "x")), giveKind: ErrNotFound, want: true},
		{name: "plain error", give: errors.New("x"), giveKind: ErrStale, want: false},
		{name: "nil", give: nil, giveKind: ErrStale, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsKind(tt.give, tt.giveKind); got != tt.want {
				t.Errorf("IsKind(%v, %q) = %t, want %t", tt.give, tt.giveKind, got, tt.want)
			}
		})
	}
}

// counterValue reads a counter. (prometheus/testutil would need a module go.mod does not list.)
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// seriesCount is the number of series c exports.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

func TestMetricsAPIWrite(t *testing.T) {
	tests := []struct {
		name string
		give error
		want string // the code label counted
	}{
		{name: "success", give: nil, want: "ok"},
		{name: "conflict", give: conflict(rsGR, "web-abc"), want: "Conflict"},
		{name: "not found", give: apierrors.NewNotFound(rsGR, "web-abc"), want: "NotFound"},
		{name: "forbidden", give: apierrors.NewForbidden(rsGR, "web-abc", errors.New("quota")), want: "Forbidden"},
		{name: "not an API error", give: errors.New("connection reset"), want: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			m.APIWrite("update", "replicasets", tt.give)
			if got := counterValue(t, m.writes.WithLabelValues("update", "replicasets", tt.want)); got != 1 {
				t.Errorf("writes{code=%q} = %v, want 1", tt.want, got)
			}
			if got := seriesCount(m.writes); got != 1 {
				t.Errorf("series = %d, want 1", got)
			}
		})
	}
}

// Each apiserver write of an activity is counted by verb, resource and result.
func TestActivityWritesAreCounted(t *testing.T) {
	stale := testRS("web-abc", rsUID, dUID, 1)
	target := withRS(stale, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(3)) })
	f := newFixture(t, testDeployment(), stale)
	f.failFirst("update", "replicasets", 1, conflict(rsGR, "web-abc"))
	status := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.Status.Replicas = 3 })
	in := WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: target, FromReplicas: 1, ThenStatus: status}
	// The first attempt conflicts (a change the decision did not read) and is retried.
	if _, err := f.a.ScaleUpReplicaSet(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		give [3]string // verb, resource, code
		want float64
	}{
		{give: [3]string{"update", "replicasets", "Conflict"}, want: 1},
		{give: [3]string{"update", "replicasets", "ok"}, want: 1},
		{give: [3]string{"update", "deployments/status", "ok"}, want: 1},
	}
	for _, tt := range tests {
		if got := counterValue(t, f.m.writes.WithLabelValues(tt.give[:]...)); got != tt.want {
			t.Errorf("writes%v = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestErrorCounter(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&ErrorCounter{Metrics: m}}})
	a := &Activities{Client: fake.NewClientset(testDeployment())}
	env.RegisterActivity(a)

	tests := []struct {
		name     string
		give     SetPausedInput
		wantErr  bool
		wantSeen float64 // rollout_activity_errors_total{activity="SetPaused"} afterwards
	}{
		{name: "success is not counted", give: SetPausedInput{Namespace: testNS, Name: "web", Paused: true}, wantSeen: 0},
		{name: "failure is counted", give: SetPausedInput{Namespace: testNS, Name: "missing", Paused: true}, wantErr: true, wantSeen: 1},
		{name: "each failed attempt is counted", give: SetPausedInput{Namespace: testNS, Name: "missing", Paused: true}, wantErr: true, wantSeen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.ExecuteActivity(a.SetPaused, tt.give)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %t", err, tt.wantErr)
			}
			if got := counterValue(t, m.ActivityErrors.WithLabelValues("SetPaused")); got != tt.wantSeen {
				t.Errorf("activity errors = %v, want %v", got, tt.wantSeen)
			}
		})
	}

	// Without metrics the interceptor passes errors through.
	env2 := suite.NewTestActivityEnvironment()
	env2.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&ErrorCounter{}}})
	env2.RegisterActivity(a)
	if _, err := env2.ExecuteActivity(a.SetPaused, SetPausedInput{Namespace: testNS, Name: "missing"}); !IsKind(err, ErrNotFound) {
		t.Errorf("error = %v, want %s", err, ErrNotFound)
	}
}

// A lagging cache must not bring back a ReplicaSet that matches the selector but is gone: the
// live list, a consistent read, is the truth for matching ReplicaSets; the cache only adds
// owned ReplicaSets whose labels no longer match.
func TestObserveIgnoresDeletedReplicaSetsStillCached(t *testing.T) {
	released := withRS(testRS("web-c", "uid-0", dUID, 0), func(rs *appsv1.ReplicaSet) { rs.Labels["app"] = "other" })
	deleted := testRS("web-old", "uid-old", dUID, 2)
	objs := []runtime.Object{testDeployment(), testRS("web-new", "uid-new", dUID, 1), deleted, released}
	f := newFixture(t, objs...)
	// The cache listed web-old and misses its deletion, as a lagging watch would.
	f.a.Cache = stoppedCache(t, objs...)
	if err := f.client.Tracker().Delete(rsGVR, testNS, "web-old"); err != nil {
		t.Fatal(err)
	}

	// The sync knows web-old is gone (it deleted it), the cache still has it: Observe waits,
	// gives up on the cache and reads live.
	got, err := f.a.Observe(context.Background(), ObserveInput{Namespace: testNS, Name: "web",
		AtLeast: []k8s.ObjectVersion{{Kind: "ReplicaSet", Name: "web-old", Gone: true}}})
	checkErr(t, err, "")
	var names []string
	for _, rs := range got.Snapshot.ReplicaSets {
		names = append(names, rs.Name)
	}
	if want := []string{"web-c", "web-new"}; !reflect.DeepEqual(names, want) || got.FromCache {
		t.Errorf("replicasets = %q (from cache %t), want %q read live", names, got.FromCache, want)
	}
	// With nothing to wait for, the cache is used as it is, as the upstream controller does.
	got, err = f.a.Observe(context.Background(), ObserveInput{Namespace: testNS, Name: "web"})
	checkErr(t, err, "")
	if !got.FromCache || len(got.Snapshot.ReplicaSets) != 3 {
		t.Errorf("from cache %t with %d replicasets, want the cache's 3", got.FromCache, len(got.Snapshot.ReplicaSets))
	}
}

// TestWritesReportVersions: every write reports the resourceVersion it produced, so the next
// sync waits for the cache to show it.
func TestWritesReportVersions(t *testing.T) {
	f := newFixture(t, testDeployment(), testRS("web-a", "uid-a", dUID, 1))
	rs, err := f.client.AppsV1().ReplicaSets(testNS).Get(context.Background(), "web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := rs.DeepCopy()
	n := int32(3)
	want.Spec.Replicas = &n
	d, err := f.client.AppsV1().Deployments(testNS).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.a.ScaleUpReplicaSet(context.Background(), WriteReplicaSetInput{
		Deployment: DeploymentRef{Namespace: testNS, Name: "web", UID: dUID}, ReplicaSet: want, FromReplicas: 1, ThenStatus: d,
	})
	checkErr(t, err, "")
	if len(res.Wrote) != 2 || res.Wrote[0].Kind != "ReplicaSet" || res.Wrote[0].Name != "web-a" || res.Wrote[1].Kind != "Deployment" || res.Wrote[1].Name != "web" {
		t.Errorf("wrote = %+v, want the ReplicaSet then the Deployment", res.Wrote)
	}
	cres, err := f.a.CleanupReplicaSets(context.Background(), CleanupInput{Deployment: DeploymentRef{Namespace: testNS, Name: "web", UID: dUID}, Delete: []k8s.ObjectRef{{Name: "web-a", UID: "uid-a"}}})
	checkErr(t, err, "")
	if len(cres.Wrote) != 1 || !cres.Wrote[0].Gone {
		t.Errorf("cleanup wrote = %+v, want web-a gone", cres.Wrote)
	}
}

// repeat is xs, n times over.
func repeat(xs []string, n int) []string {
	var out []string
	for range n {
		out = append(out, xs...)
	}
	return out
}
