package release

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/workflows"
)

// The cluster activities a release calls, by name, on each cluster's task queue (every
// cluster's worker registers them; activities/release.go). The release workflow runs on its
// own task queue and reaches a cluster only through these.
const (
	actReadTargets = "ReadTargets"
	actApply       = "ApplyTemplateChange"
	actAwaitDone   = "AwaitRolloutDone"
	actRestore     = "RestoreTemplate"
	actRecordEvent = "RecordEvent"
	actMeasure     = "MeasureAnalysis"
)

// taskQueueFor is the task queue of a cluster's worker: "" is the default cluster's.
func taskQueueFor(cluster string) string { return workflows.TaskQueueFor(cluster) }

type readTargetsInput struct {
	Namespace string
	Names     []string
	Selector  string
}

type readTargetsResult struct {
	Targets []readTarget
}

type readTarget struct {
	Name string
	UID  types.UID
}

type applyInput struct {
	Namespace   string
	Name        string
	Images      map[string]string `json:",omitempty"`
	Patch       json.RawMessage   `json:",omitempty"`
	Annotations map[string]string `json:",omitempty"`
	ExpectUID   types.UID         `json:",omitempty"`
}

type applyResult struct {
	// Revision and Template (and Annotations) are the Deployment's before the change.
	Revision    int64
	Template    json.RawMessage
	Annotations map[string]string `json:",omitempty"`
	// Generation is the Deployment's after the change.
	Generation int64
}

type awaitDoneInput struct {
	Namespace  string
	Name       string
	Generation int64
}

type awaitDoneResult struct {
	Complete bool
	Failed   bool
	Reason   string
}

type restoreInput struct {
	Namespace   string
	Name        string
	Template    json.RawMessage
	Annotations map[string]string `json:",omitempty"`
}

type restoreResult struct {
	Generation int64
}

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
			NonRetryableErrorTypes: []string{activities.ErrInvalid, activities.ErrNotFound},
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
