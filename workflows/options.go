package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// The timeouts and retry policies of every activity the Deployment workflow starts, in one
// place: what an operator reads to know how long a step may take and how often it is tried.
// Each value is the one recorded histories were written with.

// backoff is a retry policy that doubles the interval from initial up to most; attempts 0 is
// no limit (the schedule-to-close timeout ends it). Errors of the types named are not retried.
func backoff(initial, most time.Duration, attempts int32, nonRetryable ...string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: initial, BackoffCoefficient: 2, MaximumInterval: most,
		MaximumAttempts: attempts, NonRetryableErrorTypes: nonRetryable}
}

// once is a retry policy of one attempt: the workflow decides what comes next.
func once() *temporal.RetryPolicy { return &temporal.RetryPolicy{MaximumAttempts: 1} }

// localActivityOptions: every Kubernetes read and write is a local activity, recorded as one
// marker event, so a rollout's history stays small. Each is idempotent, so a retry after a
// worker crash repeats it safely.
var localActivityOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 2 * time.Minute,
	RetryPolicy:            backoff(500*time.Millisecond, 10*time.Second, 5),
}

// releaseOptions: handing a canceled run's Deployment back is one local activity, retried for
// as long as the run's last task allows.
var releaseOptions = workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second}

// notifyOptions: a webhook gets 10 attempts within 10 minutes; a 4xx answer (other than 408
// and 429) is not retried.
var notifyOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
	RetryPolicy:            backoff(2*time.Second, 2*time.Minute, 10, activities.ErrWebhookRejected, activities.ErrInvalid),
}

// jobOptions: RunAnalysisJob may wait for its Job up to the step's timeout, heartbeating, so a
// dead worker's wait fails within the heartbeat timeout and the retry (on any worker) finds
// the Job the first attempt created and waits on. Past the timeout (plus a margin over the
// Job's activeDeadlineSeconds, which fails it first) the analysis is inconclusive.
func jobOptions(timeout time.Duration) workflow.ActivityOptions {
	if timeout <= 0 {
		timeout = k8s.DefaultJobTimeout
	}
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: timeout + 2*time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            backoff(time.Second, 30*time.Second, 0, activities.ErrInvalid, activities.ErrJobGone, activities.ErrNotFound),
	}
}

// measureOptions: one measurement retries a failing query every few seconds for up to 5
// minutes (a query error is not a failed measurement); after that the analysis is
// inconclusive and the rollout waits for promote or abort.
var measureOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    45 * time.Second,
	ScheduleToCloseTimeout: 5 * time.Minute,
	RetryPolicy:            backoff(time.Second, 15*time.Second, 0, activities.ErrNoPrometheus),
}

// freezeOptions: one quick question; an answer that does not come is no freeze.
var freezeOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    5 * time.Second,
	ScheduleToCloseTimeout: 12 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
}

// awaitMaxWait bounds one AwaitChange: a rollout under way is synced at least this often.
const awaitMaxWait = 5 * time.Minute

// awaitOptions: AwaitChange is a regular activity (it may wait minutes), heartbeating so that a
// dead worker's wait fails within the heartbeat timeout and the workflow syncs instead. It is
// not retried: the workflow decides what comes next. These are the options of runs before
// sparse-await-heartbeats: a 20 s heartbeat timeout, one heartbeat reaching the server every
// 16 s (3.75 billable actions a minute of any wait). awaitActivityOptions gives a run its own.
var awaitOptions = workflow.ActivityOptions{
	ScheduleToCloseTimeout: awaitMaxWait + time.Minute,
	HeartbeatTimeout:       20 * time.Second,
	RetryPolicy:            once(),
}

// awaitHeartbeatTimeout is AwaitChange's heartbeat timeout from sparse-await-heartbeats on: the
// wait beats every 3¾ minutes (activities.heartbeatPace), so a wait under that costs no
// heartbeat and a 5-minute one (awaitMaxWait) one, and the server fails the wait of a worker
// that died at most 5 minutes after its last heartbeat. A worker that comes back sooner takes
// its rollouts over at once: at start it signals every rollout under way (watcher.TakeOver),
// whose workflow then gives up the dead wait, syncs and waits again on a live worker.
const awaitHeartbeatTimeout = 5 * time.Minute

// restCheckWait bounds the look of restChecked (the informer cache catching up with the sync's
// own writes, usually a few milliseconds): it holds the workflow task, and so the queries and
// updates to this workflow, for at most this long.
const restCheckWait = 500 * time.Millisecond

// localAwaitOptions: a local wait (see State.LocalWait) is not retried; on any error the
// AwaitChange activity waits.
func localAwaitOptions(window time.Duration) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{StartToCloseTimeout: window + 10*time.Second, RetryPolicy: once()}
}
