package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// ---------------------------------------------------------------------------------------------
// In-memory cluster
// ---------------------------------------------------------------------------------------------

const (
	testNS   = "default"
	testName = "web"
	testUID  = types.UID("deployment-uid-1")
	// testLocalWait is a worker's --local-wait in tests that run local waits.
	testLocalWait = 300 * time.Millisecond
)

var baseTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeCluster holds one Deployment and its ReplicaSets and implements every local activity the
// workflow runs. Writes apply to the in-memory objects; a ReplicaSet's status follows its spec at
// once, as if the ReplicaSet controller and the kubelet were instantaneous.
type fakeCluster struct {
	mu sync.Mutex

	d   *appsv1.Deployment // nil: deleted
	rss []*appsv1.ReplicaSet

	clock  time.Time // creation timestamps for new ReplicaSets
	uidSeq int

	calls     map[string]int
	events    []k8s.Event
	rollbacks []*appsv1.Deployment // RollbackDeployment inputs
	created   []string             // names of created ReplicaSets
	observed  []activities.ObserveInput

	// afterWrite, if set, runs (without the lock held) after every successful write, with the
	// activity name.
	afterWrite func(activity string)
	// localWait is the worker's --local-wait that Observe reports (0: no local waits).
	localWait time.Duration
	// uiURL is the worker's --ui-url that Observe reports.
	uiURL string
	// localMoves: how many local waits see a move within their window; the rest see none.
	localMoves int
	// order lists every activity call in order.
	order []string
	// awaitSnapshot: the AwaitChange activity returns the snapshot it decided on, as the real
	// one does, and the sync may decide on it without an Observe.
	awaitSnapshot bool
	// beforeAwait, if set, runs with the lock held when the AwaitChange activity starts (a
	// test's pods becoming available between syncs).
	beforeAwait func()
	// staleCreates: how many CreateReplicaSet calls fail as stale decisions (ErrStale) before
	// they succeed; busyCreates, after those, as refused on a saturated budget (ErrBusy).
	staleCreates, busyCreates int
	// rest: AwaitChange ends AwaitRest when the workflow allows it (AwaitInput.Rest), as a
	// worker with its watcher does for a rollout held at rest; restAwaits counts those.
	rest       bool
	restAwaits int
	// weighTraffic: AwaitChange weighs in.Traffic (AwaitTraffic.Moves) for a held rollout
	// and returns Decide only when the route should move (trafficWakes counts those).
	weighTraffic bool
	trafficWakes int
	// retryAwaits: the AwaitChange activities that were a stale decision's retry (Retry).
	retryAwaits int
	// awaits: every AwaitChange activity's input; awaitMoves: the moves the first one asked
	// to make them (AwaitInput.Inline) reports it made.
	awaits     []activities.AwaitInput
	awaitMoves []activities.Move
	// inlineRoute, if set, plays the AwaitChange activity's own route moves for a wait given
	// AwaitInput.InlineTraffic (called without the lock); what it returns is the result's
	// Traffic.
	inlineRoute func(in activities.AwaitInput) *activities.SyncTrafficResult
	// routeUnknown: the next wait given the route reports a route move that failed part-way
	// (AwaitResult.RouteUnknown).
	routeUnknown bool
}

func newFakeCluster(d *appsv1.Deployment, rss ...*appsv1.ReplicaSet) *fakeCluster {
	return &fakeCluster{d: d, rss: rss, clock: baseTime, calls: map[string]int{}}
}

func int32p(v int32) *int32 { return &v }
func int64p(v int64) *int64 { return &v }
func boolp(v bool) *bool    { return &v }

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// newDeployment is a RollingUpdate Deployment (maxSurge 25%, maxUnavailable 25%: for 3
// replicas, surge 1 and unavailable 0) at the given template and revision.
func newDeployment(image string, replicas int32, revision string) *appsv1.Deployment {
	maxSurge, maxUnavailable := intstr.FromString("25%"), intstr.FromString("25%")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: testName, UID: testUID, Generation: 1,
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate(image),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable},
			},
			RevisionHistoryLimit:    int32p(10),
			ProgressDeadlineSeconds: int32p(600),
		},
	}
	if revision != "" {
		d.Annotations[k8s.RevisionAnnotation] = revision
	}
	return d
}

// newReplicaSet builds a ReplicaSet of d for the image's template the way the engine names and
// labels it, settled at replicas.
func newReplicaSet(d *appsv1.Deployment, image string, revision int64, replicas int32, age time.Duration) *appsv1.ReplicaSet {
	tmpl := podTemplate(image)
	hash := k8s.PodTemplateHash(&tmpl, nil)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rsLabels := map[string]string{}
	for k, v := range tmpl.Labels {
		rsLabels[k] = v
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         d.Namespace,
			Name:              k8s.ReplicaSetName(d.Name, hash),
			UID:               types.UID("rs-uid-" + image),
			Generation:        1,
			CreationTimestamp: metav1.NewTime(baseTime.Add(-age)),
			Labels:            rsLabels,
			Annotations: map[string]string{
				k8s.RevisionAnnotation:        fmt.Sprint(revision),
				k8s.DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas),
				k8s.MaxReplicasAnnotation:     fmt.Sprint(*d.Spec.Replicas + 1),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}},
			Template: tmpl,
		},
	}
	settle(rs)
	return rs
}

// settle plays the ReplicaSet controller: every replica exists and is ready and available.
func settle(rs *appsv1.ReplicaSet) {
	n := *rs.Spec.Replicas
	rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = n, n, n
	rs.Status.FullyLabeledReplicas = n
	rs.Status.ObservedGeneration = rs.Generation
}

func appErr(kind, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), kind, nil)
}

func (f *fakeCluster) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.Observe, mock.Anything, mock.Anything).Return(f.Observe)
	env.OnActivity(a.SetPaused, mock.Anything, mock.Anything).Return(f.SetPaused)
	env.OnActivity(a.SetImage, mock.Anything, mock.Anything).Return(f.SetImage)
	env.OnActivity(a.RecordEvent, mock.Anything, mock.Anything).Return(f.RecordEvent)
	env.OnActivity(a.ClaimReplicaSets, mock.Anything, mock.Anything).Return(f.ClaimReplicaSets)
	env.OnActivity(a.CreateReplicaSet, mock.Anything, mock.Anything).Return(f.CreateReplicaSet)
	env.OnActivity(a.ScaleUpReplicaSet, mock.Anything, mock.Anything).Return(f.ScaleUpReplicaSet)
	env.OnActivity(a.ScaleDownReplicaSet, mock.Anything, mock.Anything).Return(f.ScaleDownReplicaSet)
	env.OnActivity(a.UpdateReplicaSet, mock.Anything, mock.Anything).Return(f.UpdateReplicaSet)
	env.OnActivity(a.CleanupReplicaSets, mock.Anything, mock.Anything).Return(f.CleanupReplicaSets)
	env.OnActivity(a.UpdateDeploymentStatus, mock.Anything, mock.Anything).Return(f.UpdateDeploymentStatus)
	env.OnActivity(a.RollbackDeployment, mock.Anything, mock.Anything).Return(f.RollbackDeployment)
	// The fake cluster settles at once, so there is nothing to wait for. The local wait (inside
	// the workflow task) sees no move within its window, unless localMoves says otherwise; the
	// AwaitChange activity then lasts a minute of workflow time (the old resync), which lets
	// tests land signals mid-rollout, and then asks for a sync.
	isLocal := func(in activities.AwaitInput) bool { return in.MaxWait != awaitMaxWait }
	env.OnActivity(a.AwaitChange, mock.Anything, mock.MatchedBy(isLocal)).Return(f.AwaitChange)
	env.OnActivity(a.AwaitChange, mock.Anything, mock.MatchedBy(func(in activities.AwaitInput) bool { return !isLocal(in) })).
		After(time.Minute).Return(f.AwaitChange)
}

