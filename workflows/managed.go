package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// released ends the run of a Deployment that is kube-controller-manager's (k8s.PhaseReleased):
// it opted out and was handed back, never opted in, or cannot be parked, which a
// ManagedStrategyUnsupported warning says on the Deployment.
func (r *rollout) released(ctx workflow.Context, plan k8s.Plan) Result {
	if plan.Message != "" {
		ref := activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID}
		events := []k8s.Event{{Type: "Warning", Reason: "ManagedStrategyUnsupported", Message: plan.Message + "; left to the Deployment controller"}}
		if err := workflow.ExecuteLocalActivity(ctx, a.RecordEvent, activities.RecordEventInput{Deployment: ref, Events: events}).Get(ctx, nil); err != nil {
			r.log.Warn("Recording the ManagedStrategyUnsupported event failed", "error", err)
		}
	}
	r.finishRollout(ctx, OutcomeReleased)
	r.log.Info("Deployment is not driven in managed mode, workflow ends", "reason", plan.Message)
	r.endRun(ctx)
	return Result{Outcome: OutcomeReleased, Revision: r.Status.CurrentRevision, Message: plan.Message}
}

// releaseOnCancel hands the Deployment back when the run is canceled in managed mode: a parked
// Deployment nobody drives would stay paused.
func (r *rollout) releaseOnCancel(ctx workflow.Context) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	dctx = workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	ref := activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID}
	events := []k8s.Event{{Type: "Normal", Reason: "Released", Message: "Workflow canceled: spec.paused and spec.strategy restored, handed back to the Deployment controller"}}
	if err := workflow.ExecuteLocalActivity(dctx, a.ReleaseDeployment, activities.ParkInput{Deployment: ref, Events: events}).Get(dctx, nil); err != nil {
		r.log.Warn("Handing the deployment back after cancellation failed", "error", err)
	}
}
