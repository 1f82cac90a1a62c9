package workflows

import (
	"fmt"
	"net/url"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// effects are the writes every part of a run makes beside its decisions: an event on the
// Deployment (each also a notification, notify.go, and a memo refresh), the memo and search
// attributes the Temporal UI and `temporal workflow list` show, and the question to the fleet
// freeze. The strategies (steps.go, bluegreen.go), traffic routing and the main loop share
// one.
type effects struct {
	// State is the run's state (the rollout's own).
	*State
	// dep names the Deployment: its namespace, name and cluster.
	dep contract.Input
	log log.Logger
	// status is the status query's answer (the memo carries parts of it).
	status func() contract.Status
	// notifier: the webhook of the notify annotation (notify.go).
	notifier notifier
	// stateDirty: the step state changed in this workflow task and is written once, before
	// the task ends (flushStepState; change one-upsert-per-task).
	stateDirty bool
	// waitingSA: the RolloutWaitingFor value last written.
	waitingSA string
	// releaseRollback: the template of the last sync is the one a release's rollback restored
	// (k8s.ReleaseRestoredHashAnnotation): the fleet freeze does not hold it.
	releaseRollback bool
}

// readNotify reads the notify annotation at a sync. An invalid one gets a Warning event
// (once per value) and turns notifications off until it is fixed; it does not hold the
// rollout.
func (fx *effects) readNotify(ctx workflow.Context, d *appsv1.Deployment) {
	cfg, err := k8s.ParseNotify(d.Annotations)
	if err != nil {
		fx.Notify = nil
		if raw := d.Annotations[k8s.NotifyAnnotation]; fx.notifier.warned != raw {
			fx.notifier.warned = raw
			fx.recordStepWarning(ctx, "InvalidNotifyAnnotation", "Notifications off: invalid annotation: "+err.Error())
		}
		return
	}
	fx.Notify, fx.notifier.warned = cfg, ""
}

// notifyEvent sends the webhook the notification a step event stands for, if it asked for it.
func (fx *effects) notifyEvent(ctx workflow.Context, ev k8s.Event) {
	cfg := fx.Notify
	if cfg == nil {
		return
	}
	var event string
	switch ev.Reason {
	case "RolloutStep":
		event = k8s.NotifyStepReached
		if fx.Steps != nil && fx.Steps.WaitingFor == contract.WaitingForPromote {
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
		if fx.BlueGreen == nil {
			return
		}
		event = k8s.NotifyStepReached
		if fx.BlueGreen.WaitingFor == contract.WaitingForPromote {
			event = k8s.NotifyPaused
		}
		if !cfg.Wants(event) || workflow.GetVersion(ctx, changeBlueGreenNotify, workflow.DefaultVersion, 1) < 1 {
			return
		}
	default:
		return
	}
	fx.notify(ctx, event, ev.Reason, ev.Message)
}

// notifyOutcome sends "completed" when a rollout completed (not the return after an abort).
func (fx *effects) notifyOutcome(ctx workflow.Context, outcome string) {
	if fx.Notify == nil || outcome != string(k8s.PhaseComplete) {
		return
	}
	st := fx.Status
	fx.notify(ctx, k8s.NotifyCompleted, "RolloutCompleted", fmt.Sprintf("Rollout of revision %d complete: %d replicas", st.TargetRevision, st.Replicas))
}

func (fx *effects) notify(ctx workflow.Context, event, reason, msg string) {
	cfg := fx.Notify
	if !cfg.Wants(event) {
		return
	}
	n := activities.Notification{
		Deployment: fx.dep.Name, Namespace: fx.dep.Namespace, Cluster: fx.dep.Cluster, Revision: fx.Status.TargetRevision,
		Event: event, Reason: reason, Message: msg, Link: fx.workflowLink(ctx), Time: workflow.Now(ctx).UTC(),
	}
	// The rollout under way names its revision: the status's is the last sync's, the previous
	// revision's when a new template's first step or phase begins.
	if s := fx.Steps; s != nil {
		if s.Revision != 0 {
			n.Revision = s.Revision
		}
		if s.Step < len(fx.StepList) {
			n.Step = s.Step + 1
		}
		n.Steps = len(fx.StepList)
	}
	if bg := fx.BlueGreen; bg != nil && bg.Revision != 0 {
		n.Revision = bg.Revision
	}
	fx.deliver(ctx, &activities.NotifyInput{URL: cfg.URL, Format: cfg.Format, Notification: n})
}

// workflowLink is this workflow in the Temporal UI: <ui-url>/namespaces/<ns>/workflows/<id>.
func (fx *effects) workflowLink(ctx workflow.Context) string {
	if fx.UIURL == "" {
		return ""
	}
	info := workflow.GetInfo(ctx)
	return fx.UIURL + "/namespaces/" + url.PathEscape(info.Namespace) + "/workflows/" + url.PathEscape(info.WorkflowExecution.ID)
}

// deliver runs the Notify activity in a goroutine: the rollout goes on while it is retried.
func (fx *effects) deliver(ctx workflow.Context, in *activities.NotifyInput) {
	nt := &fx.notifier
	nt.pending = append(nt.pending, in)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if nt.ending {
			// Carried to the next run, which sends it.
			return
		}
		o := notifyOptions
		// The webhook's address is left out: it may carry a token.
		o.Summary = fmt.Sprintf("notify %s of %s/%s (%s)", in.Notification.Event, in.Notification.Namespace, in.Notification.Deployment, in.Format)
		actx := workflow.WithActivityOptions(gctx, o)
		err := workflow.ExecuteActivity(actx, a.Notify, *in).Get(gctx, nil)
		for i, p := range nt.pending {
			if p == in {
				nt.pending = append(nt.pending[:i:i], nt.pending[i+1:]...)
				break
			}
		}
		if err != nil {
			fx.log.Warn("Notification not delivered", "event", in.Notification.Event, "url", in.URL, "error", err)
		}
	})
}