func (f *fakeCluster) AwaitChange(_ context.Context, in activities.AwaitInput) (activities.AwaitResult, error) {
	var waited *activities.SyncTrafficResult
	if in.InlineTraffic != nil && f.inlineRoute != nil && in.MaxWait == awaitMaxWait && !in.RestCheck {
		waited = f.inlineRoute(in)
	}
	f.mu.Lock()
	if in.RestCheck {
		// restChecked's look (rest-checked-locally): at rest where the fake's watcher runs.
		defer f.done("RestCheck", false, new(error))
		if !f.rest {
			return activities.AwaitResult{Reason: activities.AwaitResync, Unwatched: true}, nil
		}
		if in.Rest {
			f.restAwaits++
			return activities.AwaitResult{Reason: activities.AwaitRest}, nil
		}
		return activities.AwaitResult{Reason: activities.AwaitResync}, nil
	}
	if in.MaxWait != awaitMaxWait {
		defer f.done("LocalAwaitChange", false, new(error))
		if f.localMoves > 0 {
			f.localMoves--
			return activities.AwaitResult{Reason: activities.AwaitDecide}, nil
		}
		return activities.AwaitResult{Reason: activities.AwaitResync}, nil
	}
	defer f.done("AwaitChange", false, new(error))
	f.awaits = append(f.awaits, in)
	if in.Retry {
		f.retryAwaits++
		return activities.AwaitResult{Reason: activities.AwaitDecide}, nil
	}
	if f.beforeAwait != nil {
		f.beforeAwait()
	}
	if in.Traffic != nil && f.weighTraffic {
		// The route weighed as the real wait weighs it (AwaitTraffic.Moves): a held rollout
		// wakes when its pods call for a move of the route, and waits on otherwise.
		snap := f.snapshot()
		if plan, err := k8s.Decide(snap, in.Request, time.Now()); err == nil {
			if move, _ := in.Traffic.Moves(snap.ReplicaSets, plan); move {
				f.trafficWakes++
				return activities.AwaitResult{Reason: activities.AwaitDecide}, nil
			}
			if c := in.Request.Canary; c != nil && c.Hold && len(plan.Steps) == 0 {
				return activities.AwaitResult{Reason: activities.AwaitResync}, nil
			}
		}
	}
	if in.Rest && f.rest {
		// The worker's watcher runs and the cluster shows the rollout held at rest.
		f.restAwaits++
		return activities.AwaitResult{Reason: activities.AwaitRest}, nil
	}
	res := activities.AwaitResult{Reason: activities.AwaitDecide, Traffic: waited}
	if in.InlineTraffic != nil && f.routeUnknown {
		res.RouteUnknown, f.routeUnknown = true, false
	}
	if in.Inline {
		res.Moves, f.awaitMoves = f.awaitMoves, nil
	}
	if f.awaitSnapshot && f.d != nil {
		snap := f.snapshot()
		res.Snapshot = &snap
	}
	return res, nil
}

// wrote bumps the call count and, for a write that succeeded, runs the afterWrite hook once the
// lock is released.
func (f *fakeCluster) done(activity string, write bool, err *error) {
	f.calls[activity]++
	f.order = append(f.order, activity)
	hook := f.afterWrite
	f.mu.Unlock()
	if write && *err == nil && hook != nil {
		hook(activity)
	}
}

func (f *fakeCluster) findRS(name string) int {
	for i, rs := range f.rss {
		if rs.Name == name {
			return i
		}
	}
	return -1
}

func (f *fakeCluster) Observe(_ context.Context, in activities.ObserveInput) (_ activities.ObserveResult, err error) {
	f.mu.Lock()
	defer f.done("Observe", false, &err)
	f.observed = append(f.observed, in)
	if f.d == nil || f.d.Namespace != in.Namespace || f.d.Name != in.Name {
		return activities.ObserveResult{Found: false}, nil
	}
	return activities.ObserveResult{Found: true, Snapshot: f.snapshot(), LocalWait: f.localWait, UIURL: f.uiURL}, nil
}

// snapshot is what a sync sees of the fake cluster. Call it with the lock held.
func (f *fakeCluster) snapshot() k8s.Snapshot {
	snap := k8s.Snapshot{Deployment: f.d.DeepCopy()}
	sel, serr := metav1.LabelSelectorAsSelector(f.d.Spec.Selector)
	if serr != nil {
		return snap
	}
	for _, rs := range f.rss {
		ref := metav1.GetControllerOf(rs)
		if sel.Matches(labels.Set(rs.Labels)) && (ref == nil || ref.UID == f.d.UID) {
			snap.ReplicaSets = append(snap.ReplicaSets, rs.DeepCopy())
		}
	}
	sort.Slice(snap.ReplicaSets, func(i, j int) bool { return snap.ReplicaSets[i].Name < snap.ReplicaSets[j].Name })
	return snap
}

func (f *fakeCluster) SetPaused(_ context.Context, in activities.SetPausedInput) (_ activities.SetPausedResult, err error) {
	f.mu.Lock()
	defer f.done("SetPaused", true, &err)
	if f.d == nil {
		return activities.SetPausedResult{}, appErr(activities.ErrNotFound, "deployment %s/%s not found", in.Namespace, in.Name)
	}
	if f.d.Spec.Paused == in.Paused {
		return activities.SetPausedResult{}, nil
	}
	f.d.Spec.Paused = in.Paused
	f.d.Generation++
	return activities.SetPausedResult{Changed: true}, nil
}

func (f *fakeCluster) SetImage(_ context.Context, in activities.SetImageInput) (_ activities.SetImageResult, err error) {
	f.mu.Lock()
	defer f.done("SetImage", true, &err)
	if f.d == nil {
		return activities.SetImageResult{}, appErr(activities.ErrNotFound, "deployment %s/%s not found", in.Namespace, in.Name)
	}
	changed := false
	var parts []string
	for name, image := range in.Images {
		found := false
		for i := range f.d.Spec.Template.Spec.Containers {
			c := &f.d.Spec.Template.Spec.Containers[i]
			if c.Name == name {
				found = true
				if c.Image != image {
					c.Image, changed = image, true
				}
			}
		}
		if !found {
			return activities.SetImageResult{}, appErr(activities.ErrInvalid, "no container named %q", name)
		}
		parts = append(parts, name+"="+image)
	}
	if !changed {
		return activities.SetImageResult{}, nil
	}
	sort.Strings(parts)
	cause := "set image " + strings.Join(parts, ",")
	f.d.Annotations[k8s.ChangeCauseAnnotation] = cause
	f.d.Generation++
	return activities.SetImageResult{Changed: true, ChangeCause: cause}, nil
}

func (f *fakeCluster) RecordEvent(_ context.Context, in activities.RecordEventInput) (err error) {
	f.mu.Lock()
	defer f.done("RecordEvent", false, &err)
	f.events = append(f.events, in.Events...)
	return nil
}

