package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/temporal-rollout/rollout/contract"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayHistories replays histories recorded on the real stack (testdata/histories, made
// with `temporal workflow show -o json`) against the current workflow code. A change to the
// shape of the workflow that breaks them must go behind workflow.GetVersion (docs/versioning.md).
//
// The corpus is the 0.1 baseline, recorded once by the e2e suite with E2E_RECORD_HISTORIES on
// 2026-11-26 (every run of each test's Deployment, with the code of that day's release): RollingUpdate rollouts at four surge and
// unavailability settings (TestRollingUpdate), a Recreate rollout (TestRecreate), pause and
// resume by signal and by kubectl with a template change while paused (TestPause), rollback by
// signal and by kubectl rollout undo (TestRollback), a rollback with the worker SIGKILLed when
// the sync after it bumps the restored revision, the worker running --local-wait 500ms so the
// histories hold local waits too (TestRollbackAppliedOnce), an eager start by the watcher in
// the worker (TestWorkerWatches), stepped rollouts with setWeight, promote and promote full,
// a timed pause across a worker SIGKILL, abort, auto-rollback, an invalid annotation, analysis
// that passes, fails and aborts, and retries a failing query, kubectl pause, resume and undo
// mid-step (TestSteps*), and managed mode: park, steps and promote, pause, resume, rollback,
// opt-in and opt-out mid-rollout, a worker SIGKILL, abort at a step, a progress deadline and
// auto-rollback on it (TestManagedMode, TestManagedModeFaults), Gateway API traffic routing
// with weights, a header route, promote and abort (TestTrafficRouting), and a web analysis that
// passes and one that fails and aborts, with webhook notifications (TestWebAnalysisNotify).
// Recorded after the baseline, with the code that added them: blue-green rollouts (promote and
// scale-down delay, rollback to the warm ReplicaSet by undo and by signal, autoPromotionSeconds
// across a worker SIGKILL, abort, auto-rollback, pre- and post-promotion analysis, an invalid
// annotation: TestBlueGreen) and job analysis steps that pass and fail (TestJobAnalysis); and a
// Deployment with the blue-green annotation rolled out by the 0.1 code, which ignored it
// (testbluegreenbaseline): it replays only behind the "blue-green" change ID.
// Since: the runs of a named cluster's Deployment (input with "cluster":"b"), across a stepped
// rollout's pause with the worker SIGKILLed and with the cluster's kube-apiserver stopped
// (TestTwoClusters, deployment-b-*). On 2026-11-29, with inline-annotated-moves and
// rest-checked-locally: a stepped rollout with two promotes (TestStepsWeights,
// teststepsweights-6079) and rollouts held at rest (TestHeldAtRest, testheldatrest-0043); with
// inline-traffic-moves, routed rollouts whose waits move the route (TestTrafficRouting,
// testtrafficrouting-4349; a full promote with the stable's pods still up,
// TestTrafficStablePodsUp, testtrafficstablepodsup-3024; an abort that gives up a moving wait
// and fences it out, TestTrafficAbortFencesTheWait, testtrafficabortfencesthewait-2095).
func TestReplayHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/histories")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(DeploymentWorkflow, workflow.RegisterOptions{Name: contract.WorkflowType})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join("testdata", "histories")); err != nil {
		t.Fatal(err)
	}
}