// carriedNotifications are the notifications the next run sends.
func (fx *effects) carriedNotifications() []activities.NotifyInput {
	fx.notifier.ending = true
	var out []activities.NotifyInput
	for _, p := range fx.notifier.pending {
		out = append(out, *p)
	}
	return out
}

// recordStep records a Normal event on the Deployment, logs it, and refreshes the memo and the
// search attributes: every step and verdict is in the history.
func (fx *effects) recordStep(ctx workflow.Context, reason, msg string) {
	fx.recordEvent(ctx, k8s.Event{Type: "Normal", Reason: reason, Message: msg})
}

func (fx *effects) recordStepWarning(ctx workflow.Context, reason, msg string) {
	fx.recordEvent(ctx, k8s.Event{Type: "Warning", Reason: reason, Message: msg})
}

func (fx *effects) recordEvent(ctx workflow.Context, ev k8s.Event) {
	fx.log.Info("Rollout step", "reason", ev.Reason, "message", ev.Message)
	if fx.UID != "" {
		ref := activities.DeploymentRef{Namespace: fx.dep.Namespace, Name: fx.dep.Name, UID: fx.UID}
		lctx := withSummary(ctx, "record "+ev.Reason+" on "+fx.dep.Namespace+"/"+fx.dep.Name)
		if err := workflow.ExecuteLocalActivity(lctx, a.RecordEvent, activities.RecordEventInput{Deployment: ref, Events: []k8s.Event{ev}}).Get(ctx, nil); err != nil {
			fx.log.Warn("Recording a rollout event failed", "reason", ev.Reason, "error", err)
		}
	}
	fx.notifyEvent(ctx, ev)
	fx.upsertStepState(ctx)
}

// upsertStepState writes the memo (always) and the RolloutWaitingFor search attribute (where
// the attributes are registered) for the current step. From change one-upsert-per-task it
// only marks them for flushStepState, which writes them once before the workflow task ends:
// at most one memo upsert and one search-attribute upsert per task (docs/capacity.md).
func (fx *effects) upsertStepState(ctx workflow.Context) {
	if workflow.GetVersion(ctx, changeOneUpsertPerTask, workflow.DefaultVersion, 1) >= 1 {
		fx.stateDirty = true
		return
	}
	fx.writeStepState(ctx, "", nil)
}

