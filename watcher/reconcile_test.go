package watcher

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// waitFor bounds every wait on the informers.
const waitFor = 5 * time.Second

// webOf is Deployment prod/<name> (selector app=<name>) with replicas pods of image,
// RollingUpdate maxSurge 1, maxUnavailable 0, generation 1, no status yet.
func webOf(name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "prod", Name: name, UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: "10",
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptrTo(intstr.FromInt32(1)), MaxUnavailable: ptrTo(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit:    ptrTo(int32(10)),
			ProgressDeadlineSeconds: ptrTo(int32(600)),
		},
	}
}

// podsOf says how many of a ReplicaSet's pods are ready and available.
type podsOf func(rs *appsv1.ReplicaSet) (ready, available int32)

func allUp(rs *appsv1.ReplicaSet) (int32, int32) { return *rs.Spec.Replicas, *rs.Spec.Replicas }

// settle plays the controller: it applies k8s.Decide's plans to d and rss in memory, with the
// pods that pods says, until a sync has nothing to write.
func settle(t *testing.T, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods podsOf) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	withPods := func(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
		rs = rs.DeepCopy()
		ready, available := pods(rs)
		rs.Status = appsv1.ReplicaSetStatus{
			Replicas: *rs.Spec.Replicas, ReadyReplicas: ready, AvailableReplicas: available,
			FullyLabeledReplicas: *rs.Spec.Replicas, ObservedGeneration: rs.Generation,
		}
		return rs
	}
	for range 20 {
		plan, err := k8s.Decide(k8s.NewSnapshot(d, rss, nil), k8s.Request{}, time.Now())
		if err != nil {
			t.Fatalf("settle: Decide: %v", err)
		}
		if len(plan.Steps) == 0 {
			return d, rss
		}
		for _, st := range plan.Steps {
			switch st.Kind {
			case k8s.StepCreate:
				rs := st.ReplicaSet.DeepCopy()
				rs.UID, rs.ResourceVersion, rs.Generation = types.UID(rs.Name+"-uid"), "5", 1
				rss = append(rss, withPods(rs))
			case k8s.StepScaleUp, k8s.StepScaleDown, k8s.StepUpdateRS:
				for i := range rss {
					if rss[i].Name == st.ReplicaSet.Name {
						rss[i] = withPods(st.ReplicaSet)
					}
				}
			case k8s.StepUpdateStatus:
				d = st.Deployment.DeepCopy()
			case k8s.StepEvent:
			default:
				t.Fatalf("settle: unexpected step %s", st.Kind)
			}
		}
	}
	t.Fatalf("settle: still writing after 20 syncs")
	return nil, nil
}

// atRest is prod/<name> settled at nginx:1 with 2 pods.
func atRest(t *testing.T, name string) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	return settle(t, webOf(name, 2, "nginx:1"), nil, allUp)
}

// rolling is prod/<name> rolling to nginx:2, its new pod not ready yet; its new ReplicaSet is
// returned last.
func rolling(t *testing.T, name string) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	d, rss := atRest(t, name)
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	d.Generation = 2
	d, rss = settle(t, d, rss, func(rs *appsv1.ReplicaSet) (int32, int32) {
		if rs.Spec.Template.Spec.Containers[0].Image == "nginx:2" {
			return 0, 0
		}
		return allUp(rs)
	})
	sort.Slice(rss, func(i, j int) bool {
		return rss[j].Spec.Template.Spec.Containers[0].Image == "nginx:2"
	})
	return d, rss
}

// heldAt is prod/<name> rolling to nginx:2 held at a step (Progressing CanaryPaused), every
// pod up: held at rest (k8s.HeldAtRest).
func heldAt(t *testing.T, name string) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	d, rss := rolling(t, name)
	d = d.DeepCopy()
	d.Status.ObservedGeneration = d.Generation
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionUnknown, Reason: k8s.CanaryPausedReason}}
	for i, rs := range rss {
		rs = rs.DeepCopy()
		rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = *rs.Spec.Replicas, *rs.Spec.Replicas
		rss[i] = rs
	}
	if !k8s.HeldAtRest(d, rss) {
		t.Fatal("heldAt: not held at rest")
	}
	return d, rss
}

