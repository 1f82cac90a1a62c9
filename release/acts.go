package release

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
)

// The cluster activities a release calls on each cluster's task queue (every cluster's
// worker registers them; activities/release.go): ReadTargets, PreflightChange, ApplyTemplateChange,
// AwaitRolloutDone, RestoreTemplate, and RecordEvent and MeasureAnalysis. The release workflow
// runs on its own task queue and reaches a cluster only through these.
var a *activities.Activities

// taskQueueFor is the task queue of a cluster's worker: "" is the default cluster's.
func taskQueueFor(cluster string) string { return contract.TaskQueueFor(cluster) }

// clusterOptions: a cluster's short activities. A cluster whose worker or apiserver is gone
// is retried until clusterTimeout, then the release fails.
func (r *run) clusterOptions(ctx workflow.Context, cluster string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueueFor(cluster),
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: r.spec.clusterTimeout(),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        15 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrInvalid, activities.ErrNotFound, activities.ErrStale},
		},
	})
}

// awaitOptions: waiting for one rollout. The activity heartbeats, so a dead worker's wait
// moves to another (or the restarted one) within the heartbeat timeout.
func (r *run) awaitOptions(ctx workflow.Context, cluster string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueueFor(cluster),
		StartToCloseTimeout:    r.spec.rolloutTimeout(),
		ScheduleToCloseTimeout: r.spec.rolloutTimeout() + r.spec.clusterTimeout(),
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    15 * time.Second,
		},
	})
}

// summarized sets the summary the Temporal UI shows for the activities ctx schedules (a
// metadata field of the ActivityTaskScheduled event, not part of the command's identity: a
// replay of a history without it matches).
func summarized(ctx workflow.Context, summary string) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	opts.Summary = summary
	return workflow.WithActivityOptions(ctx, opts)
}

// awaitSummarized is workflow.AwaitWithTimeout with the timer's summary.
func awaitSummarized(ctx workflow.Context, timeout time.Duration, summary string, cond func() bool) {
	_, _ = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: summary}}, cond)
}
