package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/internal/cost"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// rollbackRuns are the six runs of TestRollback's Deployment (workflows/testdata/histories),
// by the first 8 characters of their run IDs, oldest first: each continued as new from the
// one before.
var rollbackRuns = []string{"7547fb73", "2f9eb96d", "4c3a20a8", "f21fd23e", "27d0212c", "34d8deb0"}

func loadHistory(t *testing.T, run string) *historypb.History {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "workflows", "testdata", "histories", "deployment-e2e-testrollback-3467-web-"+run+".json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// historyClient serves recorded histories by the first 8 characters of the run ID; its latest
// run is latest.
type historyClient struct {
	client.Client
	t      *testing.T
	latest string
	read   []string
}

func (c *historyClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{RunId: c.latest}}}, nil
}

func (c *historyClient) GetWorkflowHistory(_ context.Context, _, runID string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	c.read = append(c.read, runID[:8])
	return &eventIterator{events: loadHistory(c.t, runID[:8]).GetEvents()}
}

type eventIterator struct{ events []*historypb.HistoryEvent }

func (it *eventIterator) HasNext() bool { return len(it.events) > 0 }
func (it *eventIterator) Next() (*historypb.HistoryEvent, error) {
	if len(it.events) == 0 {
		return nil, errors.New("no more events")
	}
	e := it.events[0]
	it.events = it.events[1:]
	return e, nil
}

func TestCountRuns(t *testing.T) {
	tests := []struct {
		name string
		give costOpts
		want []string
	}{
		{name: "latest run", give: costOpts{workflowID: "deployment/e2e/web"}, want: rollbackRuns[5:]},
		{name: "one run by ID", give: costOpts{workflowID: "deployment/e2e/web", runID: "4c3a20a8"}, want: rollbackRuns[2:3]},
		{name: "all runs from the latest", give: costOpts{workflowID: "deployment/e2e/web", allRuns: true}, want: rollbackRuns},
		{name: "all runs from the third", give: costOpts{workflowID: "deployment/e2e/web", runID: "4c3a20a8", allRuns: true}, want: rollbackRuns[:3]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &historyClient{t: t, latest: rollbackRuns[5]}
			runs, err := countRuns(context.Background(), tc, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range runs {
				got = append(got, r.RunID[:8])
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("runs: got %v, want %v", got, tt.want)
			}
		})
	}
}

// rollbackReport is the report of the first two runs of TestRollback's Deployment.
func rollbackReport(t *testing.T) costReport {
	t.Helper()
	tc := &historyClient{t: t, latest: "2f9eb96d-f65b-41f6-8c0e-01c443281d08"}
	runs, err := countRuns(context.Background(), tc, costOpts{workflowID: "deployment/e2e-testrollback-3467/web", allRuns: true})
	if err != nil {
		t.Fatal(err)
	}
	return newCostReport("deployment/e2e-testrollback-3467/web", runs)
}

// TestRenderCost: the first run (signal-with-start, 1 action for both) ran 16 events and 2
// workflow tasks, the first with 2 local activities, 1 AwaitChange and 1 search attribute
// upsert: 4 actions; the second, 11.
func TestRenderCost(t *testing.T) {
	var b bytes.Buffer
	if err := writeCost(&b, rollbackReport(t), false); err != nil {
		t.Fatal(err)
	}
	want := `Workflow deployment/e2e-testrollback-3467/web: 2 runs

RUN                                   EVENTS  WORKFLOW TASKS  ACTIONS  HEARTBEATS (ESTIMATE)
7547fb73-2e48-4814-a2fc-9097ae7da65d  16      2               4        0
2f9eb96d-f65b-41f6-8c0e-01c443281d08  39      5               11       0
total                                 55      7               15       0

Actions counted from the history (Temporal Cloud's rules, https://docs.temporal.io/cloud/actions):
  workflow starts (client, signal-with-start, continue-as-new)  2
  signals                                                       1
  updates accepted                                              0
  activity starts                                               5
  activity retries                                              0
  workflow tasks with local activities                          5
  timers                                                        0
  search attribute upserts                                      2
  child workflows (2 each)                                      0
  signals to other workflows                                    0
  side effects                                                  0
  options updates                                               0
  nexus operations                                              0
  total                                                         15

Free: 9 local activities (billed per workflow task above), 2 memo upserts, 0 TemporalChangeVersion upserts, 0 version markers.
Heartbeats (ESTIMATE, not in the total): 0, from 5 activities with a heartbeat timeout that ran 2.077s in all, one per 0.8 × heartbeat timeout.
Not in history, not counted: queries (1 action each, ` + "`starter status`" + ` included) and rejected updates.
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCostJSON(t *testing.T) {
	r := rollbackReport(t)
	var b bytes.Buffer
	if err := writeCost(&b, r, true); err != nil {
		t.Fatal(err)
	}
	var got costReport
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", b.String(), err)
	}
	if got.Total.Total != r.Total.Total || len(got.Runs) != 2 || got.Runs[1].PreviousRunID == "" {
		t.Errorf("JSON: got %s, want total %d over 2 runs", b.String(), r.Total.Total)
	}
	sum := 0
	for _, run := range got.Runs {
		sum += run.Total
	}
	if sum != got.Total.Total {
		t.Errorf("total: got %d, want the runs' sum %d", got.Total.Total, sum)
	}
}

// TestCostHistoryFiles: --history-file counts saved histories with no server, each as
// cost.Count counts it, and refuses a file that is not a run's whole history.
func TestCostHistoryFiles(t *testing.T) {
	dir := filepath.Join("..", "workflows", "testdata", "histories")
	first := filepath.Join(dir, "deployment-e2e-testrollback-3467-web-"+rollbackRuns[0]+".json")
	second := filepath.Join(dir, "deployment-e2e-testrollback-3467-web-"+rollbackRuns[1]+".json")
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"cost"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("--history-file", first+","+second, "--json")
	if err != nil {
		t.Fatalf("cost --history-file: %v: %s", err, out)
	}
	var r costReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not the JSON report: %v: %s", err, out)
	}
	want := cost.Count(loadHistory(t, rollbackRuns[0])).Total + cost.Count(loadHistory(t, rollbackRuns[1])).Total
	if len(r.Runs) != 2 || r.Total.Total != want || r.Runs[0].RunID != filepath.Base(first) {
		t.Errorf("report: %d runs, first %q, total %d actions; want 2 runs, the first named by its file, %d actions", len(r.Runs), r.Runs[0].RunID, r.Total.Total, want)
	}

	notHistory := filepath.Join(t.TempDir(), "status.json")
	if err := os.WriteFile(notHistory, []byte(`{"events": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("--history-file", notHistory); err == nil || !strings.Contains(err.Error(), "not a whole run's history") {
		t.Errorf("a file with no events: error %v (%s), want one saying it is not a run's history", err, out)
	}
	if _, err := run("--history-file", first, "--all-runs"); err == nil || !strings.Contains(err.Error(), "do not apply") {
		t.Errorf("--history-file with --all-runs: error %v, want a usage error", err)
	}
}
