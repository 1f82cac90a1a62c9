//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// withSteps sets the steps annotation.
func withSteps(steps string) deployOpt {
	return withAnnotation(k8s.StepsAnnotation, steps)
}

func withAnnotation(k, v string) deployOpt {
	return func(d *appsv1.Deployment) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[k] = v
	}
}

// sizes renders the ReplicaSets as "image=replicas" in revision order, newest first, keyed by
// the image so a test reads against what it set.
func sizes(t *testing.T, ns string) string {
	t.Helper()
	var parts []string
	for _, rs := range replicaSets(t, ns) {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas, rs.Status.AvailableReplicas))
	}
	return strings.Join(parts, " ")
}

// waitSteps waits until the stepped rollout waits for `waiting` at 1-based step `step`, with
// the ReplicaSets at `want` (sizes' format).
func waitSteps(t *testing.T, ns, name string, step int, waiting, want string) contract.Status {
	t.Helper()
	var st contract.Status
	eventually(t, 90*time.Second, func() string {
		st = queryStatus(t, ns, name)
		if st.Steps == nil || st.Steps.Step != step || st.Steps.WaitingFor != waiting {
			return fmt.Sprintf("steps %+v, want step %d waiting for %s", st.Steps, step, waiting)
		}
		if got := sizes(t, ns); got != want {
			return fmt.Sprintf("replicasets %s, want %s", got, want)
		}
		return ""
	})
	return st
}

// updateCLI runs a Workflow Update with the plain Temporal CLI and returns its output and error.
func updateCLI(ns, name, update string, input ...string) (string, error) {
	args := []string{"workflow", "update", "execute", "--workflow-id", workflowID(ns, name), "--name", update}
	if len(input) > 0 {
		args = append(args, "--input", input[0])
	}
	return temporalCLIErr(args...)
}

func starterCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.bin, "starter"), append(args, "--temporal-address", env.stack.TemporalAddress, "--log-format", "text")...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hasRun reports whether a workflow list query finds the Deployment's workflow.
func listed(t *testing.T, query, id string) string {
	t.Helper()
	out := temporalCLI(t, "workflow", "list", "--query", query, "-o", "json")
	if !strings.Contains(out, id) {
		return fmt.Sprintf("workflow list --query '%s' does not list %s", query, id)
	}
	return ""
}

// TestStepsWeights rolls a 10-replica Deployment out by steps: each setWeight brings the new
// ReplicaSet to exactly its share and the old one to the rest within the bounds; each pause
// holds (kubectl rollout status shows the count); promote from the plain Temporal CLI goes on
// a step, the search attribute finds the Deployment waiting for promotion, and `starter promote
// --full` skips the rest.
func TestStepsWeights(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	steps := `[{"setWeight":20},{"pause":{}},{"setWeight":50},{"pause":{}},{"setWeight":80},{"pause":{}}]`
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(steps)))
	waitComplete(t, ns, "web")
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")

	st := waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=2/2 nginx:1.25=8/8")
	if st.Steps.Weight != 20 || !strings.Contains(st.Steps.Message, "Step 2 of 6 (pause until promoted)") {
		t.Errorf("status steps = %+v, want weight 20 at step 2", st.Steps)
	}
	d := getDeployment(t, ns, "web")
	if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.CanaryPausedReason || !strings.Contains(c.Message, "Step 2 of 6") {
		t.Errorf("Progressing condition = %+v, want CanaryPaused naming step 2", c)
	}
	out, err := runKubectl("--kubeconfig", env.stack.Kubeconfig, "rollout", "status", "deployment/web", "-n", ns, "--timeout=2s")
	if err == nil || !strings.Contains(out, "2 out of 10 new replicas have been updated") {
		t.Errorf("kubectl rollout status at the pause: %v\n%s\nwant it waiting at 2 out of 10", err, out)
	}
	id := workflowID(ns, "web")
	eventually(t, 30*time.Second, func() string {
		return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrWaitingFor, contract.WaitingForPromote, id), id)
	})
	// A second while paused: nothing moves.
	time.Sleep(2 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.26=2/2 nginx:1.25=8/8" {
		t.Errorf("during the pause: %s, want unchanged", got)
	}

	out, err = updateCLI(ns, "web", contract.UpdatePromote)
	if err != nil {
		t.Fatalf("temporal workflow update execute --name promote: %v\n%s", err, out)
	}
	waitSteps(t, ns, "web", 4, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")

	out, err = starterCmd(t, "promote", "--full", ns+"/web")
	if err != nil || !strings.Contains(out, `"full": true`) {
		show, _ := temporalCLIErr("workflow", "show", "--workflow-id", id)
		t.Logf("starter promote --full: %v\n%s\nhistory:\n%s", err, out, show)
		t.Fatalf("starter promote --full: %v\n%s", err, out)
	}
	waitComplete(t, ns, "web")
	obs.stop()
	if got := sizes(t, ns); got != "nginx:1.26=10/10 nginx:1.25=0/0" {
		t.Errorf("after promote --full: %s, want all on the new template", got)
	}
	// Nothing left to promote.
	eventually(t, 30*time.Second, func() string {
		out, err := updateCLI(ns, "web", contract.UpdatePromote)
		if err == nil || !strings.Contains(out, "no stepped rollout is in progress") {
			return fmt.Sprintf("promote after completion: %v %s, want rejected", err, out)
		}
		return ""
	})
	for _, want := range []string{"RolloutStepsStarted: Rolling out template", "RolloutStepReached: Step 1 of 6 (setWeight 20) reached",
		"RolloutPromoted: Promoted past step 2 of 6", "RolloutPromoted: Promoted in full at step 4 of 6"} {
		waitEvent(t, ns, "web", want)
	}
}

