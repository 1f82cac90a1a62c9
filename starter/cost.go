package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/internal/cost"
)

// costOpts are the flags of `starter cost`.
type costOpts struct {
	workflowID string
	files      []string
	runID      string
	allRuns    bool
	json       bool
}

// runCost is one run's counts.
type runCost struct {
	RunID string `json:"runID"`
	cost.Counts
}

// costReport is what `starter cost` prints: each run counted, oldest first, and their sum.
type costReport struct {
	WorkflowID string      `json:"workflowID"`
	Runs       []runCost   `json:"runs"`
	Total      cost.Counts `json:"total"`
}

// newCostReport sums runs (oldest first) into a report.
func newCostReport(workflowID string, runs []runCost) costReport {
	r := costReport{WorkflowID: workflowID, Runs: runs}
	for _, run := range runs {
		r.Total = r.Total.Add(run.Counts)
	}
	r.Total.Total = r.Total.Actions.Total()
	r.Total.ContinuedAsNew, r.Total.PreviousRunID, r.Total.WorkflowType = false, "", ""
	if len(runs) > 0 {
		r.Total.WorkflowType = runs[0].WorkflowType
	}
	return r
}

// writeCost writes r to w, as JSON or as text for people.
func writeCost(w io.Writer, r costReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err := io.WriteString(w, renderCost(r))
	return err
}

// renderCost is r for people: a row per run and the total, then the actions of all runs by
// category, what cost nothing, and what history cannot count.
//
//	Workflow deployment/shop/web: 2 runs
//
//	RUN      EVENTS  WORKFLOW TASKS  ACTIONS  HEARTBEATS (ESTIMATE)
//	0198...  36      3               8        0
//	...
func renderCost(r costReport) string {
	var b strings.Builder
	runs := "runs"
	if len(r.Runs) == 1 {
		runs = "run"
	}
	fmt.Fprintf(&b, "Workflow %s: %d %s\n\n", r.WorkflowID, len(r.Runs), runs)
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tEVENTS\tWORKFLOW TASKS\tACTIONS\tHEARTBEATS (ESTIMATE)")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", run.RunID, run.Events, run.WorkflowTasks, run.Total, run.HeartbeatEstimate.Heartbeats)
	}
	t := r.Total
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\n", t.Events, t.WorkflowTasks, t.Total, t.HeartbeatEstimate.Heartbeats)
	tw.Flush()

	a := t.Actions
	fmt.Fprintln(&b, "\nActions counted from the history (Temporal Cloud's rules, https://docs.temporal.io/cloud/actions):")
	tw = tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, c := range []struct {
		name string
		n    int
	}{
		{"workflow starts (client, signal-with-start, continue-as-new)", a.WorkflowStarts},
		{"signals", a.Signals},
		{"updates accepted", a.Updates},
		{"activity starts", a.ActivityStarts},
		{"activity retries", a.ActivityRetries},
		{"workflow tasks with local activities", a.LocalActivityTasks},
		{"timers", a.Timers},
		{"search attribute upserts", a.SearchAttributeUpserts},
		{"child workflows (2 each)", a.ChildWorkflows},
		{"signals to other workflows", a.ExternalSignals},
		{"side effects", a.SideEffects},
		{"options updates", a.OptionsUpdates},
		{"nexus operations", a.NexusOperations},
	} {
		fmt.Fprintf(tw, "  %s\t%d\n", c.name, c.n)
	}
	fmt.Fprintf(tw, "  total\t%d\n", t.Total)
	tw.Flush()
	fmt.Fprintf(&b, "\nFree: %d local activities (billed per workflow task above), %d memo upserts, %d TemporalChangeVersion upserts, %d version markers.\n",
		t.Free.LocalActivities, t.Free.MemoUpserts, t.Free.ChangeVersionUpserts, t.Free.VersionMarkers)
	hb := t.HeartbeatEstimate
	fmt.Fprintf(&b, "Heartbeats (ESTIMATE, not in the total): %d, from %d activities with a heartbeat timeout that ran %s in all, one per 0.8 × heartbeat timeout.\n",
		hb.Heartbeats, hb.Activities, hb.Heartbeating.Round(time.Millisecond))
	fmt.Fprintln(&b, "Not in history, not counted: queries (1 action each, `starter status` included) and rejected updates.")
	return b.String()
}

