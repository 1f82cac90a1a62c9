package activities

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/temporal-rollout/rollout/k8s"
)

// rolloutDeployment is Deployment default/web with replicas pods of image, RollingUpdate
// maxSurge 1, maxUnavailable 0, at generation 1 with no status yet.
func rolloutDeployment(replicas int32, image string) *appsv1.Deployment {
	d := testDeployment()
	d.Generation = 1
	d.Annotations = map[string]string{}
	d.Status = appsv1.DeploymentStatus{}
	d.Spec.Replicas = ptr(replicas)
	d.Spec.Template = podTemplate(image, "")
	d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	d.Spec.RevisionHistoryLimit = ptr(int32(10))
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0)),
		},
	}
	return d
}

// readyPods says how many of a ReplicaSet's pods are ready and available.
type readyPods func(rs *appsv1.ReplicaSet) (ready, available int32)

// allReady: every pod of every ReplicaSet is ready and available.
func allReady(rs *appsv1.ReplicaSet) (int32, int32) { return *rs.Spec.Replicas, *rs.Spec.Replicas }

// settle plays the controller: it applies k8s.Decide's plans to d and rss in memory, with the
// pods that pods says, until a sync has nothing to write. The result is a state AwaitChange
// finds at rest.
func settle(t *testing.T, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods readyPods) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	return settleFor(t, d, rss, pods, k8s.Request{})
}

// settleFor is settle for the syncs of a request (a canary's step, say).
func settleFor(t *testing.T, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods readyPods, req k8s.Request) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
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
		plan, err := k8s.Decide(k8s.NewSnapshot(d, rss, nil), req, time.Now())
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

// bumpResourceVersions makes the fake clientset number every write as the API server does, so
// the cache's CaughtUp and the writes' resourceVersion checks behave as on a cluster.
func bumpResourceVersions(client *fake.Clientset) {
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
	client.PrependReactor("create", "*", bump)
	client.PrependReactor("update", "*", bump)
}

// awaitFixture serves d and rss from a fake clientset with a started cache, as the worker
// runs AwaitChange.
func awaitFixture(t *testing.T, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *fixture {
	t.Helper()
	objs := []runtime.Object{d}
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	f := newFixture(t, objs...)
	bumpResourceVersions(f.client)
	f.a.Cache = startCache(t, f, testNS)
	return f
}

// runAwait runs AwaitChange in the SDK's activity test environment.
func runAwait(t *testing.T, a *Activities, in AwaitInput) (AwaitResult, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	val, err := env.ExecuteActivity(a.AwaitChange, in)
	if err != nil {
		return AwaitResult{}, err
	}
	var res AwaitResult
	if err := val.Get(&res); err != nil {
		t.Fatalf("decode result: %v", err)
	}
	return res, nil
}

// atRest is default/web settled at nginx:1 with 3 pods.
func atRest(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	return settle(t, rolloutDeployment(3, "nginx:1"), nil, allReady)
}

// rolledTo2 is default/web at rest at nginx:1, then given nginx:2 and settled with the pods
// that pods says.
func rolledTo2(t *testing.T, pods readyPods) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	t.Helper()
	d, rss := atRest(t)
	d = d.DeepCopy()
	d.Spec.Template = podTemplate("nginx:2", "")
	d.Generation = 2
	return settle(t, d, rss, pods)
}

// midRollout is default/web rolling from nginx:1 to nginx:2 with 3 pods, maxSurge 1 and
// maxUnavailable 0: the new ReplicaSet has its surge pod, not ready yet, so nothing can move
// until it is available.
func midRollout(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
	t.Helper()
	d, rss := rolledTo2(t, func(rs *appsv1.ReplicaSet) (int32, int32) {
		if rs.Spec.Template.Spec.Containers[0].Image == "nginx:2" {
			return 0, 0
		}
		return allReady(rs)
	})
	for _, rs := range rss {
		if rs.Spec.Template.Spec.Containers[0].Image == "nginx:2" {
			return d, rss, rs
		}
	}
	t.Fatalf("midRollout: no new ReplicaSet in %d", len(rss))
	return nil, nil, nil
}

// finishing is default/web rolled from nginx:1 to nginx:2 with 3 pods, every new pod
// available and the old ReplicaSet scaled to 0, but one old pod still terminating (its
// ReplicaSet's status.replicas is 1): the status says 4 replicas, and the rollout completes
// when that pod is gone. It returns the old ReplicaSet too.
func finishing(t *testing.T) (*appsv1.Deployment, []*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
	t.Helper()
	d, rss := rolledTo2(t, allReady)
	var old *appsv1.ReplicaSet
	for i, rs := range rss {
		if rs.Spec.Template.Spec.Containers[0].Image == "nginx:1" {
			rs = rs.DeepCopy()
			rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 1, 1, 1
			rss[i], old = rs, rs
		}
	}
	if old == nil {
		t.Fatalf("finishing: no old ReplicaSet in %d", len(rss))
	}
	plan, err := k8s.Decide(k8s.NewSnapshot(d, rss, nil), k8s.Request{}, time.Now())
	if err != nil || len(plan.Steps) != 1 || plan.Steps[0].Kind != k8s.StepUpdateStatus || plan.Phase != k8s.PhaseProgressing {
		t.Fatalf("finishing: plan %+v (%v), want one status write, progressing", plan, err)
	}
	return plan.Steps[0].Deployment, rss, old
}