// TestStepsScaledAtAPause: `kubectl scale` while a step holds at 30%: the step's shares apply
// at the new size (20: 6 new, 14 old; 4: 2 and 2), the step still holds, and promote finishes
// at the last size. On the way up, at most replicas + maxSurge pods (25) and never fewer than
// the 10 ready before.
func TestStepsScaledAtAPause(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":30},{"pause":{}}]`)))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=3/3 nginx:1.25=7/7")

	obs := observe(t, ns, 25, 10)
	if out, err := runKubectl("scale", "deployment/web", "-n", ns, "--replicas=20"); err != nil {
		t.Fatalf("kubectl scale --replicas=20: %v\n%s", err, out)
	}
	st := waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=6/6 nginx:1.25=14/14")
	obs.stop()
	if st.Steps.Weight != 30 {
		t.Errorf("status steps = %+v, want weight 30 at step 2", st.Steps)
	}
	if out, err := runKubectl("scale", "deployment/web", "-n", ns, "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale --replicas=4: %v\n%s", err, out)
	}
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=2/2 nginx:1.25=2/2")

	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	d := waitComplete(t, ns, "web")
	if got := sizes(t, ns); got != "nginx:1.26=4/4 nginx:1.25=0/0" {
		t.Errorf("after promote: %s, want nginx:1.26=4/4 nginx:1.25=0/0", got)
	}
	if st := d.Status; st.Replicas != 4 || st.UpdatedReplicas != 4 || st.AvailableReplicas != 4 || st.ObservedGeneration != d.Generation {
		t.Errorf("status %+v at generation %d, want 4/4/4 observed", st, d.Generation)
	}
}

// TestStepsTimedPauseSurvivesWorkerKill: a timed pause is a durable timer; the worker is
// SIGKILLed during it and restarted, and the rollout goes on when the pause ends, not later
// and not from the start.
func TestStepsTimedPauseSurvivesWorkerKill(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":30},{"pause":{"duration":"20s"}}]`)))
	waitComplete(t, ns, "web")
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")
	st := waitSteps(t, ns, "web", 2, contract.WaitingForTimer, "nginx:1.26=3/3 nginx:1.25=7/7")
	until := *st.Steps.PauseUntil
	env.stack.KillProcess("worker")
	time.Sleep(5 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.26=3/3 nginx:1.25=7/7" {
		t.Errorf("worker down during the pause: %s, want unchanged", got)
	}
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	if st := queryStatus(t, ns, "web"); st.Steps == nil || st.Steps.PauseUntil == nil || !st.Steps.PauseUntil.Equal(until) {
		t.Errorf("after the restart: steps %+v, want the same pause end %s", st.Steps, until)
	}
	// The new ReplicaSet grows past its step only once the pause ended.
	eventually(t, 60*time.Second, func() string {
		for _, rs := range replicaSets(t, ns) {
			if rs.Spec.Template.Spec.Containers[0].Image == "nginx:1.26" && *rs.Spec.Replicas > 3 {
				return ""
			}
		}
		return "still at the step: " + sizes(t, ns)
	})
	moved := time.Now()
	if moved.Before(until) {
		t.Errorf("moved on at %s, before the pause ended at %s", moved.Format(time.RFC3339Nano), until)
	}
	if late := moved.Sub(until); late > 15*time.Second {
		t.Errorf("moved on %s after the pause ended; want only the remaining time waited", late)
	}
	waitComplete(t, ns, "web")
	obs.stop()
}