func (f *fakeCluster) ClaimReplicaSets(_ context.Context, in activities.ClaimInput) (_ activities.ClaimResult, err error) {
	f.mu.Lock()
	defer f.done("ClaimReplicaSets", true, &err)
	var res activities.ClaimResult
	if len(in.Adopt) > 0 && (f.d == nil || f.d.UID != in.Deployment.UID) {
		return res, appErr(activities.ErrStale, "deployment %s is gone", in.Deployment)
	}
	for _, r := range in.Adopt {
		if i := f.findRS(r.Name); i >= 0 && f.rss[i].UID == r.UID {
			f.rss[i].OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(f.d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
			res.Adopted = append(res.Adopted, r.Name)
		}
	}
	for _, r := range in.Release {
		if i := f.findRS(r.Name); i >= 0 && f.rss[i].UID == r.UID {
			var kept []metav1.OwnerReference
			for _, o := range f.rss[i].OwnerReferences {
				if o.UID != in.Deployment.UID {
					kept = append(kept, o)
				}
			}
			f.rss[i].OwnerReferences = kept
			res.Released = append(res.Released, r.Name)
		}
	}
	return res, nil
}

func (f *fakeCluster) CreateReplicaSet(_ context.Context, in activities.CreateInput) (_ activities.CreateResult, err error) {
	f.mu.Lock()
	defer f.done("CreateReplicaSet", true, &err)
	if f.staleCreates > 0 {
		f.staleCreates--
		return activities.CreateResult{}, appErr(activities.ErrStale, "deployment changed since the decision")
	}
	if f.busyCreates > 0 {
		f.busyCreates--
		return activities.CreateResult{}, appErr(activities.ErrBusy, "client budget saturated")
	}
	if in.ReplicaSet == nil || in.ReplicaSet.Name == "" || in.ReplicaSet.Namespace != in.Deployment.Namespace {
		return activities.CreateResult{}, appErr(activities.ErrInvalid, "invalid replicaset")
	}
	rs := in.ReplicaSet.DeepCopy()
	res := activities.CreateResult{Name: rs.Name}
	if i := f.findRS(rs.Name); i >= 0 {
		existing := f.rss[i]
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == in.Deployment.UID && k8s.EqualIgnoreHash(&rs.Spec.Template, &existing.Spec.Template) {
			res.Existed = true
			return res, nil
		}
		if f.d.Status.CollisionCount == nil {
			f.d.Status.CollisionCount = new(int32)
		}
		*f.d.Status.CollisionCount++
		res.Collision = true
		return res, nil
	}
	f.uidSeq++
	f.clock = f.clock.Add(time.Minute)
	rs.UID = types.UID(fmt.Sprintf("rs-uid-created-%d", f.uidSeq))
	rs.CreationTimestamp = metav1.NewTime(f.clock)
	rs.Generation = 1
	rs.ResourceVersion = "1"
	settle(rs)
	f.rss = append(f.rss, rs)
	f.created = append(f.created, rs.Name)
	f.events = append(f.events, in.Events...)
	res.Created = true
	return res, nil
}

func (f *fakeCluster) writeReplicaSet(in activities.WriteReplicaSetInput) (activities.WriteReplicaSetResult, error) {
	want := in.ReplicaSet
	if want == nil || want.Name == "" || want.Spec.Replicas == nil || *want.Spec.Replicas < 0 {
		return activities.WriteReplicaSetResult{}, appErr(activities.ErrInvalid, "invalid target")
	}
	i := f.findRS(want.Name)
	if i < 0 {
		return activities.WriteReplicaSetResult{}, appErr(activities.ErrNotFound, "replicaset %s not found", want.Name)
	}
	rs := f.rss[i]
	if rs.UID != want.UID {
		return activities.WriteReplicaSetResult{}, appErr(activities.ErrStale, "replicaset %s was replaced", want.Name)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != in.Deployment.UID {
		return activities.WriteReplicaSetResult{}, appErr(activities.ErrStale, "replicaset %s is not ours", want.Name)
	}
	specChanged := *rs.Spec.Replicas != *want.Spec.Replicas || rs.Spec.MinReadySeconds != want.Spec.MinReadySeconds
	rs.Spec.Replicas = int32p(*want.Spec.Replicas)
	rs.Spec.MinReadySeconds = want.Spec.MinReadySeconds
	rs.Annotations = map[string]string{}
	for k, v := range want.Annotations {
		rs.Annotations[k] = v
	}
	if specChanged {
		rs.Generation++
	}
	settle(rs)
	f.events = append(f.events, in.Events...)
	return activities.WriteReplicaSetResult{Name: rs.Name, Replicas: *rs.Spec.Replicas}, nil
}

func (f *fakeCluster) ScaleUpReplicaSet(_ context.Context, in activities.WriteReplicaSetInput) (_ activities.WriteReplicaSetResult, err error) {
	f.mu.Lock()
	defer f.done("ScaleUpReplicaSet", true, &err)
	return f.writeReplicaSet(in)
}

func (f *fakeCluster) ScaleDownReplicaSet(_ context.Context, in activities.WriteReplicaSetInput) (_ activities.WriteReplicaSetResult, err error) {
	f.mu.Lock()
	defer f.done("ScaleDownReplicaSet", true, &err)
	return f.writeReplicaSet(in)
}

func (f *fakeCluster) UpdateReplicaSet(_ context.Context, in activities.WriteReplicaSetInput) (_ activities.WriteReplicaSetResult, err error) {
	f.mu.Lock()
	defer f.done("UpdateReplicaSet", true, &err)
	return f.writeReplicaSet(in)
}

func (f *fakeCluster) CleanupReplicaSets(_ context.Context, in activities.CleanupInput) (_ activities.CleanupResult, err error) {
	f.mu.Lock()
	defer f.done("CleanupReplicaSets", true, &err)
	var res activities.CleanupResult
	for _, r := range in.Delete {
		if i := f.findRS(r.Name); i >= 0 && f.rss[i].UID == r.UID {
			f.rss = append(f.rss[:i], f.rss[i+1:]...)
			res.Deleted = append(res.Deleted, r.Name)
		}
	}
	return res, nil
}

// checkDeployment is the resourceVersion precondition of a Deployment write, at generation
// granularity: a write decided on an older spec is stale.
func (f *fakeCluster) checkDeployment(want *appsv1.Deployment) error {
	if want == nil || want.Name == "" {
		return appErr(activities.ErrInvalid, "no deployment given")
	}
	if f.d == nil {
		return appErr(activities.ErrNotFound, "deployment %s/%s not found", want.Namespace, want.Name)
	}
	if f.d.UID != want.UID || f.d.Generation != want.Generation {
		return appErr(activities.ErrStale, "deployment changed (generation %d, want %d)", f.d.Generation, want.Generation)
	}
	return nil
}

func (f *fakeCluster) UpdateDeploymentStatus(_ context.Context, in activities.DeploymentWriteInput) (_ activities.DeploymentWriteResult, err error) {
	f.mu.Lock()
	defer f.done("UpdateDeploymentStatus", true, &err)
	if err := f.checkDeployment(in.Deployment); err != nil {
		return activities.DeploymentWriteResult{}, err
	}
	f.d.Status = *in.Deployment.Status.DeepCopy()
	f.d.Annotations = map[string]string{}
	for k, v := range in.Deployment.Annotations {
		f.d.Annotations[k] = v
	}
	f.events = append(f.events, in.Events...)
	return activities.DeploymentWriteResult{}, nil
}

func (f *fakeCluster) RollbackDeployment(_ context.Context, in activities.DeploymentWriteInput) (_ activities.DeploymentWriteResult, err error) {
	f.mu.Lock()
	defer f.done("RollbackDeployment", true, &err)
	if err := f.checkDeployment(in.Deployment); err != nil {
		return activities.DeploymentWriteResult{}, err
	}
	f.rollbacks = append(f.rollbacks, in.Deployment.DeepCopy())
	if !equality.Semantic.DeepEqual(f.d.Spec.Template, in.Deployment.Spec.Template) {
		f.d.Spec.Template = *in.Deployment.Spec.Template.DeepCopy()
		f.d.Generation++
	}
	f.d.Annotations = map[string]string{}
	for k, v := range in.Deployment.Annotations {
		f.d.Annotations[k] = v
	}
	f.events = append(f.events, in.Events...)
	return activities.DeploymentWriteResult{}, nil
}

// --- test-side access (what kubectl would do) ---

func (f *fakeCluster) setImage(image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d.Spec.Template.Spec.Containers[0].Image = image
	f.d.Generation++
}

func (f *fakeCluster) deleteDeployment() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d = nil
}

func (f *fakeCluster) paused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.d != nil && f.d.Spec.Paused
}

func (f *fakeCluster) numReplicaSets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rss)
}

func (f *fakeCluster) callCount(activity string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[activity]
}

func (f *fakeCluster) hasEvent(reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// replicasByImage maps each ReplicaSet's image to its spec.replicas.
func (f *fakeCluster) replicasByImage() map[string]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int32{}
	for _, rs := range f.rss {
		out[rs.Spec.Template.Spec.Containers[0].Image] = *rs.Spec.Replicas
	}
	return out
}

