//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
)

// stopOurs stops our worker and watcher; the returned func starts them again.
func stopOurs(t *testing.T) func() {
	t.Helper()
	env.stack.StopProcess("watcher")
	env.stack.StopProcess("worker")
	return func() {
		t.Helper()
		if err := startWorker(); err != nil {
			t.Fatal(err)
		}
		if err := startWatcher(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdoptFromBuiltinController runs a Deployment under kube-controller-manager's own
// Deployment controller, then hands it to ours: same pod-template-hash, so the ReplicaSet is
// kept, not recreated, and the next rollout continues at revision 2.
func TestAdoptFromBuiltinController(t *testing.T) {
	ns := newNamespace(t)
	restart := stopOurs(t)
	_, err := env.stack.StartProcess("kcm-builtin", stack.ToolPath(env.tools, "kube-controller-manager"),
		"--kubeconfig", env.stack.Kubeconfig, "--controllers", "deployment", "--leader-elect=false",
		"--secure-port=0", "--use-service-account-credentials=false")
	if err != nil {
		t.Fatal(err)
	}

	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("25%", "25%")))
	d := waitComplete(t, ns, "web")
	env.stack.StopProcess("kcm-builtin")
	before := replicaSets(t, ns)
	if len(before) != 1 {
		t.Fatalf("built-in controller made %s, want one replicaset", rsSummary(before))
	}
	if got, want := before[0].Name, expectedRSName(d); got != want {
		t.Fatalf("built-in replicaset %s, our hash gives %s: pod-template-hash differs", got, want)
	}
	restart()
	// Our controller syncs it (the watcher signals every Deployment on start) and keeps the
	// ReplicaSet.
	eventually(t, 30*time.Second, func() string {
		out, err := temporalCLIErr("workflow", "describe", "--workflow-id", workflowID(ns, "web"))
		if err != nil {
			return "no workflow yet: " + out
		}
		return ""
	})
	time.Sleep(2 * time.Second)
	after := replicaSets(t, ns)
	if len(after) != 1 || after[0].UID != before[0].UID || *after[0].Spec.Replicas != 4 {
		t.Fatalf("after handover replicasets = %s, want the same %s at 4", rsSummary(after), before[0].Name)
	}
	setImage(t, ns, "web", "nginx:1.26")
	d = waitComplete(t, ns, "web")
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:4 %s:r1:0", expectedRSName(d), before[0].Name); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
}

// TestAdoptOrphanReleaseAndCascade: an orphaned ReplicaSet is adopted by a new Deployment
// with the same template (no new ReplicaSet); a ReplicaSet whose labels stop matching is
// released; deleting the Deployment cascades and ends its workflow.
func TestAdoptOrphanReleaseAndCascade(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "web")
	rs := replicaSets(t, ns)[0]

	// Orphan it, then create the same Deployment again.
	orphan := metav1.DeletePropagationOrphan
	if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		got, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(got.OwnerReferences) != 0 {
			return fmt.Sprintf("still owned: %+v", got.OwnerReferences)
		}
		if _, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "deployment not gone yet"
		}
		return ""
	})
	d := create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0")))
	eventually(t, 30*time.Second, func() string {
		got, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != d.UID {
			return fmt.Sprintf("not adopted by %s: %+v", d.UID, got.OwnerReferences)
		}
		return ""
	})
	d = waitComplete(t, ns, "web")
	if rss := replicaSets(t, ns); len(rss) != 1 || rss[0].UID != rs.UID {
		t.Fatalf("after adoption replicasets = %s, want only the adopted %s", rsSummary(rss), rs.Name)
	}

	// Release: the ReplicaSet's labels stop matching the selector.
	patch := `{"metadata":{"labels":{"app":"released"}}}`
	if _, err := env.kube.AppsV1().ReplicaSets(ns).Patch(ctx, rs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		got, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if metav1.GetControllerOf(got) != nil {
			return fmt.Sprintf("still owned: %+v", got.OwnerReferences)
		}
		return ""
	})
	// The Deployment has no ReplicaSet left and makes a new one; the released one holds the
	// old name, so the hash collides and collisionCount goes to 1. The status written before
	// the release still reads complete, so wait for the new ReplicaSet before the status.
	owned := func(d *appsv1.Deployment) string {
		var names []string
		for _, r := range replicaSets(t, ns) {
			if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == d.UID {
				names = append(names, fmt.Sprintf("%s:%d", r.Name, *r.Spec.Replicas))
			}
		}
		return strings.Join(names, " ")
	}
	eventually(t, 30*time.Second, func() string {
		cur, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if got, want := owned(cur), expectedRSName(cur)+":3"; got != want {
			return fmt.Sprintf("owned replicasets = %q, want %q", got, want)
		}
		if cur.Status.CollisionCount == nil || *cur.Status.CollisionCount != 1 {
			return fmt.Sprintf("collisionCount = %v, want 1", cur.Status.CollisionCount)
		}
		return ""
	})
	d = waitComplete(t, ns, "web")
	if got, want := owned(d), expectedRSName(d)+":3"; got != want {
		t.Errorf("owned replicasets = %q, want %q", got, want)
	}

	// Cascade: delete the Deployment; its ReplicaSets go and the workflow ends with Deleted.
	if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		for _, r := range replicaSets(t, ns) {
			if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == d.UID {
				return "owned replicaset still there: " + r.Name
			}
		}
		return ""
	})
	waitWorkflowResult(t, ns, "web", contract.OutcomeDeleted)
}