// setReplicaSetStatus changes a ReplicaSet's status as the ReplicaSet controller would.
func (f *fixture) setReplicaSetStatus(ctx context.Context, name string, change func(*appsv1.ReplicaSetStatus)) error {
	rs, err := f.client.AppsV1().ReplicaSets(testNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(&rs.Status)
	_, err = f.client.AppsV1().ReplicaSets(testNS).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	return err
}

// ourWrite writes the Deployment's status unchanged, as a sync's last write, waits for the
// cache to hold it, and returns the versions the sync would wait for: the Deployment at that
// write and its ReplicaSets.
func (f *fixture) ourWrite(t *testing.T) []k8s.ObjectVersion {
	t.Helper()
	ctx := context.Background()
	d, err := f.client.AppsV1().Deployments(testNS).UpdateStatus(ctx, f.deployment(t), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write status: %v", err)
	}
	wrote := []k8s.ObjectVersion{k8s.DeploymentVersion(d)}
	list, err := f.client.AppsV1().ReplicaSets(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	for i := range list.Items {
		wrote = append(wrote, k8s.ReplicaSetVersion(&list.Items[i]))
	}
	deadline := time.Now().Add(5 * time.Second)
	for !f.a.Cache.CaughtUp(testNS, wrote) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache does not hold %+v after 5s", wrote)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return wrote
}

// after runs change once delay has passed, from another goroutine, as another writer would.
func after(t *testing.T, delay time.Duration, change func() error) {
	t.Helper()
	errs := make(chan error, 1)
	go func() {
		time.Sleep(delay)
		errs <- change()
	}()
	t.Cleanup(func() {
		if err := <-errs; err != nil {
			t.Errorf("change: %v", err)
		}
	})
}

func TestAwaitChange(t *testing.T) {
	ctx := context.Background()
	const delay = 200 * time.Millisecond
	tests := []struct {
		name string
		// give sets up the cluster and the input and schedules changes.
		give func(t *testing.T) (*fixture, AwaitInput)

		want       string         // Reason
		wantSteps  []k8s.StepKind // contained in Steps
		wantWrites int            // StatusWrites
		// wantCompleted: Completed
		wantCompleted bool
		wantAfter     time.Duration // returns no sooner
		wantBefore    time.Duration // returns sooner
		check         func(t *testing.T, f *fixture)
	}{
		{
			name: "a new image wakes it to decide on a create",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					d, err := f.client.AppsV1().Deployments(testNS).Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						return err
					}
					d.Spec.Template.Spec.Containers[0].Image = "nginx:3"
					d.Generation++
					_, err = f.client.AppsV1().Deployments(testNS).Update(ctx, d, metav1.UpdateOptions{})
					return err
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantSteps:  []k8s.StepKind{k8s.StepCreate},
			wantAfter:  delay,
			wantBefore: 10 * time.Second,
		},
		{
			name: "a scale-up wakes it to decide",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					d, err := f.client.AppsV1().Deployments(testNS).Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						return err
					}
					d.Spec.Replicas = ptr(int32(5))
					d.Generation++
					_, err = f.client.AppsV1().Deployments(testNS).Update(ctx, d, metav1.UpdateOptions{})
					return err
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantSteps:  []k8s.StepKind{k8s.StepScaleUp},
			wantAfter:  delay,
			wantBefore: 10 * time.Second,
		},
		{
			name: "the new pod becoming available lets the rollout move: decide",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, newRS := midRollout(t)
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					return f.setReplicaSetStatus(ctx, newRS.Name, func(st *appsv1.ReplicaSetStatus) { st.ReadyReplicas, st.AvailableReplicas = 1, 1 })
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantSteps:  []k8s.StepKind{k8s.StepScaleDown},
			wantAfter:  delay,
			wantBefore: 10 * time.Second,
		},
		{
			name: "a pod that is ready but not yet available only refreshes the status: written here",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, newRS := midRollout(t)
				if d.Status.ReadyReplicas != 3 {
					t.Fatalf("midRollout: status.readyReplicas = %d, want 3", d.Status.ReadyReplicas)
				}
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					return f.setReplicaSetStatus(ctx, newRS.Name, func(st *appsv1.ReplicaSetStatus) { st.ReadyReplicas = 1 }) // minReadySeconds not passed yet
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 1500 * time.Millisecond}
			},
			want:       AwaitResync,
			wantWrites: 1,
			wantAfter:  1500 * time.Millisecond,
			wantBefore: 10 * time.Second,
			check: func(t *testing.T, f *fixture) {
				d := f.deployment(t)
				if d.Status.ReadyReplicas != 4 || d.Status.AvailableReplicas != 3 || d.Status.Replicas != 4 {
					t.Errorf("status replicas/ready/available = %d/%d/%d, want 4/4/3",
						d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
				}
				if got := len(f.actionsOf("update", "deployments/status")); got < 1 {
					t.Errorf("status updates = %d, want at least 1", got)
				}
				if got := f.actionsOf("update", "replicasets"); len(got) != 0 {
					t.Errorf("replicaset updates = %d, want none: the wait writes status only", len(got))
				}
			},
		},
		{
			name: "the last old pod gone completes the rollout: the completing status is written here, then decide",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, old := finishing(t)
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					return f.setReplicaSetStatus(ctx, old.Name, func(st *appsv1.ReplicaSetStatus) { st.Replicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0 })
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:          AwaitDecide,
			wantWrites:    1,
			wantCompleted: true,
			wantAfter:     delay,
			wantBefore:    10 * time.Second,
			check: func(t *testing.T, f *fixture) {
				d := f.deployment(t)
				if !k8s.DeploymentComplete(d, &d.Status) || d.Status.Replicas != 3 {
					t.Errorf("status = %+v, want complete with 3 replicas", d.Status)
				}
				if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.NewRSAvailableReason {
					t.Errorf("Progressing = %+v, want reason %s", c, k8s.NewRSAvailableReason)
				}
			},
		},
		{
			name: "deletion is gone",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				after(t, delay, func() error {
					return f.client.AppsV1().Deployments(testNS).Delete(ctx, "web", metav1.DeleteOptions{})
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitGone,
			wantAfter:  delay,
			wantBefore: 10 * time.Second,
		},
		{
			name: "another Deployment of the same name is gone",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss := atRest(t)
				f := awaitFixture(t, d, rss)
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: "earlier-uid", Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitGone,
			wantBefore: 10 * time.Second,
		},
		{
			name: "nothing happens: resync after MaxWait",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 100 * time.Millisecond}
			},
			want:       AwaitResync,
			wantAfter:  100 * time.Millisecond,
			wantBefore: 10 * time.Second,
			check: func(t *testing.T, f *fixture) {
				if got := f.actionsOf("update", "deployments/status"); len(got) != 0 {
					t.Errorf("status updates = %d, want none while no pod changes", len(got))
				}
			},
		},
		{
			// The wait whose completing write this was lost its workflow task (a worker
			// killed, a signal that rejected the task's completion): the wait run again finds
			// nothing to write, and the workflow must still sync and converge, not wait out
			// MaxWait with its rollout shown Progressing.
			name: "a rollout already complete when it starts is decided at once",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss := atRest(t)
				f := awaitFixture(t, d, rss)
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantBefore: 10 * time.Second,
			check: func(t *testing.T, f *fixture) {
				if got := f.actionsOf("update", "deployments/status"); len(got) != 0 {
					t.Errorf("status updates = %d, want none: the status is already complete", len(got))
				}
			},
		},
		{
			name: "a change already there when it starts is decided at once",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss := atRest(t)
				d = d.DeepCopy()
				d.Spec.Template = podTemplate("nginx:2", "")
				d.Generation = 2
				f := awaitFixture(t, d, rss)
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantSteps:  []k8s.StepKind{k8s.StepCreate},
			wantBefore: time.Second,
		},
		{
			name: "waits for the cache to hold the versions named, then weighs what it holds",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss := atRest(t)
				d = d.DeepCopy()
				d.Spec.Template = podTemplate("nginx:2", "")
				d.Generation = 2
				f := awaitFixture(t, d, rss)
				ahead := []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "999999"}}
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, AtLeast: ahead, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitDecide,
			wantSteps:  []k8s.StepKind{k8s.StepCreate},
			wantAfter:  catchUpBound,
			wantBefore: 10 * time.Second,
		},
		{
			// kubectl's test/cmd/apps.sh deletes nginx-deployment right after a `kubectl set
			// env`: the cache holds the deletion, which is past our last write, so the wait for
			// that write ends at once; it used to run out catchUpBound first.
			name: "deleted while it waits for the cache to hold our last write: gone at once",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				wrote := f.ourWrite(t)
				after(t, delay, func() error {
					return f.client.AppsV1().Deployments(testNS).Delete(ctx, "web", metav1.DeleteOptions{})
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, AtLeast: wrote, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitGone,
			wantAfter:  delay,
			wantBefore: catchUpBound,
		},
		{
			// The same, then created again under the same name (a new UID), its ReplicaSets
			// deleted by the garbage collector: past our writes too.
			name: "deleted and created again while it waits for the cache to hold our last write: gone at once",
			give: func(t *testing.T) (*fixture, AwaitInput) {
				d, rss, _ := midRollout(t)
				f := awaitFixture(t, d, rss)
				wrote := f.ourWrite(t)
				after(t, delay, func() error {
					if err := f.client.AppsV1().Deployments(testNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
						return err
					}
					for _, rs := range rss {
						if err := f.client.AppsV1().ReplicaSets(testNS).Delete(ctx, rs.Name, metav1.DeleteOptions{}); err != nil {
							return err
						}
					}
					again := rolloutDeployment(3, "nginx:1")
					again.UID, again.ResourceVersion = "d-uid-2", ""
					_, err := f.client.AppsV1().Deployments(testNS).Create(ctx, again, metav1.CreateOptions{})
					return err
				})
				return f, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, AtLeast: wrote, Request: k8s.Request{}, MaxWait: 30 * time.Second}
			},
			want:       AwaitGone,
			wantAfter:  delay,
			wantBefore: catchUpBound,
			check: func(t *testing.T, f *fixture) {
				// The wait may end at the deletion, before the create.
				deadline := time.Now().Add(5 * time.Second)
				for d := f.deployment(t); d == nil || d.UID != "d-uid-2"; d = f.deployment(t) {
					if time.Now().After(deadline) {
						t.Fatalf("Deployment = %+v after 5s, want the new one, UID d-uid-2", d)
					}
					time.Sleep(5 * time.Millisecond)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, in := tt.give(t)
			start := time.Now()

			got, err := runAwait(t, f.a, in)

			elapsed := time.Since(start)
			t.Logf("result %+v after %s", got, elapsed)
			if err != nil {
				t.Fatalf("AwaitChange error = %v, want nil", err)
			}
			if got.Reason != tt.want {
				t.Fatalf("Reason = %q (result %+v), want %q", got.Reason, got, tt.want)
			}
			for _, k := range tt.wantSteps {
				if !slices.Contains(got.Steps, k) {
					t.Errorf("Steps = %v, want them to contain %s", got.Steps, k)
				}
			}
			if len(tt.wantSteps) == 0 && len(got.Steps) > 0 {
				t.Errorf("Steps = %v, want none", got.Steps)
			}
			// Exactly: the wait must not write the same refresh again before its cache shows
			// its own write.
			if got.StatusWrites != tt.wantWrites {
				t.Errorf("StatusWrites = %d, want %d", got.StatusWrites, tt.wantWrites)
			}
			if got.Completed != tt.wantCompleted {
				t.Errorf("Completed = %t, want %t", got.Completed, tt.wantCompleted)
			}
			if s := got.Snapshot; (s != nil) != (tt.want == AwaitDecide) || (s != nil && (s.Deployment == nil || s.Deployment.UID != dUID)) {
				t.Errorf("Snapshot = %+v, want default/web's exactly when the reason is %s", s, AwaitDecide)
			}
			if got.Error != "" {
				t.Errorf("Error = %q, want none", got.Error)
			}
			if elapsed < tt.wantAfter || elapsed >= tt.wantBefore {
				t.Errorf("returned after %s, want in [%s, %s)", elapsed, tt.wantAfter, tt.wantBefore)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestAwaitChangeInvalid(t *testing.T) {
	tests := []struct {
		name      string
		give      AwaitInput
		giveCache bool
		want      string
	}{
		{name: "no name", give: AwaitInput{Namespace: testNS}, giveCache: true, want: ErrInvalid},
		{name: "no namespace", give: AwaitInput{Name: "web"}, giveCache: true, want: ErrInvalid},
		{name: "no cache", give: AwaitInput{Namespace: testNS, Name: "web"}, want: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment())
			if tt.giveCache {
				f.a.Cache = startCache(t, f, testNS)
			}
			_, err := runAwait(t, f.a, tt.give)
			if !IsKind(err, tt.want) {
				t.Errorf("error = %v, want kind %s", err, tt.want)
			}
		})
	}
}

// Run as a local activity, AwaitChange takes one of LocalWaits' slots for as long as it waits,
// and returns Busy at once when none is free; the workflow then waits in the activity.
func TestAwaitChangeLocalSlots(t *testing.T) {
	d, rss, _ := midRollout(t)
	f := awaitFixture(t, d, rss)
	f.a.LocalWaits = make(chan struct{}, 1)
	in := AwaitInput{Namespace: testNS, Name: "web", UID: d.UID, Request: k8s.Request{}, MaxWait: 300 * time.Millisecond}
	runLocal := func() (AwaitResult, time.Duration) {
		t.Helper()
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(f.a)
		start := time.Now()
		val, err := env.ExecuteLocalActivity(f.a.AwaitChange, in)
		if err != nil {
			t.Fatalf("AwaitChange as a local activity: %v", err)
		}
		var res AwaitResult
		if err := val.Get(&res); err != nil {
			t.Fatalf("decode result: %v", err)
		}
		return res, time.Since(start)
	}

	// A free slot: it waits its MaxWait (nothing moves mid-rollout) and gives the slot back.
	if res, took := runLocal(); res.Reason != AwaitResync || took < in.MaxWait {
		t.Fatalf("with a free slot: reason %q after %s, want %q after %s", res.Reason, took, AwaitResync, in.MaxWait)
	}
	if n := len(f.a.LocalWaits); n != 0 {
		t.Fatalf("slots taken after the wait: %d, want 0", n)
	}
	// No free slot: Busy at once.
	f.a.LocalWaits <- struct{}{}
	if res, took := runLocal(); res.Reason != AwaitBusy || took >= in.MaxWait {
		t.Fatalf("with no free slot: reason %q after %s, want %q at once", res.Reason, took, AwaitBusy)
	}
	// The activity (not local) takes no slot.
	res, err := runAwait(t, f.a, in)
	if err != nil || res.Reason != AwaitResync {
		t.Fatalf("as an activity with no free local slot: %+v, %v; want %q", res, err, AwaitResync)
	}
}

// lockedBudget is a fakeBudget another goroutine may change.
type lockedBudget struct {
	mu      sync.Mutex
	backlog time.Duration
}

func (b *lockedBudget) Backlog() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backlog
}
func (b *lockedBudget) QPS() float32 { return 20 }

// A move seen while the client budget's queue is long is held in the wait, and handed to the
// workflow once the queue is short again, with how long it was held.
func TestAwaitChangeHoldsMovesForTheBudget(t *testing.T) {
	d, rss, newRS := midRollout(t)
	f := awaitFixture(t, d, rss)
	budget := &lockedBudget{backlog: 3 * time.Second}
	f.a.Admission = NewAdmission(budget)
	ctx := context.Background()
	const short = 600 * time.Millisecond
	after(t, 100*time.Millisecond, func() error {
		// The new pod becomes available: a move (scale the old ReplicaSet down).
		return f.setReplicaSetStatus(ctx, newRS.Name, func(st *appsv1.ReplicaSetStatus) { st.ReadyReplicas, st.AvailableReplicas = 1, 1 })
	})
	after(t, short, func() error {
		budget.mu.Lock()
		budget.backlog = 0
		budget.mu.Unlock()
		return nil
	})
	start := time.Now()
	res, err := runAwait(t, f.a, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, MaxWait: 30 * time.Second})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != AwaitDecide || !slices.Contains(res.Steps, k8s.StepScaleDown) {
		t.Fatalf("result %+v, want Decide with a scale-down", res)
	}
	if took < short || res.Held < short-150*time.Millisecond {
		t.Errorf("returned after %s with held %s, want the move held until the budget's queue was short (%s)", took, res.Held, short)
	}
}

// A stale decision's retry (Retry) weighs nothing: it returns Decide, with no snapshot, once the
// client budget admits a move; at once while the budget is free.
func TestAwaitChangeRetryWaitsForTheBudget(t *testing.T) {
	d, rss, _ := midRollout(t)
	f := awaitFixture(t, d, rss)
	budget := &lockedBudget{}
	f.a.Admission = NewAdmission(budget)
	in := AwaitInput{Namespace: testNS, Name: "web", UID: dUID, MaxWait: 30 * time.Second, Retry: true}

	start := time.Now()
	res, err := runAwait(t, f.a, in)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); res.Reason != AwaitDecide || res.Snapshot != nil || res.Held != 0 || took > time.Second {
		t.Fatalf("free budget: result %+v after %s, want Decide at once with no snapshot", res, took)
	}

	budget.mu.Lock()
	budget.backlog = 3 * time.Second
	budget.mu.Unlock()
	const short = 600 * time.Millisecond
	after(t, short, func() error {
		budget.mu.Lock()
		budget.backlog = 0
		budget.mu.Unlock()
		return nil
	})
	start = time.Now()
	res, err = runAwait(t, f.a, in)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != AwaitDecide || took < short || res.Held < short-150*time.Millisecond {
		t.Fatalf("saturated budget: result %+v after %s, want Decide held until the queue was short (%s)", res, took, short)
	}
}