func objects(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []runtime.Object {
	out := []runtime.Object{d}
	for _, rs := range rss {
		out = append(out, rs)
	}
	return out
}

// startWatcher builds a watcher on a cache of a fake clientset serving objs, with tc as its
// Temporal client, and starts the cache (not Run).
func startWatcher(t *testing.T, tc client.Client, objs ...runtime.Object) (*Watcher, *fake.Clientset) {
	t.Helper()
	return startWatcherOn(t, tc, fake.NewClientset(objs...))
}

// startWatcherOn is startWatcher on a given clientset.
func startWatcherOn(t *testing.T, tc client.Client, kc *fake.Clientset) (*Watcher, *fake.Clientset) {
	t.Helper()
	bumpResourceVersions(kc)
	c, err := kube.NewCache(kc, "")
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	w, err := New(c, tc, Options{TaskQueue: "tq"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.queue.ShutDown(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return w, kc
}

// bumpResourceVersions makes the fake clientset number every write as the API server does
// (the watcher skips updates that keep the resourceVersion: informer resyncs).
func bumpResourceVersions(kc *fake.Clientset) {
	var rv atomic.Int64
	rv.Store(100)
	bump := func(action k8stesting.Action) (bool, runtime.Object, error) {
		// Create and update actions both carry the object written.
		a, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		if m, ok := a.GetObject().(metav1.Object); ok {
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
		return false, nil, nil
	}
	kc.PrependReactor("create", "*", bump)
	kc.PrependReactor("update", "*", bump)
}

// drain takes every key from the watcher's queue, sorted.
func drain(w *Watcher) []string {
	var keys []string
	for w.queue.Len() > 0 {
		k, _ := w.queue.Get()
		keys = append(keys, k)
		w.queue.Done(k)
		w.queue.Forget(k)
	}
	sort.Strings(keys)
	return keys
}

func executions(ids ...string) []*workflowpb.WorkflowExecutionInfo {
	var out []*workflowpb.WorkflowExecutionInfo
	for _, id := range ids {
		out = append(out, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run"}})
	}
	return out
}

// listQuery matches a ListWorkflow request for the running workflows of task queue tq, at the
// given page token.
func listQuery(token string) any {
	return mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return string(r.NextPageToken) == token &&
			strings.Contains(r.Query, "WorkflowType = '"+contract.WorkflowType+"'") &&
			strings.Contains(r.Query, "ExecutionStatus = 'Running'") &&
			strings.Contains(r.Query, "TaskQueue = 'tq'")
	})
}

func TestReconcile(t *testing.T) {
	rest, restRSs := atRest(t, "rest")
	drifted, driftedRSs := atRest(t, "drifted")
	// Someone scaled the ReplicaSet of a Deployment at rest: a sync would scale it back.
	driftedRSs[0] = driftedRSs[0].DeepCopy()
	driftedRSs[0].Spec.Replicas = ptrTo(int32(1))
	driftedRSs[0].Status.Replicas, driftedRSs[0].Status.AvailableReplicas, driftedRSs[0].Status.ReadyReplicas = 1, 1, 1
	roll, rollRSs := rolling(t, "roll")
	// Its new pod became available: a sync would move on, but the worker's wait sees it.
	newRS := rollRSs[len(rollRSs)-1].DeepCopy()
	newRS.Status.ReadyReplicas, newRS.Status.AvailableReplicas = 1, 1
	rollRSs[len(rollRSs)-1] = newRS
	fresh, freshRSs := atRest(t, "fresh")

	var objs []runtime.Object
	objs = append(objs, objects(rest, restRSs)...)
	objs = append(objs, objects(drifted, driftedRSs)...)
	objs = append(objs, objects(roll, rollRSs)...)
	objs = append(objs, objects(fresh, freshRSs)...)

	tc := &mocks.Client{}
	// Two pages: the watcher must follow the token.
	tc.On("ListWorkflow", mock.Anything, listQuery("")).Return(&workflowservice.ListWorkflowExecutionsResponse{
		Executions:    executions(contract.WorkflowID("prod", "rest"), contract.WorkflowID("prod", "drifted"), "not-a-deployment-workflow"),
		NextPageToken: []byte("page-2"),
	}, nil).Once()
	tc.On("ListWorkflow", mock.Anything, listQuery("page-2")).Return(&workflowservice.ListWorkflowExecutionsResponse{
		Executions: executions(contract.WorkflowID("prod", "roll"), contract.WorkflowID("prod", "gone")),
	}, nil).Once()
	w, _ := startWatcher(t, tc, objs...)

	got, err := w.Reconcile(context.Background())

	if err != nil {
		t.Fatalf("Reconcile error = %v", err)
	}
	tc.AssertExpectations(t)
	want := []string{
		"prod/drifted", // at rest, a sync would write
		"prod/fresh",   // no workflow yet
		"prod/gone",    // a workflow whose Deployment is gone
	}
	if keys := drain(w); !reflect.DeepEqual(keys, want) {
		t.Errorf("queued = %q, want %q (rest: nothing to do; roll: the worker's)", keys, want)
	}
	if got != len(want) {
		t.Errorf("Reconcile() = %d, want %d", got, len(want))
	}
}

// TestReconcileCluster: a named cluster's watcher counts only its own cluster's workflows as
// open; the same namespace/name in the cluster "" is another Deployment's.
func TestReconcileCluster(t *testing.T) {
	rest, restRSs := atRest(t, "rest")
	mine, mineRSs := atRest(t, "mine")
	var objs []runtime.Object
	objs = append(objs, objects(rest, restRSs)...)
	objs = append(objs, objects(mine, mineRSs)...)
	tc := &mocks.Client{}
	tc.On("ListWorkflow", mock.Anything, listQuery("")).Return(&workflowservice.ListWorkflowExecutionsResponse{
		Executions: executions(contract.WorkflowID("prod", "rest"), contract.WorkflowIDIn("eu", "prod", "mine"),
			contract.WorkflowIDIn("eu", "prod", "gone"), contract.WorkflowIDIn("us", "prod", "elsewhere")),
	}, nil).Once()
	kc := fake.NewClientset(objs...)
	bumpResourceVersions(kc)
	c, err := kube.NewCache(kc, "")
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	w, err := New(c, tc, Options{TaskQueue: "tq", Cluster: "eu"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.queue.ShutDown(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}

	got, err := w.Reconcile(context.Background())

	if err != nil {
		t.Fatalf("Reconcile error = %v", err)
	}
	tc.AssertExpectations(t)
	want := []string{
		"prod/gone", // eu's workflow, its Deployment gone
		"prod/rest", // no eu workflow: the open one is the cluster ""'s
	}
	if keys := drain(w); !reflect.DeepEqual(keys, want) {
		t.Errorf("queued = %q, want %q (mine: eu's, at rest; elsewhere: another cluster's)", keys, want)
	}
	if got != len(want) {
		t.Errorf("Reconcile() = %d, want %d", got, len(want))
	}
}

// newImage is d given image by someone else, as `kubectl set image` does: a new generation that
// no sync has observed yet.
func newImage(d *appsv1.Deployment, image string) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Image = image
	d.Generation++
	return d
}

// TestReconcileUnobservedGeneration: a generation that no sync has observed (issue 23, defect
// 5). A watcher that just started cannot tell a change it did not signal from one another
// watcher did, so its first resync signals every one; a later resync signals one only when the
// previous resync found it unobserved too (a trigger lost, or a change made while this watcher
// was not yet watching). A rollout under way whose generation is observed stays the worker's.
// Nothing syncs here, so an unobserved generation stays unobserved.
func TestReconcileUnobservedGeneration(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// give is the cluster when the watcher starts.
		give func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet)
		// giveChange, if set, is written after the first resync, while the watcher runs.
		giveChange func(d *appsv1.Deployment) *appsv1.Deployment
		// managed: the watcher runs in managed mode.
		managed bool
		// want is what each of three resyncs queues.
		want [3][]string
	}{
		{
			// kube-controller-manager's paused sync wrote observedGeneration for the change.
			name:    "parked (managed mode), changed while no watcher ran, its generation observed by the built-in controller: signalled",
			managed: true,
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d, rss := atRest(t, "web")
				d = d.DeepCopy()
				d.Annotations = map[string]string{k8s.ManagedAnnotation: "true"}
				if err := k8s.Park(d); err != nil {
					t.Fatal(err)
				}
				d = newImage(d, "nginx:2")
				// Its status, as the built-in controller's paused sync writes it: no
				// ReplicaSet has the new template yet.
				d.Status.ObservedGeneration, d.Status.UpdatedReplicas = d.Generation, 0
				return d, rss
			},
			want: [3][]string{{"prod/web"}, {"prod/web"}, {"prod/web"}},
		},
		{
			name: "changed while no watcher ran: signalled from the first resync on",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d, rss := atRest(t, "web")
				return newImage(d, "nginx:2"), rss
			},
			want: [3][]string{{"prod/web"}, {"prod/web"}, {"prod/web"}},
		},
		{
			name: "scaled while no watcher ran mid-rollout: signalled",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d, rss := rolling(t, "web")
				d = d.DeepCopy()
				d.Spec.Replicas = ptrTo(int32(4))
				d.Generation++
				return d, rss
			},
			want: [3][]string{{"prod/web"}, {"prod/web"}, {"prod/web"}},
		},
		{
			name: "a rollout under way, its generation observed: the worker's",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d, rss := rolling(t, "web")
				// Its new pod became available: a sync would move on, but the worker's wait
				// sees it.
				newRS := rss[len(rss)-1].DeepCopy()
				newRS.Status.ReadyReplicas, newRS.Status.AvailableReplicas = 1, 1
				rss[len(rss)-1] = newRS
				return d, rss
			},
			want: [3][]string{nil, nil, nil},
		},
		{
			name: "at rest, its generation observed: nothing",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) { return atRest(t, "web") },
			want: [3][]string{nil, nil, nil},
		},
		{
			// Its workflow may rest (activities.AwaitRest) while a pod died with no watcher
			// running: every resync signals it while it stays unsettled.
			name: "held at a step, a pod gone while no watcher ran: signalled from the first resync on",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
				d, rss := heldAt(t, "web")
				old := rss[0].DeepCopy()
				old.Status.ReadyReplicas, old.Status.AvailableReplicas = 1, 1
				rss[0] = old
				return d, rss
			},
			want: [3][]string{{"prod/web"}, {"prod/web"}, {"prod/web"}},
		},
		{
			name: "held at a step, at rest: nothing",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) { return heldAt(t, "web") },
			want: [3][]string{nil, nil, nil},
		},
		{
			// The watcher signals the change itself (its handler); the next resync leaves the
			// sync it woke alone, and the one after signals again only if still unobserved.
			name: "changed while the watcher runs: left to the signal it sent, until a resync found it unobserved",
			give: func(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) { return atRest(t, "web") },
			giveChange: func(d *appsv1.Deployment) *appsv1.Deployment {
				return newImage(d, "nginx:2")
			},
			want: [3][]string{nil, nil, {"prod/web"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss := tt.give(t)
			tc := &mocks.Client{}
			tc.On("ListWorkflow", mock.Anything, listQuery("")).Return(&workflowservice.ListWorkflowExecutionsResponse{
				Executions: executions(contract.WorkflowID("prod", "web")),
			}, nil)
			w, kc := startWatcher(t, tc, objects(d, rss)...)
			w.opts.Managed = tt.managed

			for i, want := range tt.want {
				if i == 1 && tt.giveChange != nil {
					cur, err := kc.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					next, err := kc.AppsV1().Deployments("prod").Update(ctx, tt.giveChange(cur), metav1.UpdateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					deadline := time.Now().Add(waitFor)
					for {
						c, err := w.cache.Deployment("prod", "web")
						if err == nil && c.ResourceVersion == next.ResourceVersion {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("the cache does not hold the change after %s", waitFor)
						}
						time.Sleep(5 * time.Millisecond)
					}
					// The handler's own signal for the change.
					if keys := drain(w); !reflect.DeepEqual(keys, []string{"prod/web"}) {
						t.Fatalf("queued by the handler = %q, want %q", keys, []string{"prod/web"})
					}
				}

				got, err := w.Reconcile(ctx)

				if err != nil {
					t.Fatalf("resync %d: Reconcile error = %v", i+1, err)
				}
				if keys := drain(w); !reflect.DeepEqual(keys, want) || got != len(want) {
					t.Errorf("resync %d: Reconcile() = %d, queued %q, want %d, %q", i+1, got, keys, len(want), want)
				}
			}
		})
	}
}