// waitWorkflowResult waits until the Deployment's workflow has completed with the outcome.
func waitWorkflowResult(t *testing.T, ns, name, outcome string) {
	t.Helper()
	eventually(t, 60*time.Second, func() string {
		desc, err := env.tc.DescribeWorkflowExecution(context.Background(), workflowID(ns, name), "")
		if err != nil {
			return err.Error()
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return "workflow status " + st.String()
		}
		var res contract.Result
		if err := env.tc.GetWorkflow(context.Background(), workflowID(ns, name), "").Get(context.Background(), &res); err != nil {
			return err.Error()
		}
		if res.Outcome != outcome {
			return "outcome " + res.Outcome
		}
		return ""
	})
}

// rolloutUnderWay creates a 10-replica Deployment (maxSurge 1, maxUnavailable 0), changes its
// image, and returns once the new ReplicaSet has grown past 1, with the bounds observer on.
func rolloutUnderWay(t *testing.T) (ns, firstRS string, obs *observer) {
	t.Helper()
	ns = newNamespace(t)
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("1", "0")))
	d := waitComplete(t, ns, "web")
	firstRS = expectedRSName(d)
	obs = observe(t, ns, 11, 10)
	setImage(t, ns, "web", "nginx:1.26")
	eventually(t, 30*time.Second, func() string {
		if rss := replicaSets(t, ns); len(rss) < 2 || *rss[0].Spec.Replicas < 2 {
			return "rollout not under way: " + rsSummary(rss)
		}
		return ""
	})
	return ns, firstRS, obs
}

// TestWorkerCrash SIGKILLs the worker mid-rollout and restarts it: the rollout completes, the
// bounds hold, and there is no duplicate ReplicaSet.
func TestWorkerCrash(t *testing.T) {
	ns, rs1, obs := rolloutUnderWay(t)
	recordHistories(t, ns, "web")
	env.stack.KillProcess("worker")
	time.Sleep(2 * time.Second)
	mid := rsSummary(replicaSets(t, ns))
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	d := waitComplete(t, ns, "web")
	obs.stop()
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:10 %s:r1:0", expectedRSName(d), rs1); got != want {
		t.Fatalf("replicasets = %s (at the crash: %s), want %s", got, mid, want)
	}
}

