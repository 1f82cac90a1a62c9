package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayHistories replays histories recorded on the real stack (testdata/histories, made
// with `temporal workflow show -o json`) against the current workflow code. A change to the
// shape of the workflow that breaks them must go behind workflow.GetVersion.
//
// Recorded: a RollingUpdate rollout of 10 replicas, pause with a template change while paused,
// a malformed rollback signal, resume, rollback to revision 1, rollback to an unknown revision,
// and a Recreate rollout ending with the Deployment deleted. The *-v2.json histories come from
// workflow version 2 (versionChain): a first run that records the version marker, and the
// continued runs of a 10-replica RollingUpdate (chained scaling moves) and a Recreate rollout,
// which carry the version instead; replaying them with chaining off fails. The *-v3.json
// histories come from version 3 (versionAwait: the wait between two syncs is AwaitChange, in
// the worker): a 10-replica RollingUpdate, a Recreate rollout and its deletion, pause with a
// template change while paused, a binary (non-JSON) and a malformed rollback signal, resume,
// rollback to revision 1 and to an unknown revision, and a run continued from version 2 that
// records its upgrade (upgrade-from-v2); replaying them with AwaitChange off fails. The
// *-v4.json histories come from version 4 (versionLocalAwait: the wait runs first as a local
// activity inside the workflow task), recorded with `make dev`'s stack on 2026-11-23: a
// 10-replica RollingUpdate created and then rolled (its moves synced in the same workflow task),
// pause, a template change while paused, a malformed rollback signal, resume, rollback to
// revision 1 (the wait after it is the activity), rollback to an unknown revision, and a
// Recreate Deployment created, rolled and deleted; replaying them with the local wait off fails.
// The *-v5.json histories come from version 5 (versionSteps), recorded by the e2e suite's
// TestSteps* with E2E_RECORD_HISTORIES on 2026-11-25: setWeight steps with promote from the
// Temporal CLI and promote {"full":true} (updates accepted and completed), a timed pause across
// a worker SIGKILL, abort with a reason, analysis steps that pass, fail (and abort) and retry a
// failing query, auto-rollback on a progress deadline, and kubectl rollout pause, resume and
// undo mid-step; replaying them with the steps off fails (all but the auto-rollback one, which
// has no steps). The *-v6.json histories come from version 6 (versionManaged), recorded by the
// e2e suite's TestManagedMode and TestManagedModeFaults with E2E_RECORD_HISTORIES on
// 2026-11-25, the worker in managed mode beside kube-controller-manager's Deployment
// controller: park on opt-in, a 50% step and promote, pause and resume by signal, a rollback
// by signal, opt-out at rest and mid-rollout (the run ends Released), a worker SIGKILL
// mid-rollout, abort at a step, a progress deadline kept by the workflow and the rollback after
// it, and auto-rollback on it; replaying them with managed mode off fails (15 of 18). The
// *-testrollingupdate-*-v6.json histories, recorded by TestRollingUpdate on 2026-11-25 (full
// mode), are rollouts whose completing status write AwaitChange made itself (its result says
// completed: true) and whose last sync wrote nothing; the workflow code did not change for it.
// The *-worker-watches-eager-*-v7.json histories, recorded by TestWorkerWatches on 2026-11-25,
// are the runs of a Deployment whose workflow the watcher in the worker started eagerly: the
// first run's input carries the trigger (Input.Trigger) and no signal precedes its first
// workflow task; then the rollout of an image update, and the idle run after it.
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
			r.RegisterWorkflowWithOptions(DeploymentWorkflow, workflow.RegisterOptions{Name: WorkflowType})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join("testdata", "histories")); err != nil {
		t.Fatal(err)
	}
}