func (f *fakeCluster) image() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.d.Spec.Template.Spec.Containers[0].Image
}

func (f *fakeCluster) annotation(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.d.Annotations[key]
}

// rsAnnotation is an annotation of the ReplicaSet running image.
func (f *fakeCluster) rsAnnotation(image, key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rs := range f.rss {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Annotations[key]
		}
	}
	return ""
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

func newEnv(t *testing.T, f *fakeCluster) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	// As release's newEnv: the deadlock detector's 1 s of wall time is starved by other test
	// binaries on a loaded machine; a real deadlock still ends the test.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 10 * time.Second})
	env.SetTestTimeout(30 * time.Second)
	env.RegisterWorkflowWithOptions(DeploymentWorkflow, workflow.RegisterOptions{Name: contract.WorkflowType})
	f.register(env)
	recordGolden(t, env)
	return env
}

func input() Input { return Input{Input: contract.Input{Namespace: testNS, Name: testName}} }

func at(env *testsuite.TestWorkflowEnvironment, d time.Duration, fn func()) {
	env.RegisterDelayedCallback(fn, d)
}

func signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, payload any) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, payload) }, d)
}

// endByDeletion deletes the Deployment and triggers a sync at d, which ends an idle workflow
// with OutcomeDeleted, so a test can check the result of a workflow that would otherwise wait
// for signals forever.
func endByDeletion(env *testsuite.TestWorkflowEnvironment, f *fakeCluster, d time.Duration) {
	env.RegisterDelayedCallback(func() {
		f.deleteDeployment()
		env.SignalWorkflow(contract.SignalTrigger, nil)
	}, d)
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) contract.Status {
	t.Helper()
	v, err := env.QueryWorkflow(contract.QueryStatus)
	if err != nil {
		t.Fatalf("query status: %v", err)
	}
	var st contract.Status
	if err := v.Get(&st); err != nil {
		t.Fatalf("decode status: %v", err)
	}
	return st
}

// continuedAsNew checks the run continued as new and returns the next run's input.
func continuedAsNew(t *testing.T, env *testsuite.TestWorkflowEnvironment) Input {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatalf("workflow did not complete")
	}
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error: got %v (%T), want a *workflow.ContinueAsNewError", err, err)
	}
	if can.WorkflowType == nil || can.WorkflowType.Name != contract.WorkflowType {
		t.Fatalf("continue-as-new workflow type: got %v, want %s", can.WorkflowType, contract.WorkflowType)
	}
	var next Input
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatalf("decode continue-as-new input: %v", err)
	}
	if next.Namespace != testNS || next.Name != testName || next.State == nil {
		t.Fatalf("continue-as-new input: got %+v, want %s/%s with a carry", next, testNS, testName)
	}
	return next
}

func deleted(t *testing.T, env *testsuite.TestWorkflowEnvironment) contract.Result {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatalf("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: got %v, want none", err)
	}
	var res contract.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if res.Outcome != contract.OutcomeDeleted {
		t.Fatalf("outcome: got %q, want %q", res.Outcome, contract.OutcomeDeleted)
	}
	return res
}

func assertReplicas(t *testing.T, f *fakeCluster, want map[string]int32) {
	t.Helper()
	got := f.replicasByImage()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replicas by image: got %v, want %v", got, want)
	}
}

// check records a failure from a delayed callback without stopping the workflow goroutine.
func check(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Errorf(format, args...)
	}
}

// midRollout is a Deployment whose template moved from v1 to v2; v1 runs 3 replicas.
func midRollout() *fakeCluster {
	d := newDeployment("nginx:v2", 3, "1")
	d.Generation = 2
	return newFakeCluster(d, newReplicaSet(d, "nginx:v1", 1, 3, time.Hour))
}

// steady is a Deployment fully rolled out at v1.
func steady() *fakeCluster {
	d := newDeployment("nginx:v1", 3, "1")
	return newFakeCluster(d, newReplicaSet(d, "nginx:v1", 1, 3, time.Hour))
}

// steadyAtV2 is a Deployment rolled out at v2 (revision 2) with v1 (revision 1) scaled to 0.
func steadyAtV2() *fakeCluster {
	d := newDeployment("nginx:v2", 3, "2")
	d.Generation = 2
	return newFakeCluster(d,
		newReplicaSet(d, "nginx:v1", 1, 0, 2*time.Hour),
		newReplicaSet(d, "nginx:v2", 2, 3, time.Hour))
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

// 1. A RollingUpdate rollout completes and the run continues as new, idle.
func TestRolloutCompletesAndContinuesAsNew(t *testing.T) {
	tests := []struct {
		name        string
		cluster     func() *fakeCluster
		in          Input
		changeCause string
	}{
		{name: "template change", cluster: midRollout, in: input()},
		{
			name: "image from input", cluster: steady,
			in:          Input{Input: contract.Input{Namespace: testNS, Name: testName, Image: map[string]string{"app": "nginx:v2"}}},
			changeCause: "set image app=nginx:v2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.cluster()
			env := newEnv(t, f)
			env.ExecuteWorkflow(contract.WorkflowType, tt.in)

			next := continuedAsNew(t, env)
			if !next.State.Idle || next.State.Dirty || next.State.RollbackTo != nil || next.State.Pause != nil {
				t.Fatalf("carry: got %+v, want idle with nothing pending", *next.State)
			}
			if st := next.State.Status; st.Phase != string(k8s.PhaseComplete) || st.CurrentRevision != 2 {
				t.Fatalf("carried status: got %+v, want phase Complete at revision 2", st)
			}
			assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
			if got := f.annotation(k8s.RevisionAnnotation); got != "2" {
				t.Fatalf("deployment revision: got %q, want %q", got, "2")
			}
			if got := f.rsAnnotation("nginx:v2", k8s.RevisionAnnotation); got != "2" {
				t.Fatalf("new replicaset revision: got %q, want %q", got, "2")
			}
			if got := f.rsAnnotation("nginx:v2", k8s.ChangeCauseAnnotation); got != tt.changeCause {
				t.Fatalf("new replicaset change-cause: got %q, want %q", got, tt.changeCause)
			}
			if got := len(f.created); got != 1 {
				t.Fatalf("replicasets created: got %d, want 1", got)
			}
			st := queryStatus(t, env)
			if st.Phase != string(k8s.PhaseComplete) || st.CurrentRevision != 2 || st.Syncs < 2 {
				t.Fatalf("status: got phase %q revision %d syncs %d, want Complete, 2, >= 2", st.Phase, st.CurrentRevision, st.Syncs)
			}
		})
	}
}

