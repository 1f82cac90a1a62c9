//go:build e2e

package e2e

import (
	"context"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/temporal-rollout/rollout/contract"
)

// TestTaskQueueOnePartition: the stack's Temporal server (the dev server under `make test`,
// the server on PostgreSQL under `make test-cluster`) serves the rollout task queue from one
// partition for workflow and activity tasks (stack.ServerDynamicConfig), where a server's
// default is 4.
func TestTaskQueueOnePartition(t *testing.T) {
	resp, err := env.tc.WorkflowService().ListTaskQueuePartitions(context.Background(), &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: "default",
		TaskQueue: &taskqueuepb.TaskQueue{Name: contract.DefaultTaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
	})
	if err != nil {
		t.Fatal(err)
	}
	if w, a := len(resp.GetWorkflowTaskQueuePartitions()), len(resp.GetActivityTaskQueuePartitions()); w != 1 || a != 1 {
		t.Errorf("task queue %s: %d workflow and %d activity partitions, want 1 and 1", contract.DefaultTaskQueue, w, a)
	}
}
