// Package cost counts what one workflow run costs on Temporal, from its history: the events,
// the workflow tasks, and the billable actions as Temporal Cloud counts them
// (https://docs.temporal.io/cloud/actions). It counts; it does not estimate, except for the one
// figure that history cannot hold (activity heartbeats), which it reports apart and labelled.
//
// Count is pure: it takes a history (as client.GetWorkflowHistory returns it, or as
// client.HistoryFromJSON loads `temporal workflow show -o json`) and does no I/O.
package cost

import (
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Marker names the Go SDK records (internal_event_handlers.go).
const (
	markerLocalActivity     = "LocalActivity"
	markerSideEffect        = "SideEffect"
	markerMutableSideEffect = "MutableSideEffect"
	markerVersion           = "Version"
)

// changeVersionAttr is the search attribute workflow.GetVersion upserts; Cloud does not bill
// its upserts.
const changeVersionAttr = "TemporalChangeVersion"

// HeartbeatThrottle is the share of the heartbeat timeout the SDKs wait between two heartbeats
// they send to the server: 0.8, so an activity with a 20s heartbeat timeout reaches the server
// at most about once every 16s however often it calls RecordHeartbeat.
const HeartbeatThrottle = 0.8

// Actions are one run's billable actions by Temporal Cloud's rules
// (https://docs.temporal.io/cloud/actions), each category apart. Every field is counted from
// events in the history. Two billed kinds never appear in a history and are not here: queries
// (each query a worker answers is one action, `starter status` included) and rejected updates;
// heartbeats are estimated apart (Counts.HeartbeatEstimate).
type Actions struct {
	// WorkflowStarts is 1 for the run's WorkflowExecutionStarted, however it started: a client
	// start, signal-with-start, continue-as-new, a cron or a retry run. (A run that continues
	// as new pays for the next run's start in the next run's history, so a chain of N runs
	// counts N starts.)
	WorkflowStarts int `json:"workflowStarts"`
	// Signals is each WorkflowExecutionSignaled, except the signal of a signal-with-start
	// that started this run: Cloud bills a signal-with-start as one action in all, and
	// WorkflowStarts has it.
	Signals int `json:"signals"`
	// Updates is each WorkflowExecutionUpdateAccepted (a rejected update is billed too but
	// leaves no event).
	Updates int `json:"updates"`
	// ActivityStarts is each ActivityTaskScheduled: the first attempt.
	ActivityStarts int `json:"activityStarts"`
	// ActivityRetries is the attempts after the first, read from the attempt of each
	// activity's ActivityTaskStarted (written when the activity closes, with its last
	// attempt): attempt 4 is 3 retries. An activity still retrying when the history was read
	// shows no attempt yet and counts no retries.
	ActivityRetries int `json:"activityRetries"`
	// LocalActivityTasks is each workflow task that recorded at least one LocalActivity
	// marker: all local activities of one workflow task are one action. The markers are
	// grouped by the WorkflowTaskCompleted they follow, so 7 local activities over 3 workflow
	// tasks are 3 actions.
	LocalActivityTasks int `json:"localActivityTasks"`
	// Timers is each TimerStarted, the SDK's implicit timers (AwaitWithTimeout) included.
	Timers int `json:"timers"`
	// SearchAttributeUpserts is each UpsertWorkflowSearchAttributes, however many attributes
	// it sets, except those that set only TemporalChangeVersion (workflow.GetVersion's,
	// free; see FreeChangeVersionUpserts).
	SearchAttributeUpserts int `json:"searchAttributeUpserts"`
	// ChildWorkflows is 2 for each StartChildWorkflowExecutionInitiated: Cloud bills the
	// start and the child's execution.
	ChildWorkflows int `json:"childWorkflows"`
	// ExternalSignals is each SignalExternalWorkflowExecutionInitiated.
	ExternalSignals int `json:"externalSignals"`
	// SideEffects is each SideEffect or MutableSideEffect marker (the SDK records a mutable
	// side effect only when its value changes, which is when Cloud bills it).
	SideEffects int `json:"sideEffects"`
	// OptionsUpdates is each WorkflowExecutionOptionsUpdated.
	OptionsUpdates int `json:"optionsUpdates"`
	// NexusOperations is each NexusOperationScheduled and NexusOperationCancelRequested.
	NexusOperations int `json:"nexusOperations"`
}

// Total is the sum of the categories.
func (a Actions) Total() int {
	return a.WorkflowStarts + a.Signals + a.Updates + a.ActivityStarts + a.ActivityRetries +
		a.LocalActivityTasks + a.Timers + a.SearchAttributeUpserts + a.ChildWorkflows +
		a.ExternalSignals + a.SideEffects + a.OptionsUpdates + a.NexusOperations
}

// Add is a + b, category by category.
func (a Actions) Add(b Actions) Actions {
	return Actions{
		WorkflowStarts:         a.WorkflowStarts + b.WorkflowStarts,
		Signals:                a.Signals + b.Signals,
		Updates:                a.Updates + b.Updates,
		ActivityStarts:         a.ActivityStarts + b.ActivityStarts,
		ActivityRetries:        a.ActivityRetries + b.ActivityRetries,
		LocalActivityTasks:     a.LocalActivityTasks + b.LocalActivityTasks,
		Timers:                 a.Timers + b.Timers,
		SearchAttributeUpserts: a.SearchAttributeUpserts + b.SearchAttributeUpserts,
		ChildWorkflows:         a.ChildWorkflows + b.ChildWorkflows,
		ExternalSignals:        a.ExternalSignals + b.ExternalSignals,
		SideEffects:            a.SideEffects + b.SideEffects,
		OptionsUpdates:         a.OptionsUpdates + b.OptionsUpdates,
		NexusOperations:        a.NexusOperations + b.NexusOperations,
	}
}

// Free are events that look billable and are not, counted so a reader can see them.
type Free struct {
	// LocalActivities is each LocalActivity marker (billed per workflow task, not each).
	LocalActivities int `json:"localActivities"`
	// MemoUpserts is each WorkflowPropertiesModified (workflow.UpsertMemo).
	MemoUpserts int `json:"memoUpserts"`
	// ChangeVersionUpserts is each UpsertWorkflowSearchAttributes that sets only
	// TemporalChangeVersion.
	ChangeVersionUpserts int `json:"changeVersionUpserts"`
	// VersionMarkers is each Version marker of workflow.GetVersion (Cloud's page names no
	// action for them).
	VersionMarkers int `json:"versionMarkers"`
}

// Add is f + g, field by field.
func (f Free) Add(g Free) Free {
	return Free{
		LocalActivities:      f.LocalActivities + g.LocalActivities,
		MemoUpserts:          f.MemoUpserts + g.MemoUpserts,
		ChangeVersionUpserts: f.ChangeVersionUpserts + g.ChangeVersionUpserts,
		VersionMarkers:       f.VersionMarkers + g.VersionMarkers,
	}
}

// HeartbeatEstimate is an ESTIMATE of the heartbeats that reached the server, which Cloud
// bills one action each and which history does not record. For each attempt of an activity
// with a heartbeat timeout that closed in this history, it takes the time from
// ActivityTaskStarted to the activity's close event and divides it by HeartbeatEvery of the
// heartbeat timeout, rounding down: a 50s AwaitChange with a 20s heartbeat timeout (before
// sparse-await-heartbeats) is 50s / 16s = 3 heartbeats, what an activity that calls
// RecordHeartbeat at least every 16s sends (that AwaitChange beat every 5s: at 5s, then the
// latest at 21s and 37s); a 5-minute AwaitChange with a 5-minute timeout, which beats every
// 3¾ minutes, is 1. One that ends before its first beat sends none. `make bench` counts the
// heartbeats the server answered, beside this estimate.
// Only the last attempt is timed (the history keeps one ActivityTaskStarted).
type HeartbeatEstimate struct {
	// Heartbeats is the estimate, in actions.
	Heartbeats int `json:"heartbeats"`
	// Activities is how many activities it covers: closed, with a heartbeat timeout.
	Activities int `json:"activities"`
	// Heartbeating is their summed time from start to close.
	Heartbeating time.Duration `json:"heartbeating"`
}

// Add is e + f.
func (e HeartbeatEstimate) Add(f HeartbeatEstimate) HeartbeatEstimate {
	return HeartbeatEstimate{
		Heartbeats:   e.Heartbeats + f.Heartbeats,
		Activities:   e.Activities + f.Activities,
		Heartbeating: e.Heartbeating + f.Heartbeating,
	}
}

// Counts are one run's (or, added up, several runs') counts.
type Counts struct {
	// Events is the history's length.
	Events int `json:"events"`
	// WorkflowTasks is each WorkflowTaskCompleted, WorkflowTaskFailed and
	// WorkflowTaskTimedOut: the workflow tasks a worker took and finished, well or not.
	WorkflowTasks int `json:"workflowTasks"`
	// Actions are the billable actions counted from the history; Total their sum.
	Actions Actions `json:"actions"`
	Total   int     `json:"total"`
	// Free are events that cost no action.
	Free Free `json:"free"`
	// HeartbeatEstimate is estimated, not counted, and is not in Total.
	HeartbeatEstimate HeartbeatEstimate `json:"heartbeatEstimate"`
	// ContinuedAsNew: the run ended by continuing as new.
	ContinuedAsNew bool `json:"continuedAsNew"`
	// PreviousRunID is the run this one continued from (continue-as-new, cron or retry),
	// empty for the first run of a chain.
	PreviousRunID string `json:"previousRunID,omitempty"`
	// WorkflowType is the run's workflow type.
	WorkflowType string `json:"workflowType"`
}

// Add is c + d for the counted fields; the run's own facts (ContinuedAsNew, PreviousRunID,
// WorkflowType) stay c's.
func (c Counts) Add(d Counts) Counts {
	c.Events += d.Events
	c.WorkflowTasks += d.WorkflowTasks
	c.Actions = c.Actions.Add(d.Actions)
	c.Total = c.Actions.Total()
	c.Free = c.Free.Add(d.Free)
	c.HeartbeatEstimate = c.HeartbeatEstimate.Add(d.HeartbeatEstimate)
	return c
}

// activity is what Count keeps of one scheduled activity until it closes.
type activity struct {
	heartbeat time.Duration
	started   time.Time
	attempt   int32
}

// Count counts one run's history. A history read before the run closed counts what has
// happened so far.
func Count(h *historypb.History) Counts {
	var c Counts
	events := h.GetEvents()
	c.Events = len(events)
	var (
		lastCompleted   int64 = -1               // the WorkflowTaskCompleted the next markers follow
		laTasks               = map[int64]bool{} // workflow tasks that recorded a local activity
		activities            = map[int64]*activity{}
		startedByClient bool
	)
	for i, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a := e.GetWorkflowExecutionStartedEventAttributes()
			c.Actions.WorkflowStarts++
			c.WorkflowType = a.GetWorkflowType().GetName()
			c.PreviousRunID = a.GetContinuedExecutionRunId()
			startedByClient = c.PreviousRunID == ""
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			// Signal-with-start writes the signal right after the start, before the first
			// workflow task is scheduled: one action in all, counted as the start.
			if startedByClient && i == 1 {
				continue
			}
			c.Actions.Signals++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			c.Actions.Updates++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.WorkflowTasks++
			lastCompleted = e.GetEventId()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			c.WorkflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.Actions.ActivityStarts++
			activities[e.GetEventId()] = &activity{
				heartbeat: e.GetActivityTaskScheduledEventAttributes().GetHeartbeatTimeout().AsDuration(),
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := e.GetActivityTaskStartedEventAttributes()
			if act := activities[a.GetScheduledEventId()]; act != nil {
				act.started = e.GetEventTime().AsTime()
				act.attempt = a.GetAttempt()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			c.closeActivity(activities, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			c.closeActivity(activities, e.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			c.closeActivity(activities, e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			c.closeActivity(activities, e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Actions.Timers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if onlyChangeVersion(e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes()) {
				c.Free.ChangeVersionUpserts++
				continue
			}
			c.Actions.SearchAttributeUpserts++
		case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			c.Free.MemoUpserts++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			c.Actions.ChildWorkflows += 2
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			c.Actions.ExternalSignals++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
			c.Actions.OptionsUpdates++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			c.Actions.NexusOperations++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			c.ContinuedAsNew = true
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			switch e.GetMarkerRecordedEventAttributes().GetMarkerName() {
			case markerLocalActivity:
				c.Free.LocalActivities++
				laTasks[lastCompleted] = true
			case markerSideEffect, markerMutableSideEffect:
				c.Actions.SideEffects++
			case markerVersion:
				c.Free.VersionMarkers++
			}
		}
	}
	c.Actions.LocalActivityTasks = len(laTasks)
	// An activity that never closed in this history: its retries so far are unknown (no
	// ActivityTaskStarted yet) and its heartbeats untimed.
	c.Total = c.Actions.Total()
	return c
}

// closeActivity counts the retries of the activity scheduled at scheduled and estimates its
// heartbeats (see HeartbeatEstimate), once it closes at closed.
func (c *Counts) closeActivity(activities map[int64]*activity, scheduled int64, closed time.Time) {
	act := activities[scheduled]
	if act == nil {
		return
	}
	delete(activities, scheduled)
	if act.attempt > 1 {
		c.Actions.ActivityRetries += int(act.attempt) - 1
	}
	if act.heartbeat <= 0 || act.started.IsZero() || !closed.After(act.started) {
		return
	}
	ran := closed.Sub(act.started)
	c.HeartbeatEstimate.Activities++
	c.HeartbeatEstimate.Heartbeating += ran
	c.HeartbeatEstimate.Heartbeats += EstimateHeartbeats(ran, act.heartbeat)
}

// EstimateHeartbeats is the heartbeats an activity that ran for ran with heartbeat timeout
// timeout sends to the server, one per HeartbeatEvery(timeout) rounded down: 50s at a 20s
// timeout is 50s / 16s = 3; 5 minutes at 5 minutes is 5m / 3¾m = 1. A timeout of 0 (no
// heartbeats) is 0.
func EstimateHeartbeats(ran, timeout time.Duration) int {
	every := HeartbeatEvery(timeout)
	if every <= 0 || ran <= 0 {
		return 0
	}
	return int(ran / every)
}

// HeartbeatEvery is how often an activity of ours with this heartbeat timeout reaches the
// server: under 2 minutes, at the SDK's throttle (HeartbeatThrottle × timeout, at most the
// worker's MaxHeartbeatThrottleInterval, 60 s by default), which our activities' beats every
// few seconds always meet; from 2 minutes on, AwaitChange's own pace, three quarters of the
// timeout (activities.heartbeatPace, sparse-await-heartbeats), each beat reaching the server.
func HeartbeatEvery(timeout time.Duration) time.Duration {
	if timeout >= 2*time.Minute {
		return timeout * 3 / 4
	}
	return min(time.Duration(float64(timeout)*HeartbeatThrottle), SDKMaxHeartbeatThrottle)
}

// SDKMaxHeartbeatThrottle is the Go SDK's default MaxHeartbeatThrottleInterval: it never waits
// longer than this between two heartbeats it sends, whatever the timeout.
const SDKMaxHeartbeatThrottle = 60 * time.Second

// onlyChangeVersion reports whether an upsert sets TemporalChangeVersion and nothing else.
func onlyChangeVersion(sa *commonpb.SearchAttributes) bool {
	fields := sa.GetIndexedFields()
	_, ok := fields[changeVersionAttr]
	return ok && len(fields) == 1
}