// TestStepsAbort: abort (plain Temporal CLI, with a reason) mid-step returns the Deployment to
// the last revision that completed at full speed, skipping the steps, restores its template,
// and records why: a Warning event, the status query, and RolloutOutcome "Aborted".
func TestStepsAbort(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":40},{"pause":{}},{"setWeight":70},{"pause":{}}]`)))
	waitComplete(t, ns, "web")
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=4/4 nginx:1.25=6/6")

	// Malformed payloads are rejected with a clear error and change nothing.
	if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reson":"typo"}`); err == nil || !strings.Contains(out, `unknown field`) || !strings.Contains(out, `reson`) {
		t.Errorf("abort with an unknown field: %v\n%s\nwant rejected naming the field", err, out)
	}
	out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"error rate too high"}`)
	if err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	d := waitComplete(t, ns, "web")
	obs.stop()
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Errorf("template after abort = %s, want nginx:1.25 restored", got)
	}
	if got := sizes(t, ns); got != "nginx:1.25=10/10 nginx:1.26=0/0" {
		t.Errorf("after abort: %s, want the stable ReplicaSet back at 10", got)
	}
	if n := len(replicaSets(t, ns)); n != 2 {
		t.Errorf("after abort: %d ReplicaSets, want 2 (the stable one reused)", n)
	}
	waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: aborted by user: error rate too high; returning to revision 1")
	if st := queryStatus(t, ns, "web"); !strings.Contains(st.AbortReason, "error rate too high") {
		t.Errorf("status abortReason = %q, want the reason", st.AbortReason)
	}
	id := workflowID(ns, "web")
	eventually(t, 30*time.Second, func() string {
		return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrOutcome, contract.OutcomeAborted, id), id)
	})
	// Nothing is rolling out now: abort is rejected.
	if out, err := updateCLI(ns, "web", contract.UpdateAbort); err == nil || !strings.Contains(out, "nothing to abort") {
		t.Errorf("abort at rest: %v\n%s\nwant rejected", err, out)
	}
}

// TestStepsAutoRollback: a rollout past its progress deadline on a Deployment with
// temporal-rollout.io/auto-rollback "true" is aborted back to the stable revision.
func TestStepsAutoRollback(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), progressDeadline(5), withAnnotation(k8s.AutoRollbackAnnotation, "true")))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:404")
	waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: progress deadline exceeded")
	d := waitComplete(t, ns, "web")
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Errorf("template after auto-rollback = %s, want nginx:1.25", got)
	}
	if got := sizes(t, ns); got != "nginx:1.25=4/4 nginx:404=0/0" {
		t.Errorf("after auto-rollback: %s", got)
	}
	id := workflowID(ns, "web")
	eventually(t, 30*time.Second, func() string {
		return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrOutcome, contract.OutcomeAborted, id), id)
	})
}

// TestStepsInvalidAnnotation: an invalid steps annotation gets a Warning event naming the
// problem and the Deployment is left as it is; fixed, the rollout goes on.
func TestStepsInvalidAnnotation(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), withSteps(`[{"setWeight":50}]`)))
	waitComplete(t, ns, "web")
	update(t, ns, "web", func(d *appsv1.Deployment) {
		d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":150},{"pause":{"duration":"soon"}},{"setWeigth":20}]`
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
	})
	waitEvent(t, ns, "web", "InvalidRolloutAnnotation: Rollout held: invalid annotation: temporal-rollout.io/steps")
	var warning string
	for _, e := range events(t, ns, "web") {
		if strings.HasPrefix(e, "InvalidRolloutAnnotation") {
			warning = e
		}
	}
	for _, want := range []string{"step 1 (setWeight): setWeight 150 is not between 0 and 100", `step 2: duration "soon"`, `step 3: json: unknown field "setWeigth"`} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q does not name %q", warning, want)
		}
	}
	time.Sleep(2 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.25=4/4" {
		t.Errorf("with an invalid annotation: %s, want the Deployment left as it is", got)
	}
	if st := queryStatus(t, ns, "web"); !strings.Contains(st.AnnotationError, "setWeight 150") {
		t.Errorf("status annotationError = %q", st.AnnotationError)
	}
	// Fixed: the worker sees the annotation change and the rollout goes on, unprompted.
	update(t, ns, "web", func(d *appsv1.Deployment) { d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50}]` })
	waitComplete(t, ns, "web")
	if got := sizes(t, ns); got != "nginx:1.26=4/4 nginx:1.25=0/0" {
		t.Errorf("after the fix: %s", got)
	}
}

// TestStepsAnalysis runs analysis steps against a real Prometheus scraping a target the test
// controls: a passing analysis moves on, a failing one aborts, and a query error (the query
// matches two series until one goes) is retried and is not a failed measurement.
func TestStepsAnalysis(t *testing.T) {
	if env.prom == nil {
		t.Fatal("no Prometheus in the suite")
	}
	analysis := func(query string, count int) string {
		return fmt.Sprintf(`[{"setWeight":50},{"analysis":{"query":%q,"min":0.95,"interval":"1s","count":%d}}]`, query, count)
	}
	run := func(t *testing.T, steps string) string {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), withSteps(steps)))
		waitComplete(t, ns, "web")
		setImage(t, ns, "web", "nginx:1.26")
		return ns
	}

	t.Run("passes", func(t *testing.T) {
		env.prom.set(`rollout_test_success_rate{case="pass"}`, 0.99)
		ns := run(t, analysis(`rollout_test_success_rate{case="pass"}`, 3))
		d := waitComplete(t, ns, "web")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
			t.Errorf("image = %s, want nginx:1.26", got)
		}
		waitEvent(t, ns, "web", "AnalysisSuccessful: Step 2 of 2")
		waitEvent(t, ns, "web", "3 measurements, 0 failed")
		measured := countMeasurements(t, workflowID(ns, "web"))
		if measured != 3 {
			t.Errorf("MeasureAnalysis activities in the history = %d, want 3", measured)
		}
	})

	t.Run("fails and aborts", func(t *testing.T) {
		env.prom.set(`rollout_test_success_rate{case="fail"}`, 0.5)
		ns := run(t, analysis(`rollout_test_success_rate{case="fail"}`, 3))
		waitEvent(t, ns, "web", "AnalysisFailed: Step 2 of 2")
		waitEvent(t, ns, "web", "rollout_test_success_rate{case=\"fail\"} = 0.5, below min 0.95")
		waitEvent(t, ns, "web", "RolloutAborted")
		d := waitComplete(t, ns, "web")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
			t.Errorf("image after a failed analysis = %s, want nginx:1.25", got)
		}
		if st := queryStatus(t, ns, "web"); !strings.Contains(st.AbortReason, "analysis failed at step 2") {
			t.Errorf("abortReason = %q", st.AbortReason)
		}
	})

	t.Run("query error is retried", func(t *testing.T) {
		env.prom.set(`rollout_test_success_rate{case="retry",replica="a"}`, 0.99)
		env.prom.set(`rollout_test_success_rate{case="retry",replica="b"}`, 0.99)
		time.Sleep(2 * time.Second) // both series scraped
		ns := run(t, analysis(`rollout_test_success_rate{case="retry"}`, 2))
		eventually(t, 60*time.Second, func() string {
			st := queryStatus(t, ns, "web")
			if st.Steps == nil || st.Steps.WaitingFor != contract.WaitingForAnalysis {
				return fmt.Sprintf("steps %+v, want the analysis running", st.Steps)
			}
			return ""
		})
		// The query matches two series: an error, retried; no measurement is taken.
		time.Sleep(4 * time.Second)
		if st := queryStatus(t, ns, "web"); st.Steps == nil || st.Steps.Analysis == nil || st.Steps.Analysis.Taken != 0 || st.Steps.Analysis.Failures != 0 {
			t.Errorf("while the query fails: steps %+v, want the analysis running with no measurement", st.Steps)
		}
		env.prom.remove(`rollout_test_success_rate{case="retry",replica="b"}`)
		d := waitComplete(t, ns, "web")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
			t.Errorf("image = %s, want nginx:1.26", got)
		}
		waitEvent(t, ns, "web", "2 measurements, 0 failed")
	})
}

// recordHistories, with E2E_RECORD_HISTORIES=<dir>, writes every run of the Deployment's
// workflow as `temporal workflow show -o json` would, for the replay test's testdata.
func recordHistories(t *testing.T, ns, name string) { recordHistoriesOf(t, workflowID(ns, name)) }

// recordHistoriesOf is recordHistories of the workflow with that ID.
func recordHistoriesOf(t *testing.T, id string) {
	dir := os.Getenv("E2E_RECORD_HISTORIES")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		resp, err := env.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
		if err != nil {
			t.Errorf("list runs of %s: %v", id, err)
			return
		}
		for _, e := range resp.Executions {
			if e.HistoryLength < 3 {
				// A run just continued as new, with nothing but its start event yet: the
				// replayer takes no such history.
				continue
			}
			out, err := temporalCLIErr("workflow", "show", "--workflow-id", id, "--run-id", e.Execution.RunId, "-o", "json")
			if err != nil {
				t.Errorf("show %s: %v", id, err)
				continue
			}
			file := filepath.Join(dir, fmt.Sprintf("%s-%s.json", strings.ReplaceAll(id, "/", "-"), e.Execution.RunId[:8]))
			if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
				t.Error(err)
			}
		}
	})
}

// eachRunEvent calls fn with every event of every run of the workflow with that ID, run by run
// in the order they started. The runs are the ones visibility lists and, read from the
// histories themselves, the latest run's chain back through continue-as-new: visibility can
// lag a run that just started by seconds.
func eachRunEvent(t *testing.T, id string, fn func(ev *historypb.HistoryEvent)) {
	t.Helper()
	ctx := context.Background()
	runs := map[string][]*historypb.HistoryEvent{}
	read := func(runID string) []*historypb.HistoryEvent {
		if evs, ok := runs[runID]; ok {
			return evs
		}
		var evs []*historypb.HistoryEvent
		it := env.tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s run %s: %v", id, runID, err)
			}
			evs = append(evs, ev)
		}
		runs[runID] = evs
		return evs
	}
	resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
	if err != nil {
		t.Fatalf("list runs of %s: %v", id, err)
	}
	for _, e := range resp.Executions {
		read(e.Execution.RunId)
	}
	desc, err := env.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	for runID := desc.WorkflowExecutionInfo.Execution.RunId; runID != ""; {
		evs := read(runID)
		runID = ""
		if len(evs) > 0 {
			runID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		}
	}
	ordered := make([][]*historypb.HistoryEvent, 0, len(runs))
	for _, evs := range runs {
		if len(evs) > 0 {
			ordered = append(ordered, evs)
		}
	}
	sort.Slice(ordered, func(i, j int) bool {
		return ordered[i][0].GetEventTime().AsTime().Before(ordered[j][0].GetEventTime().AsTime())
	})
	for _, evs := range ordered {
		for _, ev := range evs {
			fn(ev)
		}
	}
}

// versionMarkers counts the version markers of a change ID in every run of the workflow.
func versionMarkers(t *testing.T, id, change string) int {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	n := 0
	eachRunEvent(t, id, func(ev *historypb.HistoryEvent) {
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "Version" {
			var got string
			if p := m.GetDetails()["change-id"]; p != nil && dc.FromPayloads(p, &got) == nil && got == change {
				n++
			}
		}
	})
	return n
}

// waitMoves lists the scale moves AwaitChange made itself (AwaitResult.Moves) in every run of
// the workflow, as its completed activities' results record them.
func waitMoves(t *testing.T, id string) []activities.Move {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	awaits := map[int64]bool{}
	var moves []activities.Move
	eachRunEvent(t, id, func(ev *historypb.HistoryEvent) {
		if ev.GetWorkflowExecutionStartedEventAttributes() != nil {
			clear(awaits) // event IDs start over in each run
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "AwaitChange" {
			awaits[ev.GetEventId()] = true
		}
		if c := ev.GetActivityTaskCompletedEventAttributes(); c != nil && awaits[c.GetScheduledEventId()] {
			var res activities.AwaitResult
			if err := dc.FromPayloads(c.GetResult(), &res); err != nil {
				t.Fatalf("AwaitChange result in %s: %v", id, err)
			}
			moves = append(moves, res.Moves...)
		}
	})
	return moves
}

// countMeasurements counts the MeasureAnalysis activities scheduled in every run of the
// workflow (each measurement is its own activity in the history, its result the value and
// verdict).
func countMeasurements(t *testing.T, id string) int {
	t.Helper()
	n := 0
	eachRunEvent(t, id, func(ev *historypb.HistoryEvent) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "MeasureAnalysis" {
			n++
		}
	})
	return n
}

// TestStepsKubectl: kubectl rollout pause and resume hold and release a stepped rollout (a
// pause step waits on), and kubectl rollout undo mid-step goes back to the stable revision at
// full speed, skipping the steps.
func TestStepsKubectl(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":30},{"pause":{}},{"setWeight":60},{"pause":{}}]`)))
	waitComplete(t, ns, "web")
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=3/3 nginx:1.25=7/7")

	kubectl(t, "rollout", "pause", "deployment/web", "-n", ns)
	eventually(t, 30*time.Second, func() string {
		if st := queryStatus(t, ns, "web"); !st.Paused {
			return "status not paused yet"
		}
		return ""
	})
	// Paused: promote moves the step on, but nothing scales until resume.
	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote while paused: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.26=3/3 nginx:1.25=7/7" {
		t.Errorf("paused by kubectl: %s, want unchanged", got)
	}
	kubectl(t, "rollout", "resume", "deployment/web", "-n", ns)
	waitSteps(t, ns, "web", 4, contract.WaitingForPromote, "nginx:1.26=6/6 nginx:1.25=4/4")

	kubectl(t, "rollout", "undo", "deployment/web", "-n", ns)
	d := waitComplete(t, ns, "web")
	obs.stop()
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Errorf("image after undo = %s, want nginx:1.25", got)
	}
	if got := sizes(t, ns); got != "nginx:1.25=10/10 nginx:1.26=0/0" {
		t.Errorf("after undo: %s", got)
	}
	if st := queryStatus(t, ns, "web"); st.Steps != nil {
		t.Errorf("after undo: steps %+v, want none (the stable template skips them)", st.Steps)
	}
}