// 2. Pause stops the rollout (no new ReplicaSet while paused); resume finishes it.
func TestPauseAndResume(t *testing.T) {
	t.Run("paused before a template change", func(t *testing.T) {
		f := steady()
		env := newEnv(t, f)
		signalAt(env, 10*time.Second, contract.SignalPause, nil)
		at(env, 20*time.Second, func() {
			check(t, f.paused(), "after pause: spec.paused got false, want true")
			f.setImage("nginx:v2")
			env.SignalWorkflow(contract.SignalTrigger, nil)
		})
		at(env, 30*time.Second, func() {
			check(t, f.numReplicaSets() == 1, "while paused: replicasets got %d, want 1", f.numReplicaSets())
			st := queryStatus(t, env)
			check(t, st.Paused && st.Phase == string(k8s.PhasePaused), "while paused: status got paused=%t phase %q, want true, Paused", st.Paused, st.Phase)
		})
		signalAt(env, 40*time.Second, contract.SignalResume, nil)
		env.ExecuteWorkflow(contract.WorkflowType, input())

		next := continuedAsNew(t, env)
		if !next.State.Idle || next.State.Pause != nil {
			t.Fatalf("carry: got %+v, want idle with no pending pause", *next.State)
		}
		if f.paused() {
			t.Fatalf("after resume: spec.paused got true, want false")
		}
		assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
	})

	t.Run("paused mid-rollout", func(t *testing.T) {
		f := midRollout()
		env := newEnv(t, f)
		// The first sync creates the v2 ReplicaSet; the pause lands before the wait a minute
		// later asks for the next move.
		signalAt(env, 30*time.Second, contract.SignalPause, nil)
		var mid map[string]int32
		at(env, 2*time.Minute, func() {
			check(t, f.paused(), "after pause: spec.paused got false, want true")
			mid = f.replicasByImage()
			check(t, len(mid) == 2 && mid["nginx:v2"] != 3, "after pause: replicas by image got %v, want the v2 rollout under way", mid)
			st := queryStatus(t, env)
			check(t, st.Phase == string(k8s.PhasePaused), "after pause: phase %q, want Paused (the run stays open for the resume)", st.Phase)
			// A template change while paused creates nothing.
			f.setImage("nginx:v3")
			env.SignalWorkflow(contract.SignalTrigger, nil)
		})
		at(env, 3*time.Minute, func() {
			check(t, f.numReplicaSets() == 2, "while paused: replicasets got %d, want 2", f.numReplicaSets())
			check(t, f.callCount("CreateReplicaSet") == 1, "while paused: creates got %d, want 1", f.callCount("CreateReplicaSet"))
			check(t, f.paused(), "while paused: spec.paused got false, want true")
		})
		// The resume is part of the same run: a paused rollout does not continue as new.
		signalAt(env, 4*time.Minute, contract.SignalResume, nil)
		env.ExecuteWorkflow(contract.WorkflowType, input())

		next := continuedAsNew(t, env)
		if !next.State.Idle {
			t.Fatalf("carry: got %+v, want idle", *next.State)
		}
		if f.paused() {
			t.Fatalf("after resume: spec.paused got true, want false")
		}
		assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 0, "nginx:v3": 3})
	})
}

// 3. Rollback to a known revision rolls the template back; to an unknown one records an event
// and the workflow carries on.
func TestRollback(t *testing.T) {
	tests := []struct {
		name      string
		revision  int64
		wantImage string
		wantEvent string
		wantRS    map[string]int32
	}{
		{name: "revision 1", revision: 1, wantImage: "nginx:v1", wantEvent: k8s.RollbackDone,
			wantRS: map[string]int32{"nginx:v1": 3, "nginx:v2": 0}},
		{name: "previous revision", revision: 0, wantImage: "nginx:v1", wantEvent: k8s.RollbackDone,
			wantRS: map[string]int32{"nginx:v1": 3, "nginx:v2": 0}},
		{name: "unknown revision", revision: 99, wantImage: "nginx:v2", wantEvent: k8s.RollbackRevisionNotFound,
			wantRS: map[string]int32{"nginx:v1": 0, "nginx:v2": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := steadyAtV2()
			// Every local wait sees a move: only the rollback sends the wait after it to the
			// activity (see recordRollback).
			f.localWait, f.localMoves = testLocalWait, 100
			env := newEnv(t, f)
			at(env, 5*time.Second, func() {
				st := queryStatus(t, env)
				check(t, st.Phase == string(k8s.PhaseComplete) && st.PendingRollback == nil,
					"before rollback: status got phase %q pending %v, want Complete, nil", st.Phase, st.PendingRollback)
			})
			signalAt(env, 10*time.Second, contract.SignalRollback, map[string]any{"revision": tt.revision})
			if tt.wantEvent == k8s.RollbackRevisionNotFound {
				// Nothing to write: the event is recorded, the request consumed, and the run
				// stays open; end it by deleting the Deployment.
				at(env, 20*time.Second, func() {
					st := queryStatus(t, env)
					check(t, st.PendingRollback == nil && st.LastError == "", "after unknown rollback: pending %v, last error %q, want nil, none", st.PendingRollback, st.LastError)
					check(t, f.hasEvent(tt.wantEvent), "events: got %+v, want %s", f.events, tt.wantEvent)
				})
				endByDeletion(env, f, 30*time.Second)
				env.ExecuteWorkflow(contract.WorkflowType, input())
				deleted(t, env)
				if len(f.rollbacks) != 0 {
					t.Fatalf("RollbackDeployment calls: got %d, want 0 (nothing to change)", len(f.rollbacks))
				}
				return
			}
			env.ExecuteWorkflow(contract.WorkflowType, input())

			next := continuedAsNew(t, env)
			if next.State.RollbackTo != nil || !next.State.Idle {
				t.Fatalf("carry: got %+v, want idle with no rollback pending", *next.State)
			}
			if len(f.rollbacks) != 1 {
				t.Fatalf("RollbackDeployment calls: got %d, want 1", len(f.rollbacks))
			}
			if n := f.callCount("AwaitChange"); n != 1 {
				t.Fatalf("AwaitChange activities: %d, want 1 (the wait after the rollback, which completes the workflow task that recorded it)", n)
			}
			// The sync that rolls the restored template out (and bumps its ReplicaSet's
			// revision) comes after that wait, in a workflow task of its own: re-run from
			// before it, a rollback to the previous revision would otherwise roll back again.
			after := f.order[slices.Index(f.order, "RollbackDeployment")+1:]
			if len(after) == 0 || after[0] != "AwaitChange" {
				t.Fatalf("activities after the rollback: got %v, want AwaitChange first", after)
			}
			want := podTemplate(tt.wantImage)
			if got := f.rollbacks[0].Spec.Template; !k8s.EqualIgnoreHash(&got, &want) {
				t.Fatalf("rollback template: got %+v, want %+v", got, want)
			}
			if _, ok := f.rollbacks[0].Annotations[appsv1.DeprecatedRollbackTo]; ok {
				t.Fatalf("rollback kept the %s annotation", appsv1.DeprecatedRollbackTo)
			}
			if !f.hasEvent(tt.wantEvent) {
				t.Fatalf("events: got %+v, want one with reason %s", f.events, tt.wantEvent)
			}
			if got := f.image(); got != tt.wantImage {
				t.Fatalf("deployment image: got %q, want %q", got, tt.wantImage)
			}
			assertReplicas(t, f, tt.wantRS)
			st := queryStatus(t, env)
			if st.PendingRollback != nil || st.LastError != "" {
				t.Fatalf("status: got pending rollback %v, last error %q, want nil, none", st.PendingRollback, st.LastError)
			}
			if tt.wantEvent == k8s.RollbackDone {
				if got := f.annotation(k8s.RevisionAnnotation); got != "3" {
					t.Fatalf("revision after rollback: got %q, want %q", got, "3")
				}
			}
		})
	}
}

// 4. A malformed rollback payload is ignored and reported.
func TestMalformedRollbackIgnored(t *testing.T) {
	payloads := []struct {
		name    string
		payload any
	}{
		{"string", "bogus"},
		{"revision not a number", map[string]any{"revision": "x"}},
		{"unknown field", map[string]any{"rev": 1}},
		{"negative revision", map[string]any{"revision": -1}},
		{"no payload", nil},
	}
	for _, tt := range payloads {
		t.Run(tt.name, func(t *testing.T) {
			f := steadyAtV2()
			env := newEnv(t, f)
			signalAt(env, 10*time.Second, contract.SignalRollback, tt.payload)
			var st contract.Status
			at(env, 20*time.Second, func() { st = queryStatus(t, env) })
			endByDeletion(env, f, 30*time.Second)
			env.ExecuteWorkflow(contract.WorkflowType, input())

			deleted(t, env)
			if !strings.HasPrefix(st.IgnoredSignal, "rollback: ") {
				t.Fatalf("status.ignoredSignal: got %q, want a rollback explanation", st.IgnoredSignal)
			}
			if st.PendingRollback != nil || st.Syncs != 1 {
				t.Fatalf("status: got pending rollback %v, syncs %d, want nil, 1 (the signal causes no sync)", st.PendingRollback, st.Syncs)
			}
			if n := f.callCount("RollbackDeployment"); n != 0 {
				t.Fatalf("RollbackDeployment calls: got %d, want 0", n)
			}
		})
	}
}

