package cost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// historiesDir holds the histories recorded on the real stack (workflows/replay_test.go says
// which tests recorded them, and when).
const historiesDir = "../../workflows/testdata/histories"

// The rollout classes of a recorded run, as classify decides them.
const (
	classRelease   = "release"
	classBlueGreen = "blue-green"
	classTraffic   = "traffic"
	classRollback  = "rollback"
	classSteps     = "canary steps"
	classPause     = "pause and resume"
	classRolling   = "rolling update"
	classIdle      = "idle"
)

var classes = []string{classRelease, classBlueGreen, classTraffic, classRollback, classSteps, classPause, classRolling, classIdle}

// what is what classify reads of a run: the workflow type, the signals, updates and search
// attributes by name, and the activities and local activities by type.
type what struct {
	workflowType string
	names        map[string]bool
}

func readWhat(t *testing.T, h *historypb.History) what {
	t.Helper()
	w := what{names: map[string]bool{}}
	for _, e := range h.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			w.workflowType = e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			w.names["signal:"+e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()] = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			w.names["update:"+e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()] = true
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			for k := range e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
				w.names["attr:"+k] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			w.names["activity:"+e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()] = true
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			m := e.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != markerLocalActivity {
				continue
			}
			// The Go SDK's marker data: {"ActivityID":"1","ActivityType":"Observe",...}.
			for _, p := range m.GetDetails()["data"].GetPayloads() {
				var la struct{ ActivityType string }
				if err := json.Unmarshal(p.GetData(), &la); err != nil {
					t.Fatalf("decode local activity marker %d: %v", e.GetEventId(), err)
				}
				w.names["activity:"+la.ActivityType] = true
			}
		}
	}
	return w
}

func (w what) any(names ...string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return w.names[n] })
}

// classify names a run's rollout class from what it did, the first that applies: the release
// workflow's type; a blue-green sync (SyncBlueGreen); a traffic move (SyncTraffic); a
// rollback (the rollback signal, or RollbackDeployment for kubectl rollout undo and
// auto-rollback); a stepped rollout (a promote or abort update, or RolloutWaitingFor, which
// only a stepped rollout upserts here); pause or resume (the signals, or SetPaused); a rolling
// update (a ReplicaSet created or scaled); and idle, a run that only observed and waited (the
// runs continued as new while the Deployment did not change).
func classify(w what) string {
	switch {
	case w.workflowType == "ReleaseWorkflow":
		return classRelease
	case w.any("activity:SyncBlueGreen"):
		return classBlueGreen
	case w.any("activity:SyncTraffic"):
		return classTraffic
	case w.any("signal:rollback", "activity:RollbackDeployment"):
		return classRollback
	case w.any("update:promote", "update:abort", "attr:RolloutWaitingFor"):
		return classSteps
	case w.any("signal:pause", "signal:resume", "activity:SetPaused"):
		return classPause
	case w.any("activity:CreateReplicaSet", "activity:ScaleUpReplicaSet", "activity:ScaleDownReplicaSet", "activity:UpdateReplicaSet"):
		return classRolling
	}
	return classIdle
}