// flushStepState writes the step state marked by upsertStepState, if any: before the workflow
// waits (the task ends there) and as a run ends.
func (fx *effects) flushStepState(ctx workflow.Context) {
	if fx.stateDirty {
		fx.stateDirty = false
		fx.writeStepState(ctx, "", nil)
	}
}

// writeStepState upserts the memo of the current step (summary, when set, replaces its
// one-line summary) and, in one upsert, final and RolloutWaitingFor where it changed.
func (fx *effects) writeStepState(ctx workflow.Context, summary string, final []temporal.SearchAttributeUpdate) {
	st := fx.status()
	memo := map[string]any{contract.MemoSummary: fmt.Sprintf("%s/%s: %s", fx.dep.Namespace, fx.dep.Name, fx.stepSummary())}
	if summary != "" {
		memo[contract.MemoSummary] = summary
	}
	if st.Steps != nil {
		memo[contract.MemoSteps] = st.Steps
	}
	if st.AbortReason != "" {
		memo[contract.MemoAbortReason] = st.AbortReason
	}
	if st.BlueGreen != nil {
		memo[contract.MemoBlueGreen] = st.BlueGreen
	}
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		fx.log.Warn("Upsert memo failed", "error", err)
	}
	waiting := waitingForAttr(st.Holds)
	updates := final
	if fx.waitingSA != waiting {
		updates = append(updates, saWaitingFor.ValueSet(waiting))
	}
	if len(updates) == 0 {
		return
	}
	if sa := workflow.GetTypedSearchAttributes(ctx); !sa.ContainsKey(saNamespace) {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		fx.log.Warn("Upsert search attributes failed", "error", err)
		return
	}
	fx.waitingSA = waiting
}

// upsertSearchAttributes, at the end of a run, records the revision and outcome for filtering
// the workflow list, and a readable memo ("default/web: revision 3 → 4, Complete"). It only runs when the starter set
// K8sNamespace at start, which it does only where the attributes are registered, so an
// unregistered server never sees an upsert it would reject.
func (fx *effects) upsertSearchAttributes(ctx workflow.Context, outcome string, from int64) {
	sa := workflow.GetTypedSearchAttributes(ctx)
	if !sa.ContainsKey(saNamespace) || outcome == "" {
		return
	}
	updates := []temporal.SearchAttributeUpdate{saRevision.ValueSet(fx.Status.TargetRevision)}
	if !sa.ContainsKey(saDeployment) {
		updates = append(updates, saDeployment.ValueSet(fx.dep.Name))
	}
	if outcome != "" {
		updates = append(updates, saOutcome.ValueSet(outcome))
	}
	summary := fmt.Sprintf("%s/%s: revision %d → %d, %s", fx.dep.Namespace, fx.dep.Name, from, fx.Status.TargetRevision, outcome)
	if fx.stateDirty {
		// The step state marked in this task goes in the same two upserts.
		fx.stateDirty = false
		fx.writeStepState(ctx, summary, updates)
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		fx.log.Warn("Upsert search attributes failed", "error", err)
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{contract.MemoSummary: summary}); err != nil {
		fx.log.Warn("Upsert memo failed", "error", err)
	}
}

// fleetFreeze asks for the fleet freeze; nil when the fleet is not frozen, or when asking
// failed (logged: no hold).
func (fx *effects) fleetFreeze(ctx workflow.Context) *contract.FreezeHold {
	var f activities.FleetFreezeResult
	o := freezeOptions
	o.Summary = "ask whether the fleet is frozen, for " + fx.dep.Namespace + "/" + fx.dep.Name
	lctx := workflow.WithLocalActivityOptions(ctx, o)
	if err := workflow.ExecuteLocalActivity(lctx, a.FleetFreeze).Get(lctx, &f); err != nil {
		fx.log.Warn("Asking for the fleet freeze failed; not holding", "error", err)
		return nil
	}
	if !f.Frozen || (!f.Until.IsZero() && !f.Until.After(workflow.Now(ctx))) {
		return nil
	}
	return &contract.FreezeHold{Until: f.Until.UTC(), Reason: f.Reason, By: f.By}
}