// TestTemporalRestart stops the Temporal dev server mid-rollout and starts it again on the same
// db file: the rollout completes.
func TestTemporalRestart(t *testing.T) {
	ns, rs1, obs := rolloutUnderWay(t)
	env.stack.StopTemporal()
	time.Sleep(3 * time.Second)
	if err := env.stack.StartTemporal(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := waitComplete(t, ns, "web")
	obs.stop()
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:10 %s:r1:0", expectedRSName(d), rs1); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
}

// TestBadInput: invalid selector, rollback to an unknown revision, malformed signal payloads,
// invalid workflow input, and a Deployment deleted mid-rollout.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)

	t.Run("invalid-selector", func(t *testing.T) {
		bad := newDeployment(ns, "bad", 1, "nginx:1.25")
		bad.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		_, err := env.kube.AppsV1().Deployments(ns).Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "`selector` does not match template `labels`") {
			t.Fatalf("create with mismatched selector: err = %v, want Invalid: selector does not match template labels", err)
		}
	})

	create(t, newDeployment(ns, "web", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "web")

	t.Run("unknown-revision", func(t *testing.T) {
		signal(t, ns, "web", contract.SignalRollback, `{"revision":99}`)
		waitEvent(t, ns, "web", "DeploymentRollbackRevisionNotFound: Unable to find the revision to rollback to.")
		st := queryStatus(t, ns, "web")
		if st.PendingRollback != nil {
			t.Errorf("pendingRollback = %d, want none", *st.PendingRollback)
		}
		if got := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
			t.Errorf("image = %s, want unchanged nginx:1.25", got)
		}
	})

	t.Run("malformed-signal", func(t *testing.T) {
		for _, tt := range []struct{ give, want string }{
			{`"bogus"`, `"bogus"`},
			{`{"revision":"x"}`, `{"revision":"x"}`},
			{`{"rev":1}`, `{"rev":1}`},
			{`{"revision":-2}`, "revision -2 is negative"},
		} {
			signal(t, ns, "web", contract.SignalRollback, tt.give)
			eventually(t, 20*time.Second, func() string {
				st := queryStatus(t, ns, "web")
				if !strings.Contains(st.IgnoredSignal, tt.want) {
					return fmt.Sprintf("ignoredSignal = %q, want it to mention %q", st.IgnoredSignal, tt.want)
				}
				return ""
			})
		}
		desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, "web"), "")
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("workflow status = %s, want Running", st)
		}
		if rss := replicaSets(t, ns); len(rss) != 1 {
			t.Errorf("replicasets = %s, want one: no rollback happened", rsSummary(rss))
		}
	})

	t.Run("invalid-workflow-input", func(t *testing.T) {
		out, err := temporalCLIErr("workflow", "execute", "--task-queue", contract.DefaultTaskQueue, "--type", contract.WorkflowType,
			"--workflow-id", "deployment/bad/input", "--input", `{"namespace":"","name":"x"}`, "-o", "json")
		if err == nil || !strings.Contains(out, `"type": "InvalidInput"`) {
			t.Fatalf("temporal workflow execute with an empty namespace: err = %v, output %s; want a failure of type InvalidInput", err, out)
		}
		desc, err := env.tc.DescribeWorkflowExecution(ctx, "deployment/bad/input", "")
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
			t.Fatalf("workflow status = %s, want Failed", st)
		}
		err = env.tc.GetWorkflow(ctx, "deployment/bad/input", "").Get(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "invalid namespace") {
			t.Errorf("workflow error = %v, want invalid namespace", err)
		}
	})

	t.Run("deleted-mid-rollout", func(t *testing.T) {
		create(t, newDeployment(ns, "gone", 6, "nginx:1.25", rolling("1", "0")))
		waitComplete(t, ns, "gone")
		setImage(t, ns, "gone", "nginx:404")
		eventually(t, 30*time.Second, func() string {
			st := queryStatus(t, ns, "gone")
			if st.Phase != "Progressing" {
				return "phase " + st.Phase
			}
			return ""
		})
		if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitWorkflowResult(t, ns, "gone", contract.OutcomeDeleted)
	})
}

