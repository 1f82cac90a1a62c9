package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// TakeOver signals the workflow of every rollout under way on the cluster (WorkerCovers), once,
// as a worker starts: a wait (AwaitChange) that ran on a worker that died (this one, before a
// SIGKILL) is still open on the Temporal server until its heartbeat timeout, 5 minutes after
// its last heartbeat (sparse-await-heartbeats), and nobody else wakes its workflow: the
// watcher leaves a rollout under way to the worker's wait. On the trigger the workflow gives
// up that wait, syncs on a live read and waits again, on a live worker. A rollout whose wait
// runs on another live worker pays one sync and one wait more (a signal, an activity start);
// the wait it gave up ends at its next heartbeat. A Deployment with no open workflow is left to
// the watcher, which starts one.
//
// In managed mode only the Deployments we drive (k8s.ManagedInvolved) are signalled. It returns
// how many it signalled.
func TakeOver(ctx context.Context, c *kube.Cache, tc client.Client, cluster string, managed bool, logger *slog.Logger) (int, error) {
	ds, err := c.Deployments("")
	if err != nil {
		return 0, fmt.Errorf("list cached deployments: %w", err)
	}
	n := 0
	for _, d := range ds {
		if (managed && !k8s.ManagedInvolved(d)) || !WorkerCovers(d) {
			continue
		}
		id := contract.WorkflowIDIn(cluster, d.Namespace, d.Name)
		err := tc.SignalWorkflow(ctx, id, "", contract.SignalTrigger, nil)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			continue
		case err != nil:
			return n, fmt.Errorf("signal %s to take its rollout over: %w", id, err)
		}
		logger.Info("Rollout under way, signalled to take it over", "namespace", d.Namespace, "deployment", d.Name)
		n++
	}
	return n, nil
}