// fetchHistory reads the whole history of one run (runID empty: the latest).
func fetchHistory(ctx context.Context, tc client.Client, workflowID, runID string) (*historypb.History, error) {
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read history of %s run %q: %w", workflowID, runID, err)
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// countRuns counts the run opts names (the latest without --run-id) and, with --all-runs, each
// run before it back to the first, following the run ID each run continued from.
func countRuns(ctx context.Context, tc client.Client, opts costOpts) ([]runCost, error) {
	runID := opts.runID
	if runID == "" {
		d, err := tc.DescribeWorkflowExecution(ctx, opts.workflowID, "")
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", opts.workflowID, err)
		}
		runID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	var runs []runCost
	seen := map[string]bool{}
	for runID != "" && !seen[runID] {
		seen[runID] = true
		h, err := fetchHistory(ctx, tc, opts.workflowID, runID)
		if err != nil {
			return nil, err
		}
		c := cost.Count(h)
		runs = append(runs, runCost{RunID: runID, Counts: c})
		if !opts.allRuns {
			break
		}
		runID = c.PreviousRunID
	}
	// Oldest first.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs, nil
}

// countFiles counts the histories saved in files (`temporal workflow show -o json`), one run
// each, in the order given: no server is asked.
func countFiles(files []string) ([]runCost, error) {
	var runs []runCost
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read history %s: %w", name, err)
		}
		if len(h.GetEvents()) == 0 || h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes() == nil {
			return nil, fmt.Errorf("read history %s: it does not begin with WorkflowExecutionStarted: not a whole run's history", name)
		}
		runs = append(runs, runCost{RunID: filepath.Base(name), Counts: cost.Count(h)})
	}
	return runs, nil
}

func newCostCmd() *cobra.Command {
	var opts costOpts
	cmd := &cobra.Command{
		Use:   "cost --workflow-id ID",
		Short: "Count what a workflow's runs cost on Temporal: events, workflow tasks, billable actions",
		Long: `Read a workflow run's history and count its events, its workflow tasks and its billable actions
as Temporal Cloud counts them (https://docs.temporal.io/cloud/actions): the start, signals,
accepted updates, activity starts and retries, workflow tasks with local activities (one action
each however many they ran), timers, search attribute upserts, child workflows, signals to
other workflows, side effects. Memo upserts and TemporalChangeVersion upserts are free.
Heartbeats leave no event: they are estimated apart, one per 0.8 × the heartbeat timeout of
each activity's run time, and not added to the total. Queries and rejected updates are billed
but leave no event either, and are not counted.

Without --run-id it counts the latest run; --all-runs also counts every run before it, back
through continue-as-new (and cron or retry runs) to the first. --history-file counts histories
saved by 'temporal workflow show -o json' instead, with no server (each file one run, the
runs named by file). docs/capacity.md explains the counts.`,
		Example: `  starter cost --workflow-id deployment/shop/web
  starter cost --workflow-id deployment/shop/web --all-runs
  starter cost --workflow-id deployment/shop/web --run-id 0198c0d4-... --json | jq .total.total
  temporal workflow show --workflow-id deployment/shop/web -o json > web.json && starter cost --history-file web.json`,
		Args: noArgs, ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&opts.workflowID, "workflow-id", "", "the workflow's ID, such as deployment/NAMESPACE/NAME (required without --history-file)")
	cmd.Flags().StringSliceVar(&opts.files, "history-file", nil, "count these saved histories (temporal workflow show -o json; repeat or comma-separate) instead of asking the server")
	cmd.Flags().StringVar(&opts.runID, "run-id", "", "the run to count (default the latest)")
	cmd.Flags().BoolVar(&opts.allRuns, "all-runs", false, "also count each run before it, back through continue-as-new to the first")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the counts as JSON")
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(opts.files) > 0 {
			if opts.runID != "" || opts.allRuns {
				return usageError{errors.New("--history-file counts the files given: --run-id and --all-runs do not apply")}
			}
			runs, err := countFiles(opts.files)
			if err != nil {
				return err
			}
			id := opts.workflowID
			if id == "" {
				id = "(saved histories)"
			}
			return writeCost(cmd.OutOrStdout(), newCostReport(id, runs), opts.json)
		}
		if opts.workflowID == "" {
			return usageError{errors.New("--workflow-id is required")}
		}
		cfg, err := loadConfig(fs)
		if err != nil {
			return err
		}
		tc, err := dial(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		defer tc.Close()
		runs, err := countRuns(cmd.Context(), tc, opts)
		if err != nil {
			return err
		}
		return writeCost(cmd.OutOrStdout(), newCostReport(opts.workflowID, runs), opts.json)
	}
	return cmd
}