// A sync's write (a local activity) is refused, before it is sent, while the client budget is
// saturated (ErrBusy), or while its wait would take the sync's time in its task past the bound
// (spent); a user's command and a write outside a workflow task (a regular activity) are not,
// nor is any write on a budget with a token free.
func TestBusyWritesRefused(t *testing.T) {
	tests := []struct {
		name      string
		backlog   time.Duration
		spent     time.Duration
		command   bool
		local     bool
		wantBusy  bool
		wantWrite bool
	}{
		{name: "sync's write, saturated budget", backlog: 2 * time.Second, local: true, wantBusy: true},
		{name: "sync's write, budget with room", backlog: 300 * time.Millisecond, local: true, wantWrite: true},
		{name: "sync's later write, its wait would take the task past the bound", backlog: 300 * time.Millisecond, spent: 600 * time.Millisecond, local: true, wantBusy: true},
		{name: "sync's later write, a token free", spent: 2 * time.Second, local: true, wantWrite: true},
		{name: "sync's later write, within the bound", backlog: 100 * time.Millisecond, spent: 600 * time.Millisecond, local: true, wantWrite: true},
		{name: "a user's command, saturated budget", backlog: 2 * time.Second, command: true, local: true, wantWrite: true},
		{name: "a regular activity, saturated budget", backlog: 2 * time.Second, wantWrite: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss := atRest(t)
			f := awaitFixture(t, d, rss)
			f.a.Admission = NewAdmission(&lockedBudget{backlog: tt.backlog})
			want := d.DeepCopy()
			want.Status.ObservedGeneration++
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(f.a)
			in := DeploymentWriteInput{Deployment: want, Command: tt.command, Spent: tt.spent}
			var err error
			if tt.local {
				_, err = env.ExecuteLocalActivity(f.a.UpdateDeploymentStatus, in)
			} else {
				_, err = env.ExecuteActivity(f.a.UpdateDeploymentStatus, in)
			}
			if got := IsKind(err, ErrBusy); got != tt.wantBusy {
				t.Fatalf("error %v: busy %t, want %t", err, got, tt.wantBusy)
			}
			writes := len(f.actionsOf("update", "deployments/status"))
			if tt.wantWrite && (err != nil || writes != 1) {
				t.Fatalf("error %v, %d status writes, want the write made", err, writes)
			}
			if !tt.wantWrite && writes != 0 {
				t.Fatalf("%d status writes, want none", writes)
			}
		})
	}
}

