package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
)

// explainSlow says, from the workflow's history, what its workflow tasks did between from
// and to (a command sent at from whose effect came at to): each task's schedule, start and
// completion relative to from, and the local activities and markers it recorded; and when the
// server recorded the command's own signal or update. A slow command is one that waited for a
// workflow task (its own, queued; or one under way, which the signal, update or query waits
// out).
func explainSlow(ctx context.Context, tc client.Client, ns, name string, from, to time.Time) string {
	id := contract.WorkflowID(ns, name)
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
	if err != nil {
		return "list runs: " + err.Error()
	}
	rel := func(t time.Time) string { return fmt.Sprintf("%+dms", t.Sub(from).Milliseconds()) }
	var lines []string
	for _, e := range resp.Executions {
		if st := e.GetStartTime().AsTime(); st.After(to) {
			continue
		}
		if ct := e.GetCloseTime(); ct != nil && ct.AsTime().Before(from.Add(-10*time.Second)) {
			continue
		}
		it := tc.GetWorkflowHistory(ctx, id, e.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var sched, started time.Time
		// task: the line of the last task that completed in the window, which the markers
		// after it (its local activities) are added to; -1 outside the window.
		task, markers := -1, map[string]int{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return "history: " + err.Error()
			}
			t := ev.GetEventTime().AsTime()
			inWindow := t.After(from.Add(-time.Second)) && t.Before(to.Add(time.Second))
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				sched = t
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				started = t
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				task, markers = -1, map[string]int{}
				if t.After(from.Add(-5*time.Second)) && sched.Before(to) {
					lines = append(lines, fmt.Sprintf("  task scheduled %s, started %s, %s %s (ran %s)",
						rel(sched), rel(started), strings.ToLower(strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_WORKFLOW_TASK_")), rel(t), t.Sub(started).Round(time.Millisecond)))
					task = len(lines) - 1
				}
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				if task >= 0 {
					markers[markerName(ev)]++
					line := lines[task]
					if i := strings.Index(line, " | "); i >= 0 {
						line = line[:i]
					}
					var parts []string
					for k, v := range markers {
						parts = append(parts, fmt.Sprintf("%s×%d", k, v))
					}
					sort.Strings(parts)
					lines[task] = line + " | " + strings.Join(parts, " ")
				}
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				if inWindow {
					lines = append(lines, fmt.Sprintf("  signal %s recorded %s", ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName(), rel(t)))
				}
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				if inWindow {
					lines = append(lines, fmt.Sprintf("  update accepted %s", rel(t)))
				}
			}
		}
	}
	if len(lines) == 0 {
		return "  no workflow task in the window"
	}
	return strings.Join(lines, "\n")
}

// markerName is a marker's local activity type, or its marker name.
func markerName(ev *historypb.HistoryEvent) string {
	a := ev.GetMarkerRecordedEventAttributes()
	if p, ok := a.GetDetails()["data"]; ok && p != nil && len(p.Payloads) > 0 {
		// The SDK's local activity marker data is JSON with an ActivityType field.
		s := string(p.Payloads[0].GetData())
		if i := strings.Index(s, `"ActivityType":"`); i >= 0 {
			s = s[i+len(`"ActivityType":"`):]
			if j := strings.IndexByte(s, '"'); j >= 0 {
				return s[:j]
			}
		}
	}
	return a.GetMarkerName()
}