func TestReconcileListFails(t *testing.T) {
	d, rss := atRest(t, "web")
	tc := &mocks.Client{}
	tc.On("ListWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewUnavailable("frontend down")).Once()
	w, _ := startWatcher(t, tc, objects(d, rss)...)

	got, err := w.Reconcile(context.Background())

	if err == nil || !strings.Contains(err.Error(), "list open workflows") {
		t.Errorf("Reconcile error = %v, want one saying list open workflows", err)
	}
	if keys := drain(w); got != 0 || len(keys) != 0 {
		t.Errorf("Reconcile() = %d, queued %q, want 0 and nothing: a failed list signals no one", got, keys)
	}
}

func TestSignal(t *testing.T) {
	ctx := context.Background()
	d, rss := atRest(t, "web")
	d.ResourceVersion = "42"
	rss[0].ResourceVersion = "41"
	id := contract.WorkflowID("prod", "web")
	in := contract.Input{Namespace: "prod", Name: "web"}
	// fresh is web as just created: no controller has synced it.
	fresh := d.DeepCopy()
	fresh.Status = appsv1.DeploymentStatus{}
	freshTrigger := contract.Trigger{Versions: []k8s.ObjectVersion{
		{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "42"},
		{Kind: k8s.KindReplicaSet, Name: rss[0].Name, ResourceVersion: "41"},
	}}
	// The start options name what the Deployment rolls out (StartSummary): the same for d and fresh.
	signalled := d
	eagerOpts := StartOptionsFor("tq", false, in, fresh)
	eagerOpts.EnableEagerStart, eagerOpts.WorkflowExecutionErrorWhenAlreadyStarted = true, true
	eagerIn := in
	eagerIn.Trigger = &freshTrigger
	tests := []struct {
		name      string
		give      string // the queue key
		giveObjs  []runtime.Object
		giveEager bool
		giveMock  func(*mocks.Client)
		wantErr   bool
	}{
		{
			name:      "eager: a Deployment no controller synced gets an eager start carrying the trigger",
			give:      "prod/web",
			giveObjs:  objects(fresh, rss),
			giveEager: true,
			giveMock: func(tc *mocks.Client) {
				tc.On("ExecuteWorkflow", mock.Anything, eagerOpts, contract.WorkflowType, eagerIn).Return(nil, nil).Once()
			},
		},
		{
			name:      "eager: its workflow runs already, so it is signalled",
			give:      "prod/web",
			giveObjs:  objects(fresh, rss),
			giveEager: true,
			giveMock: func(tc *mocks.Client) {
				tc.On("ExecuteWorkflow", mock.Anything, eagerOpts, contract.WorkflowType, eagerIn).
					Return(nil, serviceerror.NewWorkflowExecutionAlreadyStarted("running", "req", "run")).Once()
				tc.On("SignalWithStartWorkflow", mock.Anything, id, contract.SignalTrigger, freshTrigger,
					StartOptionsFor("tq", false, in, signalled), contract.WorkflowType, in).Return(nil, nil).Once()
			},
		},
		{
			name:      "eager: the start fails: retried, not signalled",
			give:      "prod/web",
			giveObjs:  objects(fresh, rss),
			giveEager: true,
			giveMock: func(tc *mocks.Client) {
				tc.On("ExecuteWorkflow", mock.Anything, eagerOpts, contract.WorkflowType, eagerIn).
					Return(nil, serviceerror.NewUnavailable("down")).Once()
			},
			wantErr: true,
		},
		{
			name:      "eager: a Deployment synced before gets signal-with-start",
			give:      "prod/web",
			giveObjs:  objects(d, rss),
			giveEager: true,
			giveMock: func(tc *mocks.Client) {
				tc.On("SignalWithStartWorkflow", mock.Anything, id, contract.SignalTrigger, freshTrigger,
					StartOptionsFor("tq", false, in, signalled), contract.WorkflowType, in).Return(nil, nil).Once()
			},
		},
		{
			name:     "signal-with-start with the versions the watcher saw",
			give:     "prod/web",
			giveObjs: objects(d, rss),
			giveMock: func(tc *mocks.Client) {
				trigger := contract.Trigger{Versions: []k8s.ObjectVersion{
					{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "42"},
					{Kind: k8s.KindReplicaSet, Name: rss[0].Name, ResourceVersion: "41"},
				}}
				tc.On("SignalWithStartWorkflow", mock.Anything, id, contract.SignalTrigger, trigger,
					StartOptionsFor("tq", false, in, signalled), contract.WorkflowType, in).Return(nil, nil).Once()
			},
		},
		{
			name:     "signal-with-start fails: retried",
			give:     "prod/web",
			giveObjs: objects(d, rss),
			giveMock: func(tc *mocks.Client) {
				tc.On("SignalWithStartWorkflow", mock.Anything, id, contract.SignalTrigger, mock.Anything,
					mock.Anything, contract.WorkflowType, in).Return(nil, serviceerror.NewUnavailable("down")).Once()
			},
			wantErr: true,
		},
		{
			name: "a Deployment gone gets a plain signal, so its workflow confirms and ends",
			give: "prod/web",
			giveMock: func(tc *mocks.Client) {
				tc.On("SignalWorkflow", mock.Anything, id, "", contract.SignalTrigger, nil).Return(nil).Once()
			},
		},
		{
			name: "a Deployment gone without a workflow is done",
			give: "prod/web",
			giveMock: func(tc *mocks.Client) {
				tc.On("SignalWorkflow", mock.Anything, id, "", contract.SignalTrigger, nil).
					Return(serviceerror.NewNotFound("workflow not found")).Once()
			},
		},
		{
			name: "a Deployment gone, signal fails: retried",
			give: "prod/web",
			giveMock: func(tc *mocks.Client) {
				tc.On("SignalWorkflow", mock.Anything, id, "", contract.SignalTrigger, nil).
					Return(errors.New("connection reset")).Once()
			},
			wantErr: true,
		},
		{
			name:     "a malformed key is dropped",
			give:     "a/b/c",
			giveMock: func(*mocks.Client) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &mocks.Client{}
			tt.giveMock(tc)
			w, _ := startWatcher(t, tc, tt.giveObjs...)
			w.opts.EagerStart = tt.giveEager

			err := w.signal(ctx, tt.give)

			if (err != nil) != tt.wantErr {
				t.Errorf("signal(%q) error = %v, want error %t", tt.give, err, tt.wantErr)
			}
			tc.AssertExpectations(t)
		})
	}
}