// median of xs (the mean of the middle two for an even count), 0 for none.
func median(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Ints(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return float64(s[n/2-1]+s[n/2]) / 2
}

// TestRecordedHistories counts every recorded run, checks what must hold of each count, and
// logs the median per rollout class (docs/capacity.md quotes the table):
//
//	go test ./internal/cost/ -run TestRecordedHistories -v
func TestRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no recorded histories in %s", historiesDir)
	}
	byClass := map[string]*sample{}
	// chains are the runs of one recorded Deployment (the file name without its run suffix),
	// summed, and classed by the first class of classes among their runs.
	type chain struct {
		counts Counts
		class  int
	}
	chains := map[string]*chain{}
	var all Counts
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
		r.Close()
		if err != nil {
			t.Fatalf("load %s: %v", f, err)
		}
		got := Count(h)
		all = all.Add(got)
		class := classify(readWhat(t, h))
		t.Run(filepath.Base(f), func(t *testing.T) { checkInvariants(t, h, got) })
		key := strings.TrimSuffix(filepath.Base(f), ".json")
		key = key[:strings.LastIndex(key, "-")]
		ch := chains[key]
		if ch == nil {
			ch = &chain{class: len(classes)}
			chains[key] = ch
		}
		ch.counts = ch.counts.Add(got)
		ch.class = min(ch.class, slices.Index(classes, class))
		s := byClass[class]
		if s == nil {
			s = &sample{}
			byClass[class] = s
		}
		s.events = append(s.events, got.Events)
		s.tasks = append(s.tasks, got.WorkflowTasks)
		s.actions = append(s.actions, got.Total)
		s.heartbeats = append(s.heartbeats, got.HeartbeatEstimate.Heartbeats)
	}

	t.Log("\n" + medians(fmt.Sprintf("medians per run, %d recorded runs", len(files)), byClass))
	perDeployment := map[string]*sample{}
	for _, ch := range chains {
		c := classes[ch.class]
		s := perDeployment[c]
		if s == nil {
			s = &sample{}
			perDeployment[c] = s
		}
		s.events = append(s.events, ch.counts.Events)
		s.tasks = append(s.tasks, ch.counts.WorkflowTasks)
		s.actions = append(s.actions, ch.counts.Total)
		s.heartbeats = append(s.heartbeats, ch.counts.HeartbeatEstimate.Heartbeats)
	}
	t.Log("\n" + medians(fmt.Sprintf("medians per recorded Deployment (all its runs), %d Deployments", len(chains)), perDeployment))
	t.Logf("all runs: %d events, %d workflow tasks, %d actions counted %+v, free %+v, heartbeat estimate %+v",
		all.Events, all.WorkflowTasks, all.Total, all.Actions, all.Free, all.HeartbeatEstimate)
}

// sample is one class's counts, one entry a run or a Deployment.
type sample struct{ events, tasks, actions, heartbeats []int }