// TestWorkerWatches runs the watcher inside the worker (worker --watch) and no `starter
// watch`: a created Deployment's workflow is started with its trigger in the input and no
// signal (an eager start, whose first workflow task this worker takes), rolls out, and rolls
// forward on an image update, which the in-process watcher signals.
func TestWorkerWatches(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	restart := stopOurs(t)
	defer func() { env.stack.StopProcess("worker"); restart() }()
	if err := startWorker("--watch", "--search-attributes"); err != nil {
		t.Fatal(err)
	}

	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("25%", "25%")))
	d := waitComplete(t, ns, "web")
	first := expectedRSName(d)
	if got, want := rsSummary(replicaSets(t, ns)), first+":r1:4"; got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}

	// The first run: started with the trigger, no signal before its first task completed.
	ctx := context.Background()
	id := workflowID(ns, "web")
	resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
	if err != nil || len(resp.Executions) == 0 {
		t.Fatalf("list runs of %s: %v (%d runs)", id, err, len(resp.GetExecutions()))
	}
	run := resp.Executions[0]
	for _, e := range resp.Executions {
		if e.StartTime.AsTime().Before(run.StartTime.AsTime()) {
			run = e
		}
	}
	it := env.tc.GetWorkflowHistory(ctx, id, run.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var in contract.Input
	var seq []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in); err != nil {
				t.Fatalf("decode the first run's input: %v", err)
			}
		}
		seq = append(seq, ev.EventType.String())
		if ev.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			break
		}
	}
	if want := "[WorkflowExecutionStarted WorkflowTaskScheduled WorkflowTaskStarted WorkflowTaskCompleted]"; fmt.Sprint(seq) != want {
		t.Errorf("first run's events up to its first completed task = %v, want %s", seq, want)
	}
	if in.Trigger == nil || len(in.Trigger.Versions) == 0 || in.Trigger.Versions[0].Kind != k8s.KindDeployment || in.Trigger.Versions[0].Name != "web" {
		t.Errorf("first run's input trigger = %+v, want the Deployment's version first", in.Trigger)
	}

	setImage(t, ns, "web", "nginx:1.26")
	d = waitComplete(t, ns, "web")
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:4 %s:r1:0", expectedRSName(d), first); got != want {
		t.Fatalf("after the update replicasets = %s, want %s", got, want)
	}
	if d.Status.Replicas != 4 || d.Status.UpdatedReplicas != 4 || d.Status.AvailableReplicas != 4 || d.Status.ObservedGeneration != d.Generation {
		t.Errorf("status = %+v, want 4/4/4 at generation %d", d.Status, d.Generation)
	}
}

// TestTemplateChangeStatus: a new pod template's status is written by the watcher alone, as it
// sees the change: with no worker running, so no sync can write first, the Deployment shows
// updatedReplicas 0 at once, with everything else as the last sync left it (observedGeneration
// still the old generation, so `kubectl rollout status` waits, and the same conditions). Once a
// worker runs again, the rollout completes as usual.
func TestTemplateChangeStatus(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("25%", "25%")))
	before := waitComplete(t, ns, "web")
	first := expectedRSName(before)

	env.stack.StopProcess("worker")
	workerUp := false
	defer func() {
		if !workerUp {
			if err := startWorker(); err != nil {
				t.Error(err)
			}
		}
	}()
	setImage(t, ns, "web", "nginx:1.26")
	var got *appsv1.Deployment
	eventually(t, 15*time.Second, func() string {
		got = getDeployment(t, ns, "web")
		if got.Status.UpdatedReplicas != 0 {
			return fmt.Sprintf("status.updatedReplicas %d, want 0", got.Status.UpdatedReplicas)
		}
		return ""
	})
	want := before.Status.DeepCopy()
	want.UpdatedReplicas = 0
	if !equality.Semantic.DeepEqual(got.Status, *want) {
		t.Errorf("status after the template change = %+v, want the last sync's with updatedReplicas 0: %+v", got.Status, *want)
	}
	if got.Generation != before.Generation+1 || got.Status.ObservedGeneration != before.Generation {
		t.Errorf("generation %d observed %d, want %d observed %d", got.Generation, got.Status.ObservedGeneration, before.Generation+1, before.Generation)
	}
	if got, want := rsSummary(replicaSets(t, ns)), first+":r1:4"; got != want {
		t.Errorf("replicasets before any sync = %s, want %s", got, want)
	}

	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	workerUp = true
	d := waitComplete(t, ns, "web")
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:4 %s:r1:0", expectedRSName(d), first); got != want {
		t.Fatalf("after the update replicasets = %s, want %s", got, want)
	}
	if d.Status.Replicas != 4 || d.Status.UpdatedReplicas != 4 || d.Status.AvailableReplicas != 4 || d.Status.ObservedGeneration != d.Generation {
		t.Errorf("status = %+v, want 4/4/4 at generation %d", d.Status, d.Generation)
	}
}