func TestParseRollback(t *testing.T) {
	tests := []struct {
		raw     string
		want    int64
		wantErr string
	}{
		{raw: `{"revision": 1}`, want: 1},
		{raw: `{"revision":0}`, want: 0},
		{raw: ` {"revision": 42} `, want: 42},
		{raw: ``, wantErr: "empty"},
		{raw: `null`, wantErr: "empty"},
		{raw: `"bogus"`, wantErr: "is not"},
		{raw: `3`, wantErr: "is not"},
		{raw: `{"revision":"x"}`, wantErr: "is not"},
		{raw: `{"revision":1.5}`, wantErr: "is not"},
		{raw: `{"rev":1}`, wantErr: "unknown field"},
		{raw: `{"revision":1,"extra":true}`, wantErr: "unknown field"},
		{raw: `{}`, wantErr: `no "revision"`},
		{raw: `{"revision":null}`, wantErr: `no "revision"`},
		{raw: `{"revision":-1}`, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseRollback(json.RawMessage(tt.raw))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ParseRollback(%s): got error %v, want %d", tt.raw, err, tt.want)
			case tt.wantErr == "" && got != tt.want:
				t.Fatalf("ParseRollback(%s): got %d, want %d", tt.raw, got, tt.want)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("ParseRollback(%s): got %d, want an error containing %q", tt.raw, got, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("ParseRollback(%s): got error %q, want one containing %q", tt.raw, err, tt.wantErr)
			}
		})
	}
}

// 5. What one run hands to the next is acted on.
func TestCarryFromContinueAsNew(t *testing.T) {
	t.Run("pending rollback", func(t *testing.T) {
		f := steadyAtV2()
		env := newEnv(t, f)
		in := input()
		in.State = &State{Idle: true, RollbackTo: int64p(1), Runs: 3, Status: contract.Status{Namespace: testNS, Name: testName, Phase: "Complete", CurrentRevision: 2}}
		env.ExecuteWorkflow(contract.WorkflowType, in)

		next := continuedAsNew(t, env)
		if len(f.rollbacks) != 1 || f.image() != "nginx:v1" {
			t.Fatalf("rollback: got %d calls and image %q, want 1 call and nginx:v1", len(f.rollbacks), f.image())
		}
		assertReplicas(t, f, map[string]int32{"nginx:v1": 3, "nginx:v2": 0})
		if next.State.RollbackTo != nil || next.State.Runs != 4 {
			t.Fatalf("carry: got rollbackTo %v runs %d, want nil, 4", next.State.RollbackTo, next.State.Runs)
		}
	})

	t.Run("pending pause", func(t *testing.T) {
		f := steady()
		env := newEnv(t, f)
		in := input()
		in.State = &State{Idle: true, Pause: boolp(true)}
		var st contract.Status
		at(env, 10*time.Second, func() { st = queryStatus(t, env) })
		endByDeletion(env, f, 20*time.Second)
		env.ExecuteWorkflow(contract.WorkflowType, in)

		deleted(t, env)
		if n := f.callCount("SetPaused"); n != 1 {
			t.Fatalf("SetPaused calls: got %d, want 1", n)
		}
		if !st.Paused || st.Phase != string(k8s.PhasePaused) {
			t.Fatalf("status: got paused=%t phase %q, want true, Paused", st.Paused, st.Phase)
		}
	})

	t.Run("idle waits for a trigger", func(t *testing.T) {
		f := steady()
		env := newEnv(t, f)
		in := input()
		in.State = &State{Idle: true, Status: contract.Status{Namespace: testNS, Name: testName, Phase: "Complete", CurrentRevision: 1}}
		var before, after contract.Status
		var observedBefore int
		at(env, 10*time.Second, func() {
			before, observedBefore = queryStatus(t, env), f.callCount("Observe")
			env.SignalWorkflow(contract.SignalTrigger, "anything")
		})
		at(env, 20*time.Second, func() { after = queryStatus(t, env) })
		endByDeletion(env, f, 30*time.Second)
		env.ExecuteWorkflow(contract.WorkflowType, in)

		deleted(t, env)
		if observedBefore != 0 || before.Syncs != 0 || before.Phase != "Complete" || before.CurrentRevision != 1 {
			t.Fatalf("before trigger: got %d observes, status %+v, want 0 and the carried status", observedBefore, before)
		}
		if after.Syncs != 1 {
			t.Fatalf("after trigger: got %d syncs, want 1", after.Syncs)
		}
	})
}

// 6. A deleted Deployment ends the workflow.
func TestDeploymentDeleted(t *testing.T) {
	f := newFakeCluster(nil)
	env := newEnv(t, f)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	res := deleted(t, env)
	if !strings.Contains(res.Message, testNS+"/"+testName) {
		t.Fatalf("message: got %q, want it to name %s/%s", res.Message, testNS, testName)
	}
}

// 7. Invalid input fails the workflow at once, non-retryably.
func TestInvalidInput(t *testing.T) {
	tests := []struct {
		name string
		in   Input
	}{
		{"empty namespace", Input{Input: contract.Input{Name: testName}}},
		{"bad name", Input{Input: contract.Input{Namespace: testNS, Name: "Web_1"}}},
		{"empty image", Input{Input: contract.Input{Namespace: testNS, Name: testName, Image: map[string]string{"app": " "}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := steady()
			env := newEnv(t, f)
			env.ExecuteWorkflow(contract.WorkflowType, tt.in)

			if !env.IsWorkflowCompleted() {
				t.Fatalf("workflow did not complete")
			}
			err := env.GetWorkflowError()
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("workflow error: got %v (%T), want an application error", err, err)
			}
			if appErr.Type() != "InvalidInput" || !appErr.NonRetryable() {
				t.Fatalf("application error: got type %q nonRetryable %t, want InvalidInput, true", appErr.Type(), appErr.NonRetryable())
			}
			if n := f.callCount("Observe"); n != 0 {
				t.Fatalf("Observe calls: got %d, want 0", n)
			}
		})
	}
}