// TestStepsEveryStepHonoured (issue 23, defect 1): a weight that covers every replica does not
// end the steps. One replica at setWeight 20 keeps a stable pod beside the canary (a surge
// pod) and waits for promote; a pause after setWeight 100 still holds with every pod new.
func TestStepsEveryStepHonoured(t *testing.T) {
	tests := []struct {
		name       string
		replicas   int32
		steps      string
		wantHeld   string
		wantWeight int32
	}{
		{name: "one replica at 20", replicas: 1, steps: `[{"setWeight":20},{"pause":{}}]`,
			wantHeld: "nginx:1.26=1/1 nginx:1.25=1/1", wantWeight: 20},
		{name: "a pause after 100", replicas: 4, steps: `[{"setWeight":100},{"pause":{}}]`,
			wantHeld: "nginx:1.26=4/4 nginx:1.25=0/0", wantWeight: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			create(t, newDeployment(ns, "web", tt.replicas, "nginx:1.25", rolling("1", "0"), withSteps(tt.steps)))
			waitComplete(t, ns, "web")
			setImage(t, ns, "web", "nginx:1.26")
			st := waitSteps(t, ns, "web", 2, contract.WaitingForPromote, tt.wantHeld)
			if st.Steps.Weight != tt.wantWeight || st.Phase == string(k8s.PhaseComplete) {
				t.Errorf("held: phase %s, steps %+v; want not Complete, weight %d", st.Phase, st.Steps, tt.wantWeight)
			}
			// It stays held.
			time.Sleep(2 * time.Second)
			if got := sizes(t, ns); got != tt.wantHeld {
				t.Errorf("during the pause: %s, want %s", got, tt.wantHeld)
			}
			d := getDeployment(t, ns, "web")
			if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.CanaryPausedReason {
				t.Errorf("Progressing condition = %+v, want CanaryPaused", c)
			}
			if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
				t.Fatalf("promote: %v\n%s", err, out)
			}
			waitComplete(t, ns, "web")
			if got, want := sizes(t, ns), fmt.Sprintf("nginx:1.26=%d/%d nginx:1.25=0/0", tt.replicas, tt.replicas); got != want {
				t.Errorf("after promote: %s, want %s", got, want)
			}
		})
	}
}
