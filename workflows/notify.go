package workflows

import (
	"fmt"
	"net/url"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// Notifications. A Deployment annotated temporal-rollout.io/notify gets a webhook on its
// rollout's events (k8s.NotifyEvents): a step (or blue-green phase) reached, a pause for
// promote, promote, abort, a failed analysis, completion. Each delivery is a Notify activity
// started from a goroutine, so the rollout never waits for it; a webhook that fails is retried
// for a while and then only logged. Without the annotation nothing is sent, and the workflow issues no command it
// did not issue before.
//
// Delivery is at least once: notifications not delivered when a run continues as new are
// carried to the next run, which sends them again.

// notifyOptions: a webhook gets 10 attempts within 10 minutes; a 4xx answer (other than 408
// and 429) is not retried.
var notifyOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        2 * time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        2 * time.Minute,
		MaximumAttempts:        10,
		NonRetryableErrorTypes: []string{activities.ErrWebhookRejected, activities.ErrInvalid},
	},
}

// notifier is a run's notification state.
type notifier struct {
	// warned is the invalid annotation value already warned about.
	warned string
	// pending are the notifications not yet delivered (or given up on).
	pending []*activities.NotifyInput
	// ending: the run is continuing as new; notifications not yet started wait for the next.
	ending bool
}

// readNotify reads the notify annotation at a sync. An invalid one gets a Warning event
// (once per value) and turns notifications off until it is fixed; it does not hold the
// rollout.
func (r *rollout) readNotify(ctx workflow.Context, d *appsv1.Deployment) {
	cfg, err := k8s.ParseNotify(d.Annotations)
	if err != nil {
		r.Notify = nil
		if raw := d.Annotations[k8s.NotifyAnnotation]; r.notifier.warned != raw {
			r.notifier.warned = raw
			r.recordStepWarning(ctx, "InvalidNotifyAnnotation", "Notifications off: invalid annotation: "+err.Error())
		}
		return
	}
	r.Notify, r.notifier.warned = cfg, ""
}

// notifyEvent sends the webhook the notification a step event stands for, if it asked for it.
func (r *rollout) notifyEvent(ctx workflow.Context, ev k8s.Event) {
	cfg := r.Notify
	if cfg == nil {
		return
	}
	var event string
	switch ev.Reason {
	case "RolloutStep":
		event = k8s.NotifyStepReached
		if r.Steps != nil && r.Steps.WaitingFor == WaitingForPromote {
			event = k8s.NotifyPaused
		}
	case "AnalysisInconclusive":
		event = k8s.NotifyPaused
	case "RolloutPromoted":
		event = k8s.NotifyPromoted
	case "AnalysisFailed":
		event = k8s.NotifyAnalysisFailed
	case "RolloutAborted":
		event = k8s.NotifyAborted
	case "BlueGreenPhase":
		// A blue-green phase is a step: paused when it waits for promote.
		if r.BlueGreen == nil {
			return
		}
		event = k8s.NotifyStepReached
		if r.BlueGreen.WaitingFor == WaitingForPromote {
			event = k8s.NotifyPaused
		}
		if !cfg.Wants(event) || workflow.GetVersion(ctx, changeBlueGreenNotify, workflow.DefaultVersion, 1) < 1 {
			return
		}
	default:
		return
	}
	r.notify(ctx, event, ev.Reason, ev.Message)
}

// notifyOutcome sends "completed" when a rollout completed (not the return after an abort).
func (r *rollout) notifyOutcome(ctx workflow.Context, outcome string) {
	if r.Notify == nil || outcome != string(k8s.PhaseComplete) {
		return
	}
	st := r.Status
	r.notify(ctx, k8s.NotifyCompleted, "RolloutCompleted", fmt.Sprintf("Rollout of revision %d complete: %d replicas", st.TargetRevision, st.Replicas))
}

func (r *rollout) notify(ctx workflow.Context, event, reason, msg string) {
	cfg := r.Notify
	if !cfg.Wants(event) {
		return
	}
	n := activities.Notification{
		Deployment: r.in.Name, Namespace: r.in.Namespace, Cluster: r.in.Cluster, Revision: r.Status.TargetRevision,
		Event: event, Reason: reason, Message: msg, Link: r.workflowLink(ctx), Time: workflow.Now(ctx).UTC(),
	}
	// The rollout under way names its revision: the status's is the last sync's, the previous
	// revision's when a new template's first step or phase begins.
	if s := r.Steps; s != nil {
		if s.Revision != 0 {
			n.Revision = s.Revision
		}
		if s.Step < len(r.StepList) {
			n.Step = s.Step + 1
		}
		n.Steps = len(r.StepList)
	}
	if bg := r.BlueGreen; bg != nil && bg.Revision != 0 {
		n.Revision = bg.Revision
	}
	r.deliver(ctx, &activities.NotifyInput{URL: cfg.URL, Format: cfg.Format, Notification: n})
}

// workflowLink is this workflow in the Temporal UI: <ui-url>/namespaces/<ns>/workflows/<id>.
func (r *rollout) workflowLink(ctx workflow.Context) string {
	if r.UIURL == "" {
		return ""
	}
	info := workflow.GetInfo(ctx)
	return r.UIURL + "/namespaces/" + url.PathEscape(info.Namespace) + "/workflows/" + url.PathEscape(info.WorkflowExecution.ID)
}

// deliver runs the Notify activity in a goroutine: the rollout goes on while it is retried.
func (r *rollout) deliver(ctx workflow.Context, in *activities.NotifyInput) {
	nt := &r.notifier
	nt.pending = append(nt.pending, in)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if nt.ending {
			// Carried to the next run, which sends it.
			return
		}
		actx := workflow.WithActivityOptions(gctx, notifyOptions)
		err := workflow.ExecuteActivity(actx, a.Notify, *in).Get(gctx, nil)
		for i, p := range nt.pending {
			if p == in {
				nt.pending = append(nt.pending[:i:i], nt.pending[i+1:]...)
				break
			}
		}
		if err != nil {
			r.log.Warn("Notification not delivered", "event", in.Notification.Event, "url", in.URL, "error", err)
		}
	})
}

// carriedNotifications are the notifications the next run sends.
func (r *rollout) carriedNotifications() []activities.NotifyInput {
	r.notifier.ending = true
	var out []activities.NotifyInput
	for _, p := range r.notifier.pending {
		out = append(out, *p)
	}
	return out
}