// 8. A signal that arrives while the last sync of a rollout is running is not lost when the run
// continues as new.
func TestSignalDuringFinalSyncIsKept(t *testing.T) {
	f := midRollout()
	env := newEnv(t, f)
	sent := onCompletingWrite(f, func() { env.SignalWorkflow(contract.SignalPause, nil) })
	// The pause is applied in this run (a paused rollout keeps its run); the resume ends it.
	var paused bool
	at(env, 10*time.Minute, func() {
		paused = f.paused()
		env.SignalWorkflow(contract.SignalResume, nil)
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	if !*sent {
		t.Fatalf("the pause signal was never sent")
	}
	if !paused {
		t.Fatalf("pause sent during the final sync: spec.paused=false before the resume, want it applied")
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
}

// onCompletingWrite runs fn once, right after the status write that completes the rollout
// (the final sync's), and reports whether it ran.
func onCompletingWrite(f *fakeCluster, fn func()) *bool {
	sent := false
	f.afterWrite = func(activity string) {
		if activity != "UpdateDeploymentStatus" || sent {
			return
		}
		f.mu.Lock()
		done := k8s.DeploymentComplete(f.d, &f.d.Status)
		f.mu.Unlock()
		if done {
			sent = true
			fn()
		}
	}
	return &sent
}

// 7b'. A new template signalled while the rollout's final sync runs (kubectl set image right
// after `kubectl rollout status` returned): the converged rollout ends its run, recorded as
// complete at its revision, and the next run takes the change. Before finish-before-next the
// two rollouts shared the run, and the first was never reported complete (its "completed"
// notification and outcome were lost).
func TestNextChangeDuringFinalSyncEndsTheRun(t *testing.T) {
	f := midRollout()
	env := newEnv(t, f)
	sent := onCompletingWrite(f, func() {
		f.mu.Lock()
		f.d.Spec.Template.Spec.Containers[0].Image = "nginx:v3"
		f.d.Generation++
		f.mu.Unlock()
		env.SignalWorkflow(contract.SignalTrigger, contract.Trigger{})
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())

	next := continuedAsNew(t, env)
	if !*sent {
		t.Fatalf("the trigger was never sent")
	}
	if next.State.Idle || !next.State.Dirty {
		t.Errorf("carry: idle %t dirty %t, want the next run to sync at once", next.State.Idle, next.State.Dirty)
	}
	if st := next.State.Status; st.Phase != string(k8s.PhaseComplete) || st.CurrentRevision != 2 || st.TargetRevision != 2 {
		t.Errorf("carried status: got %+v, want revision 2 complete", st)
	}
	if got := len(f.created); got != 1 {
		t.Errorf("replicasets created in the run: got %d, want 1 (revision 3 is the next run's)", got)
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
}

// 7c. A stale decision is synced again at once, from a live read, in the same workflow task;
// from the second in a row, the retry waits in the AwaitChange activity (Retry) for the client
// budget, so a run of retries on a saturated budget does not hold one workflow task (and the
// users' signals, updates and queries behind it) open for seconds.
func TestStaleRetriesLeaveTheTask(t *testing.T) {
	f := midRollout()
	f.staleCreates = 3
	env := newEnv(t, f)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
	if f.retryAwaits != 2 {
		t.Fatalf("retries through AwaitChange: got %d, want 2 (the second and third stale decisions)", f.retryAwaits)
	}
	// The first retry stays in the task: Observe, the stale create, Observe (live), the stale
	// create, then the wait.
	var seq []string
	for _, act := range f.order {
		if act == "Observe" || act == "CreateReplicaSet" || act == "AwaitChange" {
			seq = append(seq, act)
		}
	}
	want := []string{"Observe", "CreateReplicaSet", "Observe", "CreateReplicaSet", "AwaitChange", "Observe", "CreateReplicaSet", "AwaitChange", "Observe", "CreateReplicaSet"}
	if len(seq) < len(want) || !slices.Equal(seq[:len(want)], want) {
		t.Fatalf("activities: got %v, want %v first", seq, want)
	}
	for i, in := range f.observed[1:4] {
		if !in.Live {
			t.Errorf("Observe %d after a stale decision: not live", i+2)
		}
	}
}

// 7d. A write refused on a saturated client budget (ErrBusy) ends the workflow task; the sync
// goes on once AwaitChange (Retry) says the budget admits it, from the cache (nothing was
// written), with no backoff and no error in the status.
func TestBusyWriteWaitsForTheBudget(t *testing.T) {
	f := midRollout()
	f.busyCreates = 2
	env := newEnv(t, f)
	var during contract.Status
	f.afterWrite = func(activity string) {
		if activity == "CreateReplicaSet" && during.Name == "" {
			during = queryStatus(t, env)
		}
	}
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
	if f.retryAwaits != 2 {
		t.Fatalf("syncs resumed through AwaitChange: got %d, want 2 (one per refused write)", f.retryAwaits)
	}
	for i, in := range f.observed {
		if in.Live {
			t.Errorf("Observe %d: live, want the cache (a refused write changed nothing)", i+1)
		}
	}
	if during.Name != testName || during.LastError != "" {
		t.Errorf("status after the refused writes: %q with lastError %q, want %q with none", during.Name, during.LastError, testName)
	}
}

// 8b. A trigger naming a Deployment newer than the snapshot the wait returns (the watcher wrote
// a status refresh meanwhile) makes the sync observe again rather than decide on the wait's
// older snapshot (versionTriggerSeen); without the trigger the sync decides on that snapshot.
func TestTriggerNewerThanWaitSnapshot(t *testing.T) {
	for _, trigger := range []bool{false, true} {
		t.Run(fmt.Sprintf("trigger=%t", trigger), func(t *testing.T) {
			f := midRollout()
			f.awaitSnapshot = true
			f.d.ResourceVersion = "10"
			env := newEnv(t, f)
			var observedBefore int
			at(env, 30*time.Second, func() {
				observedBefore = f.callCount("Observe")
				if trigger {
					env.SignalWorkflow(contract.SignalTrigger, contract.Trigger{Versions: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: testName, ResourceVersion: "11"}}})
				}
			})
			var observedAfter int
			at(env, 90*time.Second, func() { observedAfter = f.callCount("Observe") })
			endByDeletion(env, f, 2*time.Hour)
			env.ExecuteWorkflow(contract.WorkflowType, input())

			if f.callCount("AwaitChange") == 0 {
				t.Fatalf("no AwaitChange activity ran")
			}
			want := observedBefore
			if trigger {
				want++
			}
			if observedAfter != want {
				t.Errorf("Observe calls after the wait: got %d, want %d (%d before it)", observedAfter, want, observedBefore)
			}
		})
	}
}

// TestTakeOverTrigger: a trigger naming no version while the AwaitChange activity waits (a
// starting worker's, watcher.TakeOver: the wait may have died with the worker before it) gives
// the wait up and syncs at once on a live read, then waits again; one naming versions (the
// watcher's) is left to the wait, which sees every change it names.
func TestTakeOverTrigger(t *testing.T) {
	tests := []struct {
		name     string
		give     *contract.Trigger
		wantSync bool
	}{
		{name: "plain", give: nil, wantSync: true},
		{name: "with versions", give: &contract.Trigger{Versions: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: testName, ResourceVersion: "1"}}}, wantSync: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := midRollout()
			env := newEnv(t, f)
			started := 0
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == "AwaitChange" {
					started++
				}
			})
			var observedBefore, observedAfter, awaitsBefore, awaitsAfter int
			at(env, 30*time.Second, func() {
				observedBefore, awaitsBefore = f.callCount("Observe"), started
				if tt.give == nil {
					env.SignalWorkflow(contract.SignalTrigger, nil)
				} else {
					env.SignalWorkflow(contract.SignalTrigger, *tt.give)
				}
			})
			at(env, 45*time.Second, func() { observedAfter, awaitsAfter = f.callCount("Observe"), started })
			endByDeletion(env, f, 2*time.Hour)
			env.ExecuteWorkflow(contract.WorkflowType, input())

			if awaitsBefore == 0 {
				t.Fatalf("no AwaitChange activity had started by 30s")
			}
			gotSync := observedAfter > observedBefore
			if gotSync != tt.wantSync {
				t.Errorf("a sync between 30s and 45s: got %t (Observe %d → %d), want %t", gotSync, observedBefore, observedAfter, tt.wantSync)
			}
			if tt.wantSync && awaitsAfter <= awaitsBefore {
				t.Errorf("AwaitChange activities started: %d at 30s, %d at 45s; want a new wait after the sync", awaitsBefore, awaitsAfter)
			}
		})
	}
}

// 8c. A workflow the watcher started eagerly gets its first trigger in the input: the first
// sync waits for the versions it names, as it would for a signalled trigger.
func TestTriggerInInput(t *testing.T) {
	f := newFakeCluster(newDeployment("nginx:v1", 3, ""))
	env := newEnv(t, f)
	endByDeletion(env, f, time.Hour)
	in := input()
	want := []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: testName, ResourceVersion: "7"}}
	in.Trigger = &contract.Trigger{Versions: want}
	env.ExecuteWorkflow(contract.WorkflowType, in)

	if len(f.observed) == 0 {
		t.Fatalf("no Observe ran")
	}
	if got := f.observed[0].AtLeast; !reflect.DeepEqual(got, want) {
		t.Errorf("first Observe's AtLeast: got %v, want %v", got, want)
	}
	if len(f.created) == 0 {
		t.Errorf("no ReplicaSet created")
	}
}

// 9. Cancellation ends the workflow whether it is idle or waiting for the next resync of a
// rollout (it used to be ignored when idle and to spin when a resync timer was pending).
func TestCancel(t *testing.T) {
	tests := []struct {
		name    string
		cluster func() *fakeCluster
	}{
		{"idle", steady},
		{"mid-rollout", midRollout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.cluster()
			env := newEnv(t, f)
			env.SetTestTimeout(5 * time.Second)
			var observed int
			at(env, 10*time.Second, func() {
				observed = f.callCount("Observe")
				env.CancelWorkflow()
			})
			env.ExecuteWorkflow(contract.WorkflowType, input())

			if !env.IsWorkflowCompleted() {
				t.Fatalf("workflow did not complete")
			}
			var canceled *temporal.CanceledError
			if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
				t.Fatalf("workflow error: got %v (%T), want a *temporal.CanceledError", err, err)
			}
			if got := f.callCount("Observe"); got != observed {
				t.Fatalf("observes after cancel: got %d, want %d (no sync after cancellation)", got, observed)
			}
		})
	}
}

