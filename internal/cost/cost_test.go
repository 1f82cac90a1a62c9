package cost

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// builder appends events with ascending IDs, each a second after the last unless at moves it.
type builder struct {
	events []*historypb.HistoryEvent
	now    time.Time
}

func (b *builder) add(t enumspb.EventType, set func(*historypb.HistoryEvent)) int64 {
	e := &historypb.HistoryEvent{EventId: int64(len(b.events) + 1), EventType: t, EventTime: timestamppb.New(b.now)}
	if set != nil {
		set(e)
	}
	b.events = append(b.events, e)
	b.now = b.now.Add(time.Second)
	return e.EventId
}

func (b *builder) start(previous string) *builder {
	b.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: "DeploymentWorkflow"}, ContinuedExecutionRunId: previous}}
	})
	return b
}

func (b *builder) signal(name string) *builder {
	b.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name}}
	})
	return b
}

// task is one workflow task that completes, followed by markers local activity markers.
func (b *builder) task(markers int) *builder {
	b.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
	b.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil)
	b.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil)
	for range markers {
		b.marker(markerLocalActivity)
	}
	return b
}

func (b *builder) marker(name string) *builder {
	b.add(enumspb.EVENT_TYPE_MARKER_RECORDED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name}}
	})
	return b
}

// activity is an activity with heartbeat timeout hb that ran for ran on attempt attempt.
func (b *builder) activity(hb, ran time.Duration, attempt int32) *builder {
	id := b.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: "AwaitChange"}, HeartbeatTimeout: durationpb.New(hb)}}
	})
	b.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: id, Attempt: attempt}}
	})
	b.now = b.now.Add(ran - time.Second)
	b.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: id}}
	})
	return b
}

func (b *builder) upsert(keys ...string) *builder {
	fields := map[string]*commonpb.Payload{}
	for _, k := range keys {
		fields[k] = &commonpb.Payload{}
	}
	b.add(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}
	})
	return b
}

func (b *builder) then(t enumspb.EventType) *builder { b.add(t, nil); return b }

func (b *builder) history() *historypb.History { return &historypb.History{Events: b.events} }

func newBuilder() *builder { return &builder{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)} }

func TestCount(t *testing.T) {
	tests := []struct {
		name     string
		give     *historypb.History
		want     Actions
		wantFree Free
		wantHB   int
		wantWFT  int
	}{
		{
			// Signal-with-start: the start and its signal are one action; a later signal is one.
			name:    "signal-with-start, then a signal",
			give:    newBuilder().start("").signal("trigger").task(0).signal("trigger").task(0).history(),
			want:    Actions{WorkflowStarts: 1, Signals: 1},
			wantWFT: 2,
		},
		{
			// A continued run's first signal is a signal of its own (no signal-with-start).
			name:    "continued run, buffered signal",
			give:    newBuilder().start("run-1").signal("trigger").task(0).then(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW).history(),
			want:    Actions{WorkflowStarts: 1, Signals: 1},
			wantWFT: 1,
		},
		{
			// 3 + 1 local activities over two workflow tasks are 2 actions; a task without is 0.
			name:     "local activities per workflow task",
			give:     newBuilder().start("").task(3).task(0).task(1).history(),
			want:     Actions{WorkflowStarts: 1, LocalActivityTasks: 2},
			wantFree: Free{LocalActivities: 4},
			wantWFT:  3,
		},
		{
			// Attempt 4 is the first start and 3 retries; 50s at a 20s timeout is 50/16 = 3
			// heartbeats, 10s is none.
			name:    "activity retries and heartbeats",
			give:    newBuilder().start("").task(0).activity(20*time.Second, 50*time.Second, 4).activity(20*time.Second, 10*time.Second, 1).history(),
			want:    Actions{WorkflowStarts: 1, ActivityStarts: 2, ActivityRetries: 3},
			wantHB:  3,
			wantWFT: 1,
		},
		{
			name: "upserts: GetVersion's is free, two attributes are one",
			give: newBuilder().start("").task(0).marker(markerVersion).upsert(changeVersionAttr).upsert("K8sRevision", "RolloutOutcome").
				then(enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED).then(enumspb.EVENT_TYPE_TIMER_STARTED).history(),
			want:     Actions{WorkflowStarts: 1, SearchAttributeUpserts: 1, Timers: 1},
			wantFree: Free{ChangeVersionUpserts: 1, MemoUpserts: 1, VersionMarkers: 1},
			wantWFT:  1,
		},
		{
			name: "child, external signal, side effect, update, failed task",
			give: newBuilder().start("").task(0).then(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED).
				then(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED).marker(markerSideEffect).
				then(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED).then(enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED).history(),
			want:    Actions{WorkflowStarts: 1, ChildWorkflows: 2, ExternalSignals: 1, SideEffects: 1, Updates: 1},
			wantWFT: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Count(tt.give)
			if got.Actions != tt.want {
				t.Errorf("actions: got %+v, want %+v", got.Actions, tt.want)
			}
			if got.Total != tt.want.Total() {
				t.Errorf("total: got %d, want %d", got.Total, tt.want.Total())
			}
			if got.Free != tt.wantFree {
				t.Errorf("free: got %+v, want %+v", got.Free, tt.wantFree)
			}
			if got.HeartbeatEstimate.Heartbeats != tt.wantHB {
				t.Errorf("heartbeat estimate: got %d, want %d", got.HeartbeatEstimate.Heartbeats, tt.wantHB)
			}
			if got.WorkflowTasks != tt.wantWFT {
				t.Errorf("workflow tasks: got %d, want %d", got.WorkflowTasks, tt.wantWFT)
			}
			if got.Events != len(tt.give.Events) {
				t.Errorf("events: got %d, want %d", got.Events, len(tt.give.Events))
			}
		})
	}
}

func TestEstimateHeartbeats(t *testing.T) {
	tests := []struct {
		name         string
		ran, timeout time.Duration
		want         int
	}{
		{name: "no heartbeat timeout", ran: time.Minute, want: 0},
		{name: "shorter than one interval", ran: 15 * time.Second, timeout: 20 * time.Second, want: 0},
		{name: "50s at 20s: every 16s", ran: 50 * time.Second, timeout: 20 * time.Second, want: 3},
		{name: "5 minutes at 30s: every 24s", ran: 5 * time.Minute, timeout: 30 * time.Second, want: 12},
		{name: "5 minutes at 90s: the SDK's 60s cap", ran: 5 * time.Minute, timeout: 90 * time.Second, want: 5},
		{name: "2 minutes at 3 minutes: before the first beat", ran: 2 * time.Minute, timeout: 3 * time.Minute, want: 0},
		{name: "5 minutes at 3 minutes: every 2m15s", ran: 5 * time.Minute, timeout: 3 * time.Minute, want: 2},
		{name: "3 minutes at 4 minutes: before the first beat", ran: 179 * time.Second, timeout: 4 * time.Minute, want: 0},
		{name: "5 minutes at 4 minutes: every 3 minutes", ran: 5 * time.Minute, timeout: 4 * time.Minute, want: 1},
		{name: "3½ minutes at 5 minutes: before the first beat", ran: 210 * time.Second, timeout: 5 * time.Minute, want: 0},
		{name: "5 minutes at 5 minutes: every 3¾ minutes", ran: 5 * time.Minute, timeout: 5 * time.Minute, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateHeartbeats(tt.ran, tt.timeout); got != tt.want {
				t.Errorf("EstimateHeartbeats(%s, %s): got %d, want %d", tt.ran, tt.timeout, got, tt.want)
			}
		})
	}
}