// A plain rollout's scale moves are the wait's own (AwaitInput.Inline) while the Deployment
// stays at the generation the workflow decided on: the new pod available, the wait scales the
// old ReplicaSet down and, with the surge pod that frees, the new one up, records upstream's
// events, writes the status after each, and lists the moves. Anything else goes to the
// workflow as before.
func TestAwaitChangeMovesInline(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// change alters the input or the Deployment (before the cache starts).
		change func(in *AwaitInput, d *appsv1.Deployment)
		// canary: a stepped rollout at [setWeight 100] whose annotations the workflow weighed,
		// with InlineCanary (change inline-canary-moves); change applies after.
		canary bool
		// passed: a stepped rollout whose steps passed, going to 100% with no canary request,
		// whose annotations the workflow weighed, with InlineAnnotated (change
		// inline-annotated-moves); change applies after.
		passed    bool
		want      string
		wantMoves []string // kind replicaSet from→to, {old} and {new} for the names
		wantOld   int32
		wantNew   int32
	}{
		{
			name: "inline: the wait scales the old ReplicaSet down, then the new one up",
			want: AwaitResync, wantMoves: []string{"ScaleDownReplicaSet {old} 3→2", "ScaleUpReplicaSet {new} 1→2"},
			wantOld: 2, wantNew: 2,
		},
		{
			name: "not asked: the workflow decides", change: func(in *AwaitInput, _ *appsv1.Deployment) { in.Inline = false },
			want: AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name:   "the Deployment changed since the workflow's sync: the workflow decides",
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.Generation-- },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a stepped rollout's annotation not yet weighed: the workflow decides",
			change: func(_ *AwaitInput, d *appsv1.Deployment) {
				d.Annotations = map[string]string{k8s.StepsAnnotation: `[{"setWeight":50}]`}
			},
			want: AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name:   "a rollback pending: the workflow decides",
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.Request.RollbackTo = ptr(int64(0)) },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a stepped rollout within its step: the wait makes its moves", canary: true,
			want: AwaitResync, wantMoves: []string{"ScaleDownReplicaSet {old} 3→2", "ScaleUpReplicaSet {new} 1→2"},
			wantOld: 2, wantNew: 2,
		},
		{
			name: "a stepped rollout without InlineCanary: the workflow decides", canary: true,
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.InlineCanary = false },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a stepped rollout whose steps were edited since the sync: the workflow decides", canary: true,
			change: func(_ *AwaitInput, d *appsv1.Deployment) { d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50}]` },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a routed stepped rollout: the workflow moves it, through the gate", canary: true,
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.Traffic = &AwaitTraffic{} },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a blue-green rollout: the workflow decides", canary: true,
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.Request.Canary.BlueGreen = true },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a stepped rollout past its steps: the wait makes its moves to 100%", passed: true,
			want: AwaitResync, wantMoves: []string{"ScaleDownReplicaSet {old} 3→2", "ScaleUpReplicaSet {new} 1→2"},
			wantOld: 2, wantNew: 2,
		},
		{
			name: "a stepped rollout past its steps without InlineAnnotated: the workflow decides", passed: true,
			change: func(in *AwaitInput, _ *appsv1.Deployment) { in.InlineAnnotated = false },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a stepped rollout past its steps whose steps were edited since the sync: the workflow decides", passed: true,
			change: func(_ *AwaitInput, d *appsv1.Deployment) { d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":20}]` },
			want:   AwaitDecide, wantOld: 3, wantNew: 1,
		},
		{
			name: "a routed Deployment past its steps: the workflow moves it, through the gate", passed: true,
			change: func(in *AwaitInput, d *appsv1.Deployment) {
				d.Annotations[k8s.TrafficAnnotation] = `{}`
				weighed := k8s.RolloutAnnotations(d.Annotations)
				in.RolloutAnnotations = &weighed
			},
			want: AwaitDecide, wantOld: 3, wantNew: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss, newRS := midRollout(t)
			var old *appsv1.ReplicaSet
			for _, rs := range rss {
				if rs.Name != newRS.Name {
					old = rs
				}
			}
			in := AwaitInput{Namespace: testNS, Name: "web", UID: dUID, MaxWait: 1500 * time.Millisecond, Inline: true, Generation: d.Generation}
			if tt.canary || tt.passed {
				d = d.DeepCopy()
				if d.Annotations == nil {
					d.Annotations = map[string]string{}
				}
				d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":100}]`
				if tt.passed {
					d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50}]`
				}
				weighed := k8s.RolloutAnnotations(d.Annotations)
				in.RolloutAnnotations = &weighed
				if tt.canary {
					in.InlineCanary = true
					in.Request.Canary = &k8s.Canary{Hash: newRS.Labels[appsv1.DefaultDeploymentUniqueLabelKey], Weight: 100}
				} else {
					in.InlineAnnotated = true
				}
				// The workflow's sync copied the annotation to the ReplicaSets, as upstream
				// copies a Deployment's annotations.
				for i, rs := range rss {
					rs = rs.DeepCopy()
					if rs.Annotations == nil {
						rs.Annotations = map[string]string{}
					}
					rs.Annotations[k8s.StepsAnnotation] = d.Annotations[k8s.StepsAnnotation]
					rss[i] = rs
				}
			}
			if tt.change != nil {
				d = d.DeepCopy()
				tt.change(&in, d)
			}
			f := awaitFixture(t, d, rss)
			after(t, 200*time.Millisecond, func() error {
				return f.setReplicaSetStatus(ctx, newRS.Name, func(st *appsv1.ReplicaSetStatus) { st.ReadyReplicas, st.AvailableReplicas = 1, 1 })
			})

			got, err := runAwait(t, f.a, in)

			if err != nil {
				t.Fatalf("AwaitChange error = %v", err)
			}
			names := strings.NewReplacer(old.Name, "{old}", newRS.Name, "{new}")
			var moves []string
			for _, m := range got.Moves {
				moves = append(moves, names.Replace(fmt.Sprintf("%s %s %d→%d", m.Kind, m.ReplicaSet, m.From, m.To)))
				if m.At.IsZero() {
					t.Errorf("move %+v has no time", m)
				}
			}
			if got.Reason != tt.want || !slices.Equal(moves, tt.wantMoves) || got.Error != "" {
				t.Fatalf("result %s (steps %v), moves %q, error %q; want %s, moves %q", got.Reason, got.Steps, moves, got.Error, tt.want, tt.wantMoves)
			}
			if o, n := *f.rs(t, old.Name).Spec.Replicas, *f.rs(t, newRS.Name).Spec.Replicas; o != tt.wantOld || n != tt.wantNew {
				t.Errorf("old/new replicas = %d/%d, want %d/%d", o, n, tt.wantOld, tt.wantNew)
			}
			var scaling []string
			for _, e := range f.events() {
				if strings.Contains(e, "ScalingReplicaSet") {
					scaling = append(scaling, names.Replace(e))
				}
			}
			var wantEvents []string
			for _, m := range tt.wantMoves {
				var kind, rs string
				var from, to int32
				fmt.Sscanf(strings.Replace(m, "→", " ", 1), "%s %s %d %d", &kind, &rs, &from, &to)
				verb := map[string]string{"ScaleDownReplicaSet": "down", "ScaleUpReplicaSet": "up"}[kind]
				wantEvents = append(wantEvents, fmt.Sprintf("Normal ScalingReplicaSet Scaled %s replica set %s from %d to %d", verb, rs, from, to))
			}
			if !slices.Equal(scaling, wantEvents) {
				t.Errorf("events %q, want %q", scaling, wantEvents)
			}
			if len(tt.wantMoves) > 0 {
				// The status, written with the scale-down: the counts the ReplicaSets' own
				// statuses give (no ReplicaSet controller here: the old one still has 3 pods,
				// the new one 1, now available). The scale-up changes none of them.
				st := f.deployment(t).Status
				if st.Replicas != 4 || st.UpdatedReplicas != 1 || st.AvailableReplicas != 4 {
					t.Errorf("status replicas/updated/available = %d/%d/%d, want 4/1/4", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
				}
				if got.StatusWrites != 1 {
					t.Errorf("StatusWrites = %d, want 1", got.StatusWrites)
				}
			}
		})
	}
}

// TestAwaitHeartbeatPace: a wait with a heartbeat timeout under two minutes (runs before
// sparse-await-heartbeats: 20 s) beats every 5 s, which the SDK throttles; from two minutes on it beats
// at three quarters of the timeout, which leaves the server a quarter of it before it times the
// wait out and is longer than the SDK's throttle interval (80% of the timeout, at most its
// default MaxHeartbeatThrottleInterval of 60 s), so every beat reaches the server and none is
// added by the SDK.
func TestAwaitHeartbeatPace(t *testing.T) {
	tests := []struct {
		give time.Duration
		want time.Duration
	}{
		{give: 0, want: 5 * time.Second},
		{give: 20 * time.Second, want: 5 * time.Second},
		{give: time.Minute, want: 5 * time.Second},
		{give: 2 * time.Minute, want: 90 * time.Second},
		{give: 3 * time.Minute, want: 135 * time.Second},
		{give: 4 * time.Minute, want: 3 * time.Minute},
		{give: 5 * time.Minute, want: 225 * time.Second},
	}
	for _, tt := range tests {
		got := heartbeatPaceFor(tt.give)
		if got != tt.want {
			t.Errorf("heartbeatPaceFor(%s) = %s, want %s", tt.give, got, tt.want)
		}
		if tt.give < 2*time.Minute {
			continue
		}
		throttle := min(tt.give*8/10, 60*time.Second)
		if got >= tt.give || got <= throttle {
			t.Errorf("heartbeatPaceFor(%s) = %s, want under the timeout and over the SDK's throttle interval %s", tt.give, got, throttle)
		}
	}
}

// TestAwaitChangeRestCheck: the look of a held rollout's workflow task (RestCheck, change
// rest-checked-locally) returns Rest at once where the rollout is held at rest and the worker's
// watcher runs, and Resync at once otherwise, writing nothing either way.
func TestAwaitChangeRestCheck(t *testing.T) {
	d, rss := atRest(t)
	d = d.DeepCopy()
	d.Spec.Template = podTemplate("nginx:2", "")
	d.Generation = 2
	req := k8s.Request{Canary: &k8s.Canary{Hash: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount), Weight: 50, Hold: true, Message: "Step 2 of 2 (pause): paused until promoted"}}
	d, rss = settleFor(t, d, rss, allReady, req)
	if !k8s.HeldAtRest(d, rss) {
		t.Fatalf("the fixture is not held at rest: %+v", d.Status.Conditions)
	}
	for _, tt := range []struct {
		name    string
		watched bool
		want    string
	}{
		{name: "held at rest, the watcher beside the worker", watched: true, want: AwaitRest},
		{name: "no watcher beside the worker: the activity waits", watched: false, want: AwaitResync},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := awaitFixture(t, d, rss)
			f.a.RestWatched = tt.watched
			before := len(f.actions())
			start := time.Now()
			got, err := runAwait(t, f.a, AwaitInput{Namespace: testNS, Name: "web", UID: d.UID, Request: req, Rest: true, RestCheck: true, MaxWait: 5 * time.Second})
			if err != nil || got.Reason != tt.want || got.Unwatched != !tt.watched {
				t.Fatalf("RestCheck: %s, unwatched %t (%v), want %s, unwatched %t", got.Reason, got.Unwatched, err, tt.want, !tt.watched)
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("RestCheck took %s, want one look, well within its 5 s MaxWait", took)
			}
			var writes []string
			for _, a := range f.actions()[before:] {
				if !strings.HasPrefix(a, "get") && !strings.HasPrefix(a, "list") && !strings.HasPrefix(a, "watch") {
					writes = append(writes, a)
				}
			}
			if len(writes) > 0 {
				t.Errorf("RestCheck wrote %v, want nothing", writes)
			}
		})
	}
}

// routedCanary is default/web (10 pods) at the first step of a routed stepped rollout from
// nginx:1 to nginx:2, [setWeight 30, pause]: the new ReplicaSet has its 3 pods, none available
// yet, the route all on the stable Service. It returns the AwaitInput its workflow's sync would
// start the wait with (change inline-traffic-moves), and the fixture with the route and both
// Services in it.
func routedCanary(t *testing.T) (*fixture, *dynamicfake.FakeDynamicClient, AwaitInput, string, string) {
	t.Helper()
	d, rss := settle(t, rolloutDeployment(10, "nginx:1"), nil, allReady)
	old := rss[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	d = d.DeepCopy()
	d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":30},{"pause":{}}]`
	d.Annotations[k8s.TrafficAnnotation] = `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`
	d.Spec.Template = podTemplate("nginx:2", "")
	d.Generation = 2
	canary := k8s.PodTemplateHash(&d.Spec.Template, nil)
	req := k8s.Request{Canary: &k8s.Canary{Hash: canary, Weight: 30}}
	d, rss = settleFor(t, d, rss, func(rs *appsv1.ReplicaSet) (int32, int32) {
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == canary {
			return 0, 0
		}
		return allReady(rs)
	}, req)
	f := awaitFixture(t, d, rss)
	for _, svc := range []*corev1.Service{service("web-stable", old), service("web-canary", canary)} {
		if err := f.client.Tracker().Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	route := routeWith(100, 0)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{HTTPRouteResource: "HTTPRouteList"}, route)
	f.a.Dynamic = dyn
	weighed := k8s.RolloutAnnotations(d.Annotations)
	in := AwaitInput{
		Namespace: testNS, Name: "web", UID: dUID, MaxWait: 3 * time.Second, Request: req, RolloutAnnotations: &weighed,
		Inline: true, InlineCanary: true, Generation: d.Generation,
		Traffic: &AwaitTraffic{Ask: k8s.TrafficAsk{Target: 30, Stable: old, Canary: canary},
			Cur: &k8s.TrafficState{StableHash: old, CanaryHash: canary}},
		InlineTraffic: &InlineTraffic{Spec: trafficSpec, Route: "web rule 0"},
	}
	return f, dyn, in, old, canary
}