// medians is the Markdown table of the median counts per class of byClass, under title.
func medians(title string, byClass map[string]*sample) string {
	var b strings.Builder
	fmt.Fprintln(&b, title)
	fmt.Fprintf(&b, "| Class | N | Events | Workflow tasks | Actions (counted) | Heartbeats (estimate) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|\n")
	for _, c := range classes {
		s := byClass[c]
		if s == nil {
			fmt.Fprintf(&b, "| %s | 0 | | | | |\n", c)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %g | %g | %g | %g |\n", c, len(s.events), median(s.events), median(s.tasks), median(s.actions), median(s.heartbeats))
	}
	return b.String()
}

// checkInvariants checks c against h counted another way.
func checkInvariants(t *testing.T, h *historypb.History, c Counts) {
	t.Helper()
	n := map[enumspb.EventType]int{}
	markers := map[string]int{}
	for _, e := range h.GetEvents() {
		n[e.GetEventType()]++
		if a := e.GetMarkerRecordedEventAttributes(); a != nil {
			markers[a.GetMarkerName()]++
		}
	}
	a := c.Actions
	if c.Total != a.Total() {
		t.Errorf("total: got %d, want the sum of the categories %d", c.Total, a.Total())
	}
	if c.Total < a.ActivityStarts+a.Timers+a.WorkflowStarts {
		t.Errorf("total: got %d, want at least activity starts %d + timers %d + starts %d", c.Total, a.ActivityStarts, a.Timers, a.WorkflowStarts)
	}
	if c.Events != len(h.GetEvents()) {
		t.Errorf("events: got %d, want %d", c.Events, len(h.GetEvents()))
	}
	// Each file is one run: one start, whether a client or continue-as-new started it.
	if a.WorkflowStarts != 1 {
		t.Errorf("workflow starts: got %d, want 1", a.WorkflowStarts)
	}
	if can := n[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW] > 0; can != c.ContinuedAsNew {
		t.Errorf("continued as new: got %t, want %t", c.ContinuedAsNew, can)
	}
	if tasks := n[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] + n[enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED] + n[enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT]; c.WorkflowTasks != tasks {
		t.Errorf("workflow tasks: got %d, want %d", c.WorkflowTasks, tasks)
	}
	if got, want := a.ActivityStarts, n[enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]; got != want {
		t.Errorf("activity starts: got %d, want %d", got, want)
	}
	if got, want := a.Timers, n[enumspb.EVENT_TYPE_TIMER_STARTED]; got != want {
		t.Errorf("timers: got %d, want %d", got, want)
	}
	if got, want := a.Updates, n[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]; got != want {
		t.Errorf("updates: got %d, want %d", got, want)
	}
	// Every signal is billed once; a signal-with-start's signal is in the start.
	signals := n[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
	if a.Signals != signals && a.Signals != signals-1 {
		t.Errorf("signals: got %d, want %d or %d (signal-with-start)", a.Signals, signals, signals-1)
	}
	if got, want := a.SearchAttributeUpserts+c.Free.ChangeVersionUpserts, n[enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]; got != want {
		t.Errorf("search attribute upserts: got %d billed + %d free, want %d in all", a.SearchAttributeUpserts, c.Free.ChangeVersionUpserts, want)
	}
	// Local activities: at least one workflow task when there is one, no more tasks than
	// markers or completed workflow tasks.
	la := markers[markerLocalActivity]
	if c.Free.LocalActivities != la {
		t.Errorf("local activities: got %d, want %d", c.Free.LocalActivities, la)
	}
	if (la > 0) != (a.LocalActivityTasks > 0) || a.LocalActivityTasks > la || a.LocalActivityTasks > n[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] {
		t.Errorf("local activity tasks: got %d for %d markers and %d completed workflow tasks", a.LocalActivityTasks, la, n[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED])
	}
	if c.Free.MemoUpserts != n[enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED] {
		t.Errorf("memo upserts: got %d, want %d", c.Free.MemoUpserts, n[enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED])
	}
	if c.HeartbeatEstimate.Activities > a.ActivityStarts {
		t.Errorf("heartbeat estimate covers %d activities, more than the %d started", c.HeartbeatEstimate.Activities, a.ActivityStarts)
	}
}

// TestOneUpsertPerTask: in every recorded run that took change one-upsert-per-task (its
// Version marker), each workflow task upserted the memo at most once and the search attributes
// at most once (TemporalChangeVersion's own upserts, which GetVersion makes and Cloud does not
// bill, aside). Runs recorded before the change are logged with their worst task.
func TestOneUpsertPerTask(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
		r.Close()
		if err != nil {
			t.Fatalf("load %s: %v", f, err)
		}
		changed := false
		var task int64
		memos, attrs := map[int64]int{}, map[int64]int{}
		for _, e := range h.GetEvents() {
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				task = e.GetEventId()
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				if m := e.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" {
					for _, p := range m.GetDetails()["change-id"].GetPayloads() {
						if string(p.GetData()) == `"one-upsert-per-task"` {
							changed = true
						}
					}
				}
			case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
				memos[task]++
			case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
				fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
				if _, ok := fields["TemporalChangeVersion"]; ok && len(fields) == 1 {
					continue
				}
				attrs[task]++
			}
		}
		worst := func(m map[int64]int) (n int, at int64) {
			for k, v := range m {
				if v > n || (v == n && k < at) {
					n, at = v, k
				}
			}
			return n, at
		}
		mn, mat := worst(memos)
		an, aat := worst(attrs)
		if !changed {
			if mn > 1 || an > 1 {
				t.Logf("%s (before the change): %d memo upserts in the task of event %d, %d search-attribute upserts in the task of event %d", filepath.Base(f), mn, mat, an, aat)
			}
			continue
		}
		checked++
		if mn > 1 {
			t.Errorf("%s: %d memo upserts in the workflow task completed at event %d, want at most 1", filepath.Base(f), mn, mat)
		}
		if an > 1 {
			t.Errorf("%s: %d search-attribute upserts in the workflow task completed at event %d, want at most 1", filepath.Base(f), an, aat)
		}
	}
	if checked == 0 {
		t.Fatal("no recorded history took change one-upsert-per-task")
	}
	t.Logf("%d runs with the change checked", checked)
}