// TestHandlers drives the informers with changes and checks what the watcher queues. For a
// change that queues nothing, a witness change on the same informer, made after it and
// queueing prod/witness, shows the handler got past it (a handler sees one informer's events
// in order).
func TestHandlers(t *testing.T) {
	ctx := context.Background()
	update := func(kc *fake.Clientset, name string, f func(*appsv1.Deployment)) error {
		d, err := kc.AppsV1().Deployments("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(d)
		_, err = kc.AppsV1().Deployments("prod").Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
	updateRS := func(kc *fake.Clientset, name string, f func(*appsv1.ReplicaSet)) error {
		rs, err := kc.AppsV1().ReplicaSets("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(rs)
		_, err = kc.AppsV1().ReplicaSets("prod").UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		return err
	}
	web, webRSs := atRest(t, "web")
	roll, rollRSs := rolling(t, "web")
	witness, witnessRSs := atRest(t, "witness")
	// held is roll held at a step (Progressing CanaryPaused) with every pod up: at rest, its
	// workflow waiting with no activity (activities.AwaitRest).
	held, heldRSs := roll.DeepCopy(), []*appsv1.ReplicaSet{}
	held.Status.ObservedGeneration = held.Generation
	held.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionUnknown, Reason: k8s.CanaryPausedReason}}
	for _, rs := range rollRSs {
		rs = rs.DeepCopy()
		rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = *rs.Spec.Replicas, *rs.Spec.Replicas
		heldRSs = append(heldRSs, rs)
	}
	heldMoving := held.DeepCopy() // held, its canary pod not available yet
	// An orphan the witness would adopt: its creation queues prod/witness.
	witnessOrphan := witnessRSs[0].DeepCopy()
	witnessOrphan.Name, witnessOrphan.UID, witnessOrphan.OwnerReferences = "witness-orphan", "witness-orphan-uid", nil
	witnessBy := map[string]func(kc *fake.Clientset) error{
		"deployment": func(kc *fake.Clientset) error {
			return update(kc, "witness", func(d *appsv1.Deployment) { d.Generation++ })
		},
		"replicaset": func(kc *fake.Clientset) error {
			_, err := kc.AppsV1().ReplicaSets("prod").Create(ctx, witnessOrphan, metav1.CreateOptions{})
			return err
		},
	}

	tests := []struct {
		name        string
		giveObjs    []runtime.Object // besides the witness
		give        func(kc *fake.Clientset) error
		giveWitness string // the informer give's change goes through
		want        bool   // prod/web queued
	}{
		{
			name:     "a Deployment created",
			giveObjs: nil,
			give: func(kc *fake.Clientset) error {
				_, err := kc.AppsV1().Deployments("prod").Create(ctx, web, metav1.CreateOptions{})
				return err
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name:     "a new generation",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return update(kc, "web", func(d *appsv1.Deployment) { d.Generation++ })
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name:     "a Deployment deleted",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return kc.AppsV1().Deployments("prod").Delete(ctx, "web", metav1.DeleteOptions{})
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name:     "a status write that changes nothing a sync would",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return update(kc, "web", func(*appsv1.Deployment) {})
			},
			giveWitness: "deployment",
		},
		{
			name:     "an annotation a sync copies to the ReplicaSet",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return update(kc, "web", func(d *appsv1.Deployment) { d.Annotations["example.com/owner"] = "team-a" })
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			// Two status writers may race (a sync decided on older ReplicaSet counts lands
			// after a fresher refresh): the write is weighed again.
			name:     "a status written at rest with counts the ReplicaSets no longer show",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				d, err := kc.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return err
				}
				d.Status.TerminatingReplicas = ptrTo(int32(2))
				_, err = kc.AppsV1().Deployments("prod").UpdateStatus(ctx, d, metav1.UpdateOptions{})
				return err
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name:     "a label a sync does nothing with",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return update(kc, "web", func(d *appsv1.Deployment) { d.Labels = map[string]string{"tier": "front"} })
			},
			giveWitness: "deployment",
		},
		{
			name:     "a pod of a Deployment at rest dies",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				return updateRS(kc, webRSs[0].Name, func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 1, 1 })
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name:     "a ReplicaSet of a rollout under way changes: the worker's wait sees it",
			giveObjs: objects(roll, rollRSs),
			give: func(kc *fake.Clientset) error {
				return updateRS(kc, rollRSs[len(rollRSs)-1].Name, func(rs *appsv1.ReplicaSet) {
					rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 1, 1
				})
			},
			giveWitness: "replicaset",
		},
		{
			name:     "a canary pod of a rollout held at rest dies",
			giveObjs: objects(held, heldRSs),
			give: func(kc *fake.Clientset) error {
				return updateRS(kc, heldRSs[len(heldRSs)-1].Name, func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0 })
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name:     "a stable pod of a rollout held at rest dies",
			giveObjs: objects(held, heldRSs),
			give: func(kc *fake.Clientset) error {
				return updateRS(kc, heldRSs[0].Name, func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 1, 1 })
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name:     "the steps annotation of a rollout held at rest edited",
			giveObjs: objects(held, heldRSs),
			give: func(kc *fake.Clientset) error {
				return update(kc, "web", func(d *appsv1.Deployment) { d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50},{"pause":{}}]` })
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name:     "a held rollout's canary pod becomes available: the worker's wait sees it",
			giveObjs: objects(heldMoving, rollRSs),
			give: func(kc *fake.Clientset) error {
				return updateRS(kc, rollRSs[len(rollRSs)-1].Name, func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 1, 1 })
			},
			giveWitness: "replicaset",
		},
		{
			name:     "an orphan a Deployment at rest would adopt",
			giveObjs: objects(web, webRSs),
			give: func(kc *fake.Clientset) error {
				orphan := webRSs[0].DeepCopy()
				orphan.Name, orphan.UID, orphan.OwnerReferences, orphan.ResourceVersion = "web-orphan", "web-orphan-uid", nil, ""
				_, err := kc.AppsV1().ReplicaSets("prod").Create(ctx, orphan, metav1.CreateOptions{})
				return err
			},
			giveWitness: "replicaset",
			want:        true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append(objects(witness, witnessRSs), tt.giveObjs...)
			w, kc := startWatcher(t, &mocks.Client{}, objs...)

			if err := tt.give(kc); err != nil {
				t.Fatal(err)
			}
			if err := witnessBy[tt.giveWitness](kc); err != nil {
				t.Fatal(err)
			}
			keys := queuedUntilWitness(t, w)
			if got := contains(keys, "prod/web"); got != tt.want {
				t.Errorf("prod/web queued = %t (queued %q), want %t", got, keys, tt.want)
			}
		})
	}
}

// queuedUntilWitness drains the watcher's queue until prod/witness, whose change the test made
// last, is in it (the informer delivered everything before it), and returns what was queued.
func queuedUntilWitness(t *testing.T, w *Watcher) []string {
	t.Helper()
	var keys []string
	deadline := time.Now().Add(waitFor)
	for !contains(keys, "prod/witness") {
		if time.Now().After(deadline) {
			t.Fatalf("witness not queued after %s (queued %q)", waitFor, keys)
		}
		time.Sleep(5 * time.Millisecond)
		keys = append(keys, drain(w)...)
	}
	return keys
}

func contains(keys []string, key string) bool {
	for _, k := range keys {
		if k == key {
			return true
		}
	}
	return false
}

// TestOwnSpecWrites: a new generation is the watcher's to signal unless our worker alone wrote
// it (SetImage, SetPaused, RollbackDeployment): the workflow that wrote it knows. The watcher
// tells by the Deployment's managedFields, which the cache keeps.
func TestOwnSpecWrites(t *testing.T) {
	ctx := context.Background()
	t0 := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	entry := func(manager string, at metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at}
	}
	tests := []struct {
		name string
		give []metav1.ManagedFieldsEntry // after the write; before it, kubectl and we at t0
		want bool                        // prod/web queued
	}{
		{name: "our worker's write", give: []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(kube.FieldManager, t1)}, want: false},
		{name: "kubectl's write", give: []metav1.ManagedFieldsEntry{entry("kubectl", t1), entry(kube.FieldManager, t0)}, want: true},
		{name: "both wrote", give: []metav1.ManagedFieldsEntry{entry("kubectl", t1), entry(kube.FieldManager, t1)}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web, webRSs := atRest(t, "web")
			web.ManagedFields = []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(kube.FieldManager, t0)}
			witness, witnessRSs := atRest(t, "witness")
			// The object tracker of NewClientset rewrites managedFields; this one keeps them as
			// written, as the API server reports them.
			kc := fake.NewSimpleClientset(append(objects(web, webRSs), objects(witness, witnessRSs)...)...)
			w, _ := startWatcherOn(t, &mocks.Client{}, kc)

			d, err := kc.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Generation++
			d.Spec.Paused = true
			d.ManagedFields = tt.give
			if _, err := kc.AppsV1().Deployments("prod").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			x, err := kc.AppsV1().Deployments("prod").Get(ctx, "witness", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			x.Generation++
			if _, err := kc.AppsV1().Deployments("prod").Update(ctx, x, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			keys := queuedUntilWitness(t, w)
			if got := contains(keys, "prod/web"); got != tt.want {
				t.Errorf("prod/web queued = %t (queued %q), want %t", got, keys, tt.want)
			}
		})
	}
}

// statusRecorder is a StatusWriter that records what it is asked to write.
type statusRecorder struct {
	mu     sync.Mutex
	wrote  []*appsv1.Deployment
	strict []bool
}

func (s *statusRecorder) UpdateDeploymentStatus(_ context.Context, in activities.DeploymentWriteInput) (activities.DeploymentWriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote = append(s.wrote, in.Deployment.DeepCopy())
	s.strict = append(s.strict, in.Strict)
	// As the API server would number the write (above any the tests give).
	return activities.DeploymentWriteResult{Wrote: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: in.Deployment.Name, ResourceVersion: "1000"}}}, nil
}

// TestRefreshStatusLeavingRest: a status refresh of a Deployment at rest is written at once;
// when the refreshed status takes it out of rest (a complete Deployment lost available pods),
// the workflow is signalled too, so that its sync hands the next moves to the worker's wait.
// A refresh that keeps it at rest (paused) signals nothing. A refresh decided on ReplicaSets
// the informer handled before the Deployment's last write is not written: the workflow is
// signalled instead, with the Deployment's version.
func TestRefreshStatusLeavingRest(t *testing.T) {
	tests := []struct {
		name       string
		paused     bool
		rsOlder    bool // the ReplicaSet's resourceVersion is below the Deployment's
		wantWrite  bool
		wantSignal bool
	}{
		{name: "complete Deployment loses a pod", wantWrite: true, wantSignal: true},
		{name: "paused Deployment loses a pod", paused: true, wantWrite: true, wantSignal: false},
		{name: "ReplicaSets older than the Deployment's last write", rsOlder: true, wantSignal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss := atRest(t, "web")
			d = d.DeepCopy()
			d.Spec.Paused = tt.paused
			if tt.paused {
				d, rss = settle(t, d, rss, allUp)
			}
			rs := rss[0].DeepCopy()
			rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 1, 1
			d.ResourceVersion, rs.ResourceVersion = "10", "11"
			if tt.rsOlder {
				rs.ResourceVersion = "9"
			}
			w, _ := startWatcher(t, nil, d, rs)
			rec := &statusRecorder{}
			w.opts.Status = rec
			cached, err := w.cache.Deployment("prod", "web")
			if err != nil {
				t.Fatal(err)
			}
			if !w.enqueueIfDecided(cached, "test") {
				t.Fatalf("a status change was not queued")
			}
			if got := drain(w); !reflect.DeepEqual(got, []string{statusKey + "prod/web"}) {
				t.Fatalf("queued %v, want the status refresh only", got)
			}
			w.refreshStatus(context.Background(), "prod/web")
			if !tt.wantWrite {
				if len(rec.wrote) != 0 {
					t.Errorf("status writes: %d, want none", len(rec.wrote))
				}
			} else if len(rec.wrote) != 1 {
				t.Fatalf("status writes: %d, want 1", len(rec.wrote))
			} else if got := rec.wrote[0].Status.AvailableReplicas; got != 1 {
				t.Errorf("written availableReplicas %d, want 1", got)
			} else if got := w.trigger(cached).Versions[0]; got.ResourceVersion != "1000" {
				// The cache does not show the write yet: the trigger names it all the same.
				t.Errorf("trigger after the refresh names the Deployment at %+v, want the refresh's resourceVersion 1000", got)
			}
			var want []string
			if tt.wantSignal {
				want = []string{"prod/web"}
			}
			if got := drain(w); !reflect.DeepEqual(got, want) {
				t.Errorf("queued after the refresh %v, want %v", got, want)
			}
		})
	}
}

// TestTemplateChangeRefresh: another client's new pod template queues the signal and, with a
// StatusWriter in full mode, a strict refresh to updatedReplicas 0 that keeps observedGeneration
// and the conditions. A change that keeps the template (a scale), managed mode, or no
// StatusWriter queues the signal only.
func TestTemplateChangeRefresh(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		giveChange  func(d *appsv1.Deployment)
		giveManaged bool
		giveNoWrite bool
		wantRefresh bool
	}{
		{name: "new image", giveChange: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" }, wantRefresh: true},
		{name: "scaled", giveChange: func(d *appsv1.Deployment) { three := int32(3); d.Spec.Replicas = &three }},
		{name: "new image, managed mode", giveManaged: true, giveChange: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" }},
		{name: "new image, no status writer", giveNoWrite: true, giveChange: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web, webRSs := atRest(t, "web")
			if tt.giveManaged {
				// Opted in already: the change is a new template, not an opt-in.
				web = web.DeepCopy()
				web.Annotations = map[string]string{k8s.ManagedAnnotation: "true"}
			}
			kc := fake.NewSimpleClientset(objects(web, webRSs)...)
			w, _ := startWatcherOn(t, &mocks.Client{}, kc)
			rec := &statusRecorder{}
			if !tt.giveNoWrite {
				w.opts.Status = rec
			}
			w.opts.Managed = tt.giveManaged
			t.Cleanup(w.templates.ShutDown)

			d, err := kc.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tt.giveChange(d)
			d.Generation++
			if _, err := kc.AppsV1().Deployments("prod").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			var keys []string
			deadline := time.Now().Add(waitFor)
			for !contains(keys, "prod/web") {
				if time.Now().After(deadline) {
					t.Fatalf("prod/web not queued after %s (queued %q)", waitFor, keys)
				}
				time.Sleep(5 * time.Millisecond)
				keys = append(keys, drain(w)...)
			}
			if got := w.templates.Len(); got != map[bool]int{true: 1}[tt.wantRefresh] {
				t.Fatalf("template refreshes queued: %d, want %t", got, tt.wantRefresh)
			}
			if !tt.wantRefresh {
				return
			}
			key, _ := w.templates.Get()
			w.refreshTemplate(ctx, key)
			w.templates.Done(key)
			if len(rec.wrote) != 1 {
				t.Fatalf("status writes: %d, want 1", len(rec.wrote))
			}
			got := rec.wrote[0]
			want := web.Status.DeepCopy()
			want.UpdatedReplicas = 0
			if !equality.Semantic.DeepEqual(got.Status, *want) || !rec.strict[0] {
				t.Errorf("wrote status %+v (strict %t), want %+v (strict)", got.Status, rec.strict[0], *want)
			}
			changed, err := w.cache.Deployment("prod", "web")
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != changed.ResourceVersion || got.Generation != web.Generation+1 {
				t.Errorf("written on resourceVersion %s generation %d, want the change's: %s, %d", got.ResourceVersion, got.Generation, changed.ResourceVersion, web.Generation+1)
			}
		})
	}
}

// TestStartsApart: with EagerStart, a Deployment created while the watcher runs goes to the
// starts queue (its own workers), a change to one goes to the signals' queue, and a start
// that fails is retried there.
func TestStartsApart(t *testing.T) {
	tc := &mocks.Client{}
	kc := fake.NewClientset()
	bumpResourceVersions(kc)
	c, err := kube.NewCache(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(c, tc, Options{TaskQueue: "tq", EagerStart: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.queue.ShutDown(); w.starts.ShutDown(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := webOf("web", 2, "nginx:1")
	if _, err := kc.AppsV1().Deployments(fresh.Namespace).Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return w.starts.Len() == 1 })
	if n := w.queue.Len(); n != 0 {
		t.Fatalf("the new Deployment was queued for a signal too (%d)", n)
	}
	in := contract.Input{Namespace: fresh.Namespace, Name: "web"}
	tc.On("ExecuteWorkflow", mock.Anything, mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
		return o.EnableEagerStart && o.ID == in.WorkflowID()
	}), contract.WorkflowType, mock.Anything).Return(nil, serviceerror.NewUnavailable("down")).Once()
	if !w.processStart(ctx) {
		t.Fatal("processStart quit")
	}
	tc.AssertExpectations(t)
	// The failed start is retried on the signals' queue, after its backoff.
	eventually(t, func() bool { return w.queue.Len() == 1 })
	if got := drain(w); !reflect.DeepEqual(got, []string{fresh.Namespace + "/web"}) {
		t.Fatalf("queue = %v", got)
	}
	// A change to it (a new image) is a signal, not a start.
	d, err := kc.AppsV1().Deployments(fresh.Namespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	d.Generation = 2
	if _, err := kc.AppsV1().Deployments(fresh.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return w.queue.Len() == 1 })
	if n := w.starts.Len(); n != 0 {
		t.Fatalf("a change went to the starts queue (%d)", n)
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitFor); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A ReplicaSet of a rollout held at rest scaled by our worker (the workflow leaving its hold,
// which scales before it writes the status that says so) is not signalled: the workflow that
// wrote it knows. Scaled by someone else, it is.
func TestHeldAtRestOwnScale(t *testing.T) {
	ctx := context.Background()
	t0 := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	entry := func(manager string, at metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at}
	}
	for _, tt := range []struct {
		name string
		give []metav1.ManagedFieldsEntry
		want bool
	}{
		{name: "our worker scales it", give: []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(kube.FieldManager, t1)}, want: false},
		{name: "kubectl scales it", give: []metav1.ManagedFieldsEntry{entry("kubectl", t1), entry(kube.FieldManager, t0)}, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			held, heldRSs := heldAt(t, "web")
			for _, rs := range heldRSs {
				rs.ManagedFields = []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(kube.FieldManager, t0)}
			}
			witness, witnessRSs := atRest(t, "witness")
			kc := fake.NewSimpleClientset(append(objects(held, heldRSs), objects(witness, witnessRSs)...)...)
			w, _ := startWatcherOn(t, &mocks.Client{}, kc)

			rs, err := kc.AppsV1().ReplicaSets("prod").Get(ctx, heldRSs[len(heldRSs)-1].Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rs.Spec.Replicas = ptrTo(*rs.Spec.Replicas + 1)
			rs.Generation++
			rs.ManagedFields = tt.give
			if _, err := kc.AppsV1().ReplicaSets("prod").Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			x, err := kc.AppsV1().Deployments("prod").Get(ctx, "witness", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			x.Generation++
			if _, err := kc.AppsV1().Deployments("prod").Update(ctx, x, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			keys := queuedUntilWitness(t, w)
			if got := contains(keys, "prod/web"); got != tt.want {
				t.Errorf("prod/web queued = %t (queued %q), want %t", got, keys, tt.want)
			}
		})
	}
}

// TestHeldAtFullWeightIsTheWorkflows: a stepped rollout held at a pause after setWeight 100
// (every pod on the new template, the old ReplicaSet at 0) looks complete to the watcher,
// which decides without the steps. Its status is the workflow's to write: the watcher signals
// a sync and writes nothing. It once refreshed the status as a completion, recording the
// canary as the stable template; an abort or a rollback then took the stable template for a
// new rollout and held it at the steps' pause (the traffic soak's rollback and abort at
// setWeight 100).
func TestHeldAtFullWeightIsTheWorkflows(t *testing.T) {
	d, rss := atRest(t, "web")
	oldHash := rss[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	d.Generation = 2
	d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":100},{"pause":{}}]`
	d.Annotations[k8s.StableAnnotation] = oldHash
	// Every pod on nginx:2, the old ReplicaSet at 0: what setWeight 100 leaves.
	d, rss = settle(t, d, rss, allUp)
	d = d.DeepCopy()
	d.Annotations[k8s.StableAnnotation] = oldHash
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionUnknown, Reason: k8s.CanaryPausedReason, Message: "Step 2 of 2 (pause): paused until promoted"}}
	d.Status.AvailableReplicas--
	w, _ := startWatcher(t, nil, objects(d, rss)...)
	rec := &statusRecorder{}
	w.opts.Status = rec
	cached, err := w.cache.Deployment("prod", "web")
	if err != nil {
		t.Fatal(err)
	}
	plan, need := w.need(cached)
	if need != k8s.NeedSync {
		t.Fatalf("need = %d for a plan of %d steps (phase %s), want a sync (%d)", need, len(plan.Steps), plan.Phase, k8s.NeedSync)
	}
	if !w.enqueueIfDecided(cached, "test") {
		t.Fatal("not queued")
	}
	if got := drain(w); !reflect.DeepEqual(got, []string{"prod/web"}) {
		t.Errorf("queued %v, want the signal only", got)
	}
	if len(rec.wrote) != 0 {
		t.Errorf("status writes: %d (stable %q), want none", len(rec.wrote), rec.wrote[0].Annotations[k8s.StableAnnotation])
	}
}