// TestAwaitChangeMovesRouteInline: with InlineTraffic (change inline-traffic-moves) the wait
// of a routed stepped rollout moves the route itself, through the gate, as the canary's pods
// become available, each move no further than the pods then available allow, and hands the
// rollout to the workflow once the route carries the step's weight. Without it, or for a
// held rollout, the first move is the workflow's and the route is left as it was.
func TestAwaitChangeMovesRouteInline(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		change     func(in *AwaitInput)
		fence      string // the route's fence, the wait's being 0
		wantMoves  bool
		wantWeight int64
	}{
		{name: "inline: the wait moves the route to the step's weight", wantMoves: true, wantWeight: 30},
		{name: "not asked: the workflow moves it", change: func(in *AwaitInput) { in.InlineTraffic = nil }},
		{name: "held: the workflow moves it", change: func(in *AwaitInput) { in.Rest = true }},
		{name: "the Deployment changed since the sync: the workflow moves it", change: func(in *AwaitInput) { in.Generation-- }},
		{name: "fenced: the workflow gave this wait up and raised the route's fence", fence: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dyn, in, _, canary := routedCanary(t)
			if tt.change != nil {
				tt.change(&in)
			}
			if tt.fence != "" {
				routes := dyn.Resource(HTTPRouteResource).Namespace(testNS)
				r, err := routes.Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				r.SetAnnotations(map[string]string{RouteFenceAnnotation + "0": tt.fence})
				if _, err := routes.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			list, err := f.client.AppsV1().ReplicaSets(testNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			name, oldName := "", ""
			for _, rs := range list.Items {
				if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == canary {
					name = rs.Name
				} else {
					oldName = rs.Name
				}
			}
			// The canary's pods become available one by one; the stable ReplicaSet's pods
			// follow its replicas, as its controller would have them.
			for i, n := range []int32{1, 2, 3, 3} {
				after(t, time.Duration(150*(i+1))*time.Millisecond, func() error {
					rs, err := f.client.AppsV1().ReplicaSets(testNS).Get(ctx, oldName, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if err := f.setReplicaSetStatus(ctx, oldName, func(st *appsv1.ReplicaSetStatus) {
						st.Replicas, st.ReadyReplicas, st.AvailableReplicas = *rs.Spec.Replicas, *rs.Spec.Replicas, *rs.Spec.Replicas
					}); err != nil {
						return err
					}
					return f.setReplicaSetStatus(ctx, name, func(st *appsv1.ReplicaSetStatus) { st.ReadyReplicas, st.AvailableReplicas = n, n })
				})
			}

			got, err := runAwait(t, f.a, in)

			if err != nil {
				t.Fatalf("AwaitChange error = %v", err)
			}
			weights, _, _, _ := readBack(t, f.a, dyn, f.client)
			if got.Reason != AwaitDecide || got.Error != "" || weights["web-canary"] != tt.wantWeight {
				t.Fatalf("result %s (error %q, steps %v, route moves %+v), route canary weight %d; want Decide, weight %d", got.Reason, got.Error, got.Steps, got.RouteMoves, weights["web-canary"], tt.wantWeight)
			}
			var shifted int
			for _, e := range f.events() {
				if strings.Contains(e, "TrafficShifted") {
					shifted++
				}
			}
			if !tt.wantMoves {
				if len(got.RouteMoves) != 0 || got.Traffic != nil || shifted != 0 {
					t.Errorf("route moves %+v, traffic %+v, %d TrafficShifted events; want none", got.RouteMoves, got.Traffic, shifted)
				}
				return
			}
			// Each move raises the weight toward the step's 30, never past it (the gate caps
			// each by the canary's share of the pods available then).
			last := int32(0)
			for i, m := range got.RouteMoves {
				if m.From != last || m.To <= m.From || m.To > 30 || m.Canary != canary || m.Hold != "" || m.At.IsZero() {
					t.Errorf("route move %d = %+v, want from %d up to at most 30 on %s", i, m, last, canary)
				}
				last = m.To
			}
			if last != 30 || len(got.RouteMoves) < 2 || shifted != len(got.RouteMoves) {
				t.Errorf("route moves %+v with %d TrafficShifted events; want at least 2 moves, each with its event, ending at 30", got.RouteMoves, shifted)
			}
			// The step's scale moves, to 3 canary and 7 stable replicas, are the wait's too: a
			// routed step passes only once the route carries its weight.
			if o, c := *f.rs(t, oldName).Spec.Replicas, *f.rs(t, name).Spec.Replicas; len(got.Moves) == 0 || o != 7 || c != 3 {
				t.Errorf("scale moves %+v leave stable/canary replicas %d/%d, want the wait's moves to 7/3", got.Moves, o, c)
			}
			if got.Traffic == nil || got.Traffic.After.Route.CanaryWeight != 30 || got.Traffic.Canary.Weight != 30 || got.Traffic.Stable.Weight != 70 {
				t.Errorf("traffic result %+v, want the route at 70/30", got.Traffic)
			}
		})
	}
}