func TestParseTrigger(t *testing.T) {
	tests := []struct {
		name string
		give string
		want int
	}{
		{name: "none", give: "", want: 0},
		{name: "null", give: "null", want: 0},
		{name: "not an object", give: `"bogus"`, want: 0},
		{name: "versions", give: `{"versions":[{"kind":"Deployment","name":"web","rv":"7"},{"kind":"ReplicaSet","name":"web-1","rv":"9"}]}`, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseTrigger(json.RawMessage(tt.give)); len(got) != tt.want {
				t.Errorf("ParseTrigger(%s) = %v, want %d versions", tt.give, got, tt.want)
			}
		})
	}
}

// A continued run carries the Deployment's UID, so the events it records before its first
// sync (a step timer that fires, a promote) name the object; and the worker's --local-wait.
func TestCarryKeepsUID(t *testing.T) {
	f := midRollout()
	f.localWait = testLocalWait
	env := newEnv(t, f)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	next := continuedAsNew(t, env)
	if next.State.UID != testUID || next.State.LocalWait != testLocalWait {
		t.Fatalf("carry: got uid %q local wait %s, want %q, %s", next.State.UID, next.State.LocalWait, testUID, testLocalWait)
	}
}

// A signal payload the data converter cannot decode as JSON (another codec: here []byte, which
// the default converter sends as binary/plain) is reported and dropped, and the signals after it
// still work. Before, the SDK dropped it inside Receive and blocked for the next rollback
// signal, stalling every sync, pause and timer behind it.
func TestNonJSONSignalPayloadIgnored(t *testing.T) {
	tests := []struct {
		name   string
		signal string
	}{
		{name: "rollback", signal: contract.SignalRollback},
		{name: "trigger", signal: contract.SignalTrigger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := steadyAtV2()
			env := newEnv(t, f)
			signalAt(env, 10*time.Second, tt.signal, []byte{0xff, 0x00, 0x13})
			signalAt(env, 20*time.Second, contract.SignalRollback, map[string]any{"revision": 1})
			var st contract.Status
			at(env, 15*time.Second, func() { st = queryStatus(t, env) })
			env.ExecuteWorkflow(contract.WorkflowType, input())

			if tt.signal == contract.SignalRollback && !strings.Contains(st.IgnoredSignal, `encoding "binary/plain" is not JSON`) {
				t.Errorf("status.ignoredSignal: got %q, want the binary payload explained", st.IgnoredSignal)
			}
			// The rollback after it goes through: the workflow is not stuck.
			continuedAsNew(t, env)
			if got := f.image(); got != "nginx:v1" {
				t.Fatalf("image after the rollback that follows: got %q, want nginx:v1", got)
			}
		})
	}
}

// A hash collision while a sync creates the new ReplicaSet before its rollback step starts the
// sync over: the rollback request must survive it, and the next sync roll back.
func TestRollbackSurvivesHashCollision(t *testing.T) {
	f := steadyAtV2()
	// A template change, and a foreign ReplicaSet that squats the name its ReplicaSet would
	// get: the create collides, collisionCount goes up, and the sync starts over.
	f.setImage("nginx:v3")
	tmpl := podTemplate("nginx:v3")
	hash := k8s.PodTemplateHash(&tmpl, nil)
	squatter := newReplicaSet(f.d, "nginx:other", 9, 0, time.Hour)
	squatter.Name = k8s.ReplicaSetName(testName, hash)
	squatter.OwnerReferences = nil
	squatter.Labels = map[string]string{"app": "other"}
	f.rss = append(f.rss, squatter)

	env := newEnv(t, f)
	in := input()
	in.State = &State{RollbackTo: int64p(1)}
	env.ExecuteWorkflow(contract.WorkflowType, in)

	continuedAsNew(t, env)
	if f.d.Status.CollisionCount == nil || *f.d.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount: got %v, want 1", f.d.Status.CollisionCount)
	}
	if len(f.rollbacks) != 1 {
		t.Fatalf("RollbackDeployment calls: got %d, want 1 (the rollback survives the collision)", len(f.rollbacks))
	}
	if got := f.image(); got != "nginx:v1" {
		t.Fatalf("image: got %q, want nginx:v1 (rolled back)", got)
	}
}

// With --local-wait, a move that comes within the local wait's window is synced in the same
// workflow task: a rollout whose every move comes quickly runs no AwaitChange activity at all.
// One whose local waits see nothing waits in the activity after each of them.
func TestLocalAwait(t *testing.T) {
	for _, quick := range []bool{true, false} {
		t.Run(fmt.Sprintf("every move within the window=%t", quick), func(t *testing.T) {
			f := midRollout()
			f.localWait = testLocalWait
			if quick {
				f.localMoves = 100
			}
			env := newEnv(t, f)
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
			local, remote := f.callCount("LocalAwaitChange"), f.callCount("AwaitChange")
			if local == 0 {
				t.Fatalf("local waits: 0, want one after each sync of the rollout")
			}
			want := local
			if quick {
				want = 0
			}
			if remote != want {
				t.Errorf("AwaitChange activities: %d after %d local waits, want %d", remote, local, want)
			}
		})
	}
}

// Without --local-wait (the default) every wait for a rollout's next move is the AwaitChange
// activity: the workflow task ends after each sync, so signals, updates and queries never wait
// for a wait.
func TestNoLocalWait(t *testing.T) {
	f := midRollout()
	f.localMoves = 100
	env := newEnv(t, f)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 3})
	if local, remote := f.callCount("LocalAwaitChange"), f.callCount("AwaitChange"); local != 0 || remote == 0 {
		t.Fatalf("waits: %d local, %d AwaitChange activities; want 0 local and at least one activity", local, remote)
	}
}

// A plain rollout's wait is asked to make its scale moves itself (Inline), at the generation
// its sync decided on, and the moves it reports count in the status query; a stepped
// rollout's wait is not asked, and the workflow makes every move.
func TestWaitMovesInline(t *testing.T) {
	for _, stepped := range []bool{false, true} {
		t.Run(fmt.Sprintf("stepped=%t", stepped), func(t *testing.T) {
			f := midRollout()
			f.d.Generation = 5
			if stepped {
				f.d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50},{"pause":{}}]`
			}
			f.awaitMoves = []activities.Move{{Kind: k8s.StepScaleDown, ReplicaSet: "web-old", From: 3, To: 2}}
			env := newEnv(t, f)
			var st contract.Status
			var queryErr error
			at(env, 90*time.Second, func() {
				v, err := env.QueryWorkflow(contract.QueryStatus)
				if queryErr = err; err == nil {
					queryErr = v.Get(&st)
				}
			})
			endByDeletion(env, f, time.Hour)
			env.ExecuteWorkflow(contract.WorkflowType, input())

			if queryErr != nil {
				t.Fatalf("status query: %v", queryErr)
			}
			if len(f.awaits) == 0 {
				t.Fatalf("no AwaitChange activity ran")
			}
			// A stepped rollout's moves within its step are the wait's too (change
			// inline-canary-moves), flagged InlineCanary.
			first := f.awaits[0]
			if !first.Inline || first.InlineCanary != stepped || first.Generation != 5 {
				t.Errorf("first wait's inline/inlineCanary/generation = %t/%t/%d, want true/%t/5", first.Inline, first.InlineCanary, first.Generation, stepped)
			}
			want := 1
			if st.WaitMoves != want {
				t.Errorf("status waitMoves = %d, want %d", st.WaitMoves, want)
			}
		})
	}
}
