package release

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// historyFile is a recorded history's file name: the workflow ID with "/" as "-", and the run
// ID's first 8 characters (e2e's recordHistoriesOf), or a fleet freeze's "freeze-fleet-<n>".
var historyFile = regexp.MustCompile(`^release-(.+)-[0-9a-f]{8}\.json$`)

// TestReplayHistories replays release and fleet freeze histories recorded on the real stack
// (testdata/histories, `temporal workflow show -o json`, written by e2e/release_test.go with
// E2E_RECORD_HISTORIES=$PWD/release/testdata/histories) against the current code: waves with a
// bake, a rollback after a progress deadline, two approvals, an invalid release, a fleet
// freeze and thaw and a freeze window. A change to their shape must go behind
// workflow.GetVersion (docs/versioning.md). A release checks its workflow ID, so each replays
// under release/<name>, from its file name.
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
			r.RegisterWorkflowWithOptions(ReleaseWorkflow, workflow.RegisterOptions{Name: WorkflowType})
			r.RegisterWorkflowWithOptions(FleetFreezeWorkflow, workflow.RegisterOptions{Name: FleetFreezeType})
			b, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			h, err := client.HistoryFromJSON(b, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("read %s: %v", f, err)
			}
			id := FleetFreezeID
			if m := historyFile.FindStringSubmatch(filepath.Base(f)); m != nil {
				id = WorkflowID(m[1])
			}
			if err := r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: id, RunID: "replay"},
			}); err != nil {
				t.Errorf("replay %s as %s: %v", f, id, err)
			}
		})
	}
}
