package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

const (
	// staleRetries: stale decisions synced again at once, from a live read, in a row before
	// backing off (see failed).
	staleRetries = 10
	// maxSyncsPerRun bounds one run's history; past it the run continues as new.
	maxSyncsPerRun = 200
)

// newRollout builds a run from its input: the state the previous run handed over (or a new
// one), and the runtime parts rebuilt around it. resumeWaits restarts the waits under way.
func newRollout(ctx workflow.Context, in Input) *deploymentRun {
	r := &deploymentRun{
		in:       in,
		trigger:  workflow.GetSignalChannel(ctx, contract.SignalTrigger),
		pause:    workflow.GetSignalChannel(ctx, contract.SignalPause),
		resume:   workflow.GetSignalChannel(ctx, contract.SignalResume),
		rollback: workflow.GetSignalChannel(ctx, contract.SignalRollback),

		updateState: updateState{kick: workflow.NewBufferedChannel(ctx, 1)},
	}
	if st := in.State; st != nil {
		r.State = *st
		// A sync is owed unless the previous run converged with nothing asked.
		r.Dirty = !st.Idle || st.Dirty || st.RollbackTo != nil || st.Pause != nil || st.Abort != nil
	} else {
		r.Dirty = true
	}
	if r.Status.Phase == "" {
		r.Status = contract.Status{Phase: "Pending"}
	}
	r.Status.Namespace, r.Status.Name = in.Namespace, in.Name
	r.fromRevision = r.Status.CurrentRevision
	r.effects = effects{State: &r.State, dep: in.Input, status: r.queryStatus,
		log: log.With(workflow.GetLogger(ctx), "namespace", in.Namespace, "deployment", in.Name)}
	r.updateState.st, r.updateState.status = &r.State, r.queryStatus
	r.waitState.deployment = in.Namespace + "/" + in.Name
	r.route = &router{effects: &r.effects}
	r.canary = newCanary(ctx, &r.effects)
	r.blueGreen = newBlueGreen(ctx, &r.effects, r.canary.endSteps)
	r.canary.abort, r.blueGreen.abort = r.startAbort, r.startAbort
	if in.Trigger != nil {
		// Started by the watcher without a signal: the trigger it would have signalled.
		r.AtLeast = append(r.AtLeast, in.Trigger.Versions...)
	}
	return r
}

// DeploymentWorkflow drives one Deployment, the way kube-controller-manager's Deployment
// controller does, one sync at a time. Each sync observes the Deployment and its ReplicaSets,
// decides with k8s.Decide, and carries the steps out as local activities. Between syncs it
// waits for a signal (trigger from the watcher, pause, resume, rollback) or a timer (progress
// deadline, resync). When a rollout converges it continues as new, so each run reads as one
// rollout.
func DeploymentWorkflow(ctx workflow.Context, in Input) (contract.Result, error) {
	if err := in.Validate(); err != nil {
		return contract.Result{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
	}
	r := newRollout(ctx, in)
	if in.State != nil {
		// A run continued as new has no start summary (the SDK's continue-as-new takes none):
		// its current details tell the carried state from its first task.
		workflow.SetCurrentDetails(ctx, r.details())
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) {
		return r.queryStatus(), nil
	}); err != nil {
		return contract.Result{}, fmt.Errorf("register status query: %w", err)
	}
	if err := r.register(ctx); err != nil {
		return contract.Result{}, err
	}
	ctx = workflow.WithLocalActivityOptions(ctx, localActivityOptions)
	r.resumeWaits(ctx)

	if len(in.Image) > 0 {
		if err := r.setImage(ctx); err != nil {
			return contract.Result{}, err
		}
	}

	for {
		if !r.Dirty && (r.Pause == nil || r.pauseBlocked) {
			if r.rolling && r.failures == 0 && r.await == nil && !r.atRest {
				r.startAwait(ctx)
			}
			r.flushStepState(ctx)
			r.waitForWork(ctx)
		}
		if err := ctx.Err(); err != nil {
			// Canceled: stop driving the Deployment and leave it as it is (in managed mode,
			// handed back to kube-controller-manager).
			r.log.Info("Workflow canceled, no longer driving the deployment")
			if r.Managed {
				r.releaseOnCancel(ctx)
			}
			return contract.Result{}, err
		}
		r.drainSignals(ctx)
		if r.applyUpdates(ctx) {
			r.answer(ctx)
			r.drainSignals(ctx)
		}
		if r.Pause != nil {
			r.applyPause(ctx)
		}
		if !r.Dirty {
			continue
		}
		r.Dirty = false
		r.stopAwait()
		r.awaitRemote, r.atRest = false, false
		plan, found, err := r.sync(ctx)
		r.synced()
		if err != nil {
			r.failed(ctx, err)
			continue
		}
		r.failures = 0
		r.rolling = !plan.Phase.Converged()
		if !found {
			r.finishRollout(ctx, contract.OutcomeDeleted)
			msg := fmt.Sprintf("deployment %s/%s no longer exists", in.Namespace, in.Name)
			r.log.Info("Deployment deleted, workflow ends")
			r.endRun(ctx)
			return contract.Result{Outcome: contract.OutcomeDeleted, Revision: r.Status.CurrentRevision, Message: msg}, nil
		}
		if plan.Phase == k8s.PhaseReleased {
			return r.released(ctx, plan), nil
		}
		r.scheduleWake(ctx, plan)

		// A paused rollout stays in its run: its resume is part of the same rollout, and a
		// resume sent while the run continued as new would be refused ("workflow is
		// closing"), which the control benchmark saw for 2 of 15 resumes sent right after a
		// pause.
		if plan.Phase.Converged() && plan.Phase != k8s.PhasePaused && r.progressed {
			pending := r.pendingWork(ctx)
			if !pending || r.nextChangeOnly(ctx) {
				outcome := string(plan.Phase)
				if r.aborted != nil && plan.Phase == k8s.PhaseComplete {
					outcome = contract.OutcomeAborted
				}
				r.finishRollout(ctx, outcome)
				r.log.Info("Rollout converged, continuing as new", "phase", plan.Phase, "revision", plan.Revision, "syncs", r.syncs, "next", pending)
				return contract.Result{}, r.continueAsNew(ctx, !pending)
			}
		}
		if r.syncs >= maxSyncsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			r.drainSignals(ctx)
			return contract.Result{}, r.continueAsNew(ctx, plan.Phase.Converged() && !r.pendingWork(ctx))
		}
	}
}

// pendingWork drains signals that arrived during the sync and reports whether any work is owed.
func (r *deploymentRun) pendingWork(ctx workflow.Context) bool {
	r.drainSignals(ctx)
	return r.Dirty || r.commandPending()
}

// commandPending reports whether a user's pause, resume, rollback or update waits to be applied.
func (r *deploymentRun) commandPending() bool {
	return r.Pause != nil || r.RollbackTo != nil || len(r.updates) > 0
}

// nextChangeOnly reports whether the work owed after a converged rollout is a change
// signalled alone (a trigger: a new template, say), which the next run takes. A pause, a
// rollback or an update stays in this run, as before (a paused rollout keeps its run, and an
// update is not refused for a run that ends).
func (r *deploymentRun) nextChangeOnly(ctx workflow.Context) bool {
	return r.Dirty && !r.commandPending() &&
		workflow.GetVersion(ctx, changeFinishBeforeNext, workflow.DefaultVersion, 1) == 1
}

// endRun lets every update handler finish before the run ends: one queued but not applied is
// told to try again (the next run takes it).
func (r *deploymentRun) endRun(ctx workflow.Context) {
	r.flushStepState(ctx)
	for _, u := range r.updates {
		u.err, u.done = errors.New("the run ended before this update was applied; send it again"), true
	}
	r.updates = nil
	r.synced()
	r.ended = true
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// queryStatus is the status query's answer.
func (r *deploymentRun) queryStatus() contract.Status {
	st := r.Status
	st.Cluster = r.in.Cluster
	st.PendingRollback = r.RollbackTo
	st.Syncs = r.syncs
	st.WaitMoves = r.inlineMoves
	st.Steps = r.stepsStatus()
	st.AnnotationError = r.AnnotationError
	st.Holds = r.holds(r.in.WorkflowID())
	st.Traffic = r.Traffic
	st.BlueGreen = r.blueGreenStatus()
	if r.Abort != nil {
		st.AbortScaleDownAt = r.Abort.Until
	}
	return st
}

func (r *deploymentRun) continueAsNew(ctx workflow.Context, idle bool) error {
	r.stopAwait()
	r.raiseFence()
	next := r.nextInput(idle)
	r.endRun(ctx)
	return workflow.NewContinueAsNewError(ctx, contract.WorkflowType, next)
}

// drainSignals handles every signal already delivered, without blocking.
func (r *deploymentRun) drainSignals(ctx workflow.Context) {
	for {
		sel := workflow.NewSelector(ctx)
		r.addSignals(ctx, sel)
		if !sel.HasPending() {
			return
		}
		sel.Select(ctx)
	}
}

func (r *deploymentRun) applyPause(ctx workflow.Context) {
	paused := *r.Pause
	var res activities.SetPausedResult
	err := workflow.ExecuteLocalActivity(withSummary(ctx, fmt.Sprintf("set spec.paused=%t on %s/%s", paused, r.in.Namespace, r.in.Name)), a.SetPaused, activities.SetPausedInput{
		Namespace: r.in.Namespace, Name: r.in.Name, Paused: paused,
	}).Get(ctx, &res)
	r.AtLeast = append(r.AtLeast, res.Wrote...)
	if err != nil && !activities.IsKind(err, activities.ErrNotFound) {
		// Keep the request, and retry it after a backoff rather than at once.
		r.Status.LastError = fmt.Sprintf("set paused=%t: %v", paused, err)
		r.failures++
		r.pauseBlocked = true
		r.setWake(ctx, workflow.Now(ctx).Add(backoffFor(r.failures)))
		r.log.Warn("Setting spec.paused failed, retrying after backoff", "paused", paused, "error", err)
		return
	}
	r.Pause = nil
	r.Dirty = true
}

func (r *deploymentRun) setImage(ctx workflow.Context) error {
	var res activities.SetImageResult
	err := workflow.ExecuteLocalActivity(withSummary(ctx, fmt.Sprintf("set the image of %s/%s: %s", r.in.Namespace, r.in.Name, imagesString(r.in.Image))), a.SetImage, activities.SetImageInput{
		Namespace: r.in.Namespace, Name: r.in.Name, Images: r.in.Image, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
	}).Get(ctx, &res)
	r.AtLeast = append(r.AtLeast, res.Wrote...)
	if err != nil {
		if activities.IsKind(err, activities.ErrInvalid) || activities.IsKind(err, activities.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError("set image: "+err.Error(), "InvalidInput", err)
		}
		return fmt.Errorf("set image: %w", err)
	}
	return nil
}

// imagesString is container=image pairs in container order: "app=nginx:1.27, side=envoy:1".
func imagesString(images map[string]string) string {
	names := make([]string, 0, len(images))
	for c := range images {
		names = append(names, c)
	}
	sort.Strings(names)
	for i, c := range names {
		names[i] = c + "=" + images[c]
	}
	return strings.Join(names, ", ")
}

// sync is one pass of the controller: observe, decide, act.
func (r *deploymentRun) sync(ctx workflow.Context) (k8s.Plan, bool, error) {
	r.syncs++
	r.syncStart = workflow.Now(ctx)
	var obs activities.ObserveResult
	if r.observed != nil && !r.LiveNext && r.observed.Holds(r.AtLeast) {
		obs = activities.ObserveResult{Found: true, Snapshot: *r.observed, FromCache: true}
	} else if err := workflow.ExecuteLocalActivity(withSummary(ctx, "read "+r.in.Namespace+"/"+r.in.Name+", its ReplicaSets and pods"), a.Observe, activities.ObserveInput{
		Namespace: r.in.Namespace, Name: r.in.Name, AtLeast: r.AtLeast, Live: r.LiveNext, Command: r.RollbackTo != nil,
	}).Get(ctx, &obs); err != nil {
		r.observed = nil
		return k8s.Plan{}, false, fmt.Errorf("observe: %w", err)
	} else {
		r.Managed, r.ManagedGuard, r.LocalWait = obs.Managed, obs.ManagedGuard, obs.LocalWait
		r.UIURL = obs.UIURL
	}
	r.observed = nil
	r.AtLeast, r.LiveNext = nil, false
	if !obs.Found {
		return k8s.Plan{}, false, nil
	}
	d := obs.Snapshot.Deployment
	if r.UID != "" && r.UID != d.UID {
		r.log.Info("Deployment was recreated", "uid", d.UID)
	}
	r.UID = d.UID
	r.generation = d.Generation
	req := k8s.Request{RollbackTo: r.RollbackTo, Managed: r.Managed}
	if req.Managed {
		req.ManagedProgress, req.ManagedGuard = r.ManagedProgress, r.ManagedGuard
	}
	r.readNotify(ctx, k8s.Effective(d))
	req.Canary = r.canaryRequest(ctx, obs.Snapshot)
	r.canaryReq = req.Canary
	r.rolloutAnnotations = k8s.RolloutAnnotations(d.Annotations)
	plan, err := k8s.Decide(obs.Snapshot, req, workflow.Now(ctx))
	if err != nil {
		return k8s.Plan{}, true, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalid, nil)
	}
	if req.Managed {
		r.ManagedProgress = plan.ManagedProgress
	}
	ref := activities.DeploymentRef{Namespace: d.Namespace, Name: d.Name, UID: d.UID}
	// Traffic moves before the plan's writes: weights fall before pods go (traffic.go).
	r.raiseFence()
	if err := r.route.syncRoute(ctx, ref, obs.Snapshot, plan); err != nil {
		r.report(obs.Snapshot, plan)
		return plan, true, err
	}
	if err := r.blueGreen.syncServices(ctx, ref, obs.Snapshot, plan); err != nil {
		r.report(obs.Snapshot, plan)
		return plan, true, err
	}
	wrote, restarted := false, false
	for _, step := range k8s.FoldStatus(plan.Steps) {
		if step.Kind != k8s.StepEvent && step.Kind != k8s.StepUpdateStatus {
			wrote = true
		}
		again, err := r.execute(ctx, ref, d, step)
		if err != nil {
			r.report(obs.Snapshot, plan)
			return plan, true, err
		}
		if again {
			r.Dirty, restarted = true, true
			break
		}
	}
	// A sync that starts over (a hash collision) before its rollback step ran has not rolled
	// back: the request stays for the next sync.
	if plan.RollbackHandled && !restarted {
		r.RollbackTo = nil
		r.recordRollback = true
	}
	if wrote {
		r.markProgressed(ctx)
	}
	r.report(obs.Snapshot, plan)
	r.Status.LastError = ""
	r.blueGreen.afterBlueGreen(ctx, plan)
	r.afterSync(ctx, obs.Snapshot, plan)
	workflow.SetCurrentDetails(ctx, r.details())
	// After a rollback (PhaseRollingBack) the restored template is rolled out by the next
	// sync, which AwaitChange asks for at once, in a workflow task of its own (recordRollback).
	return plan, true, nil
}

// execute carries out one step. It reports whether the sync must start over (a hash
// collision bumped collisionCount).
func (r *deploymentRun) execute(ctx workflow.Context, ref activities.DeploymentRef, d *appsv1.Deployment, step k8s.Step) (bool, error) {
	// A sync that rolls back carries out a user's command: its writes (the new ReplicaSet that
	// upstream creates before a rollback, the status) go under the commands' budget too.
	cmd := r.RollbackTo != nil
	spent := workflow.Now(ctx).Sub(r.syncStart)
	ctx = withSummary(ctx, writeSummary(d, step))
	switch step.Kind {
	case k8s.StepEvent:
		return false, workflow.ExecuteLocalActivity(ctx, a.RecordEvent, activities.RecordEventInput{Deployment: ref, Events: step.Events}).Get(ctx, nil)
	case k8s.StepClaim:
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, a.ClaimReplicaSets, activities.ClaimInput{Command: cmd, Deployment: ref, Adopt: step.Adopt, Release: step.Release}))
	case k8s.StepCreate:
		var res activities.CreateResult
		err := workflow.ExecuteLocalActivity(ctx, a.CreateReplicaSet, activities.CreateInput{
			Command:    cmd,
			Deployment: ref, ReplicaSet: step.ReplicaSet, Events: step.Events, ProgressDeadline: k8s.HasProgressDeadline(d),
			ThenStatus: step.Deployment, Spent: spent,
		}).Get(ctx, &res)
		if err != nil {
			return false, err
		}
		r.AtLeast = append(r.AtLeast, res.Wrote...)
		if res.Collision {
			r.log.Info("Hash collision, collisionCount bumped", "replicaSet", res.Name)
			r.LiveNext = true
			return true, nil
		}
		return false, nil
	case k8s.StepScaleUp, k8s.StepScaleDown, k8s.StepUpdateRS:
		fn := a.UpdateReplicaSet
		switch step.Kind {
		case k8s.StepScaleUp:
			fn = a.ScaleUpReplicaSet
		case k8s.StepScaleDown:
			fn = a.ScaleDownReplicaSet
		}
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, fn, activities.WriteReplicaSetInput{
			Command:    cmd,
			Deployment: ref, ReplicaSet: step.ReplicaSet, FromReplicas: step.FromReplicas, Events: step.Events,
			ThenStatus: step.Deployment, Spent: spent,
		}))
	case k8s.StepCleanup:
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, a.CleanupReplicaSets, activities.CleanupInput{Deployment: ref, Delete: step.Delete}))
	case k8s.StepUpdateStatus:
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, a.UpdateDeploymentStatus, activities.DeploymentWriteInput{Command: cmd, Deployment: step.Deployment, Events: step.Events, Spent: spent}))
	case k8s.StepRollback:
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, a.RollbackDeployment, activities.DeploymentWriteInput{Deployment: step.Deployment, Events: step.Events}))
	case k8s.StepPark, k8s.StepRelease:
		fn := a.ParkDeployment
		if step.Kind == k8s.StepRelease {
			fn = a.ReleaseDeployment
		}
		// Sync again at once on what the write left: the rollout (parked) or the end of
		// the run (released).
		r.Dirty = true
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, fn, activities.ParkInput{Deployment: ref, Events: step.Events}))
	}
	return false, temporal.NewNonRetryableApplicationError("unknown step "+string(step.Kind), activities.ErrInvalid, nil)
}

// writeSummary says in one line what a plan's write does: which object, from what to what
// ("scale web-5667b58498 2 → 3").
func writeSummary(d *appsv1.Deployment, step k8s.Step) string {
	name := d.Namespace + "/" + d.Name
	rs := func() string {
		if step.ReplicaSet == nil {
			return "?"
		}
		return step.ReplicaSet.Name
	}
	to := func() int32 {
		if step.ReplicaSet == nil || step.ReplicaSet.Spec.Replicas == nil {
			return 0
		}
		return *step.ReplicaSet.Spec.Replicas
	}
	switch step.Kind {
	case k8s.StepEvent:
		var reasons []string
		for _, e := range step.Events {
			reasons = append(reasons, e.Reason)
		}
		return "record " + strings.Join(reasons, ", ") + " on " + name
	case k8s.StepClaim:
		return fmt.Sprintf("adopt %d and release %d ReplicaSets of %s", len(step.Adopt), len(step.Release), name)
	case k8s.StepCreate:
		return fmt.Sprintf("create ReplicaSet %s with %d replicas for %s", rs(), to(), name)
	case k8s.StepScaleUp, k8s.StepScaleDown:
		return fmt.Sprintf("scale %s %d → %d", rs(), step.FromReplicas, to())
	case k8s.StepUpdateRS:
		return "update the annotations of ReplicaSet " + rs()
	case k8s.StepCleanup:
		return fmt.Sprintf("delete %d old ReplicaSets of %s", len(step.Delete), name)
	case k8s.StepUpdateStatus:
		if step.Deployment != nil {
			st := step.Deployment.Status
			return fmt.Sprintf("write the status of %s: %d updated, %d available of %d", name, st.UpdatedReplicas, st.AvailableReplicas, st.Replicas)
		}
		return "write the status of " + name
	case k8s.StepRollback:
		return "roll back " + name + " to an earlier template"
	case k8s.StepPark:
		return "park " + name + " (managed mode)"
	case k8s.StepRelease:
		return "hand " + name + " back to kube-controller-manager"
	}
	return string(step.Kind) + " " + name
}

// wrote waits for a write and remembers the versions it produced, so the next Observe does not
// decide on a cache that has not seen them yet.
func (r *deploymentRun) wrote(ctx workflow.Context, f workflow.Future) error {
	var res struct {
		Wrote []k8s.ObjectVersion `json:"wrote"`
	}
	if err := f.Get(ctx, &res); err != nil {
		return err
	}
	r.AtLeast = append(r.AtLeast, res.Wrote...)
	return nil
}

// failed records an error and schedules the next attempt: once the client budget admits it
// after a write refused as busy, at once after a stale decision (from the second in a row,
// once the budget admits it), otherwise after an exponential backoff.
func (r *deploymentRun) failed(ctx workflow.Context, err error) {
	if activities.IsKind(err, activities.ErrBusy) && workflow.GetVersion(ctx, changeBusyWriteDeferred, workflow.DefaultVersion, 1) == 1 {
		// Nothing was written: the budget is saturated. End the task (its slot, and what was
		// sent to this workflow meanwhile, wait for it) and sync once the budget admits it.
		// Not a failure: it never backs off, and the status reports no error.
		r.log.Info("Client budget saturated, syncing once it admits the sync", "error", err)
		r.startRetryAwait(ctx)
		return
	}
	r.Status.LastError = err.Error()
	r.failures++
	// A conflict is a stale decision by design (the write is not retried with the same
	// target), and conflicts are routine while the ReplicaSet controller and other clients
	// write the same objects: they sync again at once, from a live read, up to staleRetries in
	// a row before backing off.
	stale := activities.IsKind(err, activities.ErrStale) || activities.IsKind(err, activities.ErrNotFound)
	if stale && r.failures <= staleRetries {
		r.LiveNext = true
		if r.failures > 1 && workflow.GetVersion(ctx, changeStaleRetryAdmitted, workflow.DefaultVersion, 1) == 1 {
			// Stale again: a run of retries in one workflow task held it (and every signal,
			// update and query behind it) for seconds on a saturated client budget. The next
			// one comes after this task, once the budget admits it.
			r.log.Info("Decision was stale again, syncing from a live read once the client budget admits it", "error", err, "failures", r.failures)
			r.startRetryAwait(ctx)
			return
		}
		r.log.Info("Decision was stale, syncing again from a live read", "error", err)
		r.Dirty = true
		return
	}
	n := r.failures
	if stale {
		n -= staleRetries
	}
	backoff := backoffFor(n)
	r.log.Warn("Sync failed, retrying after backoff", "error", err, "backoff", backoff)
	r.setWake(ctx, workflow.Now(ctx).Add(backoff))
}

func (r *deploymentRun) finishRollout(ctx workflow.Context, outcome string) {
	r.upsertSearchAttributes(ctx, outcome, r.fromRevision)
	r.notifyOutcome(ctx, outcome)
	if !r.progressed {
		return
	}
	mh := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome})
	mh.Counter("rollout_rollouts_completed").Inc(1)
	mh.Timer("rollout_duration").Record(workflow.Now(ctx).Sub(r.startedAt))
}

// details is the line the Temporal UI shows as the run's current details.
func (r *deploymentRun) details() string {
	st := r.Status
	line := fmt.Sprintf("**%s/%s** %s: revision %d → %d", st.Namespace, st.Name, st.Phase, r.fromRevision, st.TargetRevision)
	if r.Steps != nil || r.Abort != nil || r.BlueGreen != nil {
		line += "\n\n" + r.stepSummary()
	}
	if s := r.Steps; s != nil && r.Abort == nil && !s.Full && s.Step < len(r.StepList) {
		line += fmt.Sprintf("\n\nWeight %d%%.", r.weight())
	}
	for _, h := range r.holds(r.in.WorkflowID()) {
		line += "\n\nWaits for **" + h.Kind + "**: " + h.Message
		if h.Until != nil {
			line += " (until " + h.Until.UTC().Format(time.RFC3339) + ")"
		}
		if h.Do != "" {
			line += "\n`" + h.Do + "`"
		}
	}
	if len(st.ReplicaSets) > 0 {
		// A blank line: the UI's Markdown starts no list inside a paragraph.
		line += "\n"
	}
	for _, rs := range st.ReplicaSets {
		line += fmt.Sprintf("\n- `%s` (revision %d): %d replicas, %d ready, %d available", rs.Name, rs.Revision, rs.Replicas, rs.Ready, rs.Available)
	}
	return line
}

// applyPromote promotes the rollout under way (the promote update, validated): blue-green or steps.
func (r *deploymentRun) applyPromote(ctx workflow.Context, req contract.PromoteRequest) {
	if r.BlueGreen != nil {
		r.blueGreen.promoteBlueGreen(ctx, req)
		return
	}
	r.canary.promoteSteps(ctx, req)
}

// canaryRequest weighs a snapshot's steps before a decision and returns the cap for
// k8s.Decide (nil: roll out as upstream does). It starts a stepped rollout for a new template,
// and reports an invalid annotation once per value, freezing the rollout until it is fixed.
func (r *deploymentRun) canaryRequest(ctx workflow.Context, snap k8s.Snapshot) *k8s.Canary {
	// A parked Deployment (managed mode) is weighed as its user wrote it.
	d := k8s.Effective(snap.Deployment)
	hash := snap.TemplateHash
	if hash == "" {
		hash = k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	}
	r.LastHash = hash
	r.releaseRollback = hash != "" && d.Annotations[k8s.ReleaseRestoredHashAnnotation] == hash
	// The stable template as the cluster records it comes first (k8s.StableTemplate): the
	// status write that completed a rollout recorded it, so a completion this run's memory
	// lost (a discarded workflow task, a template observed before the completion) is not lost.
	// It never moves the stable template back to an older revision than the run's: a
	// blue-green promotion makes the promoted template stable before any status completes it.
	// Nor does it take the current template: a status recorded complete is a sync away from
	// its completion (afterSync), which ends the rollout's phases in order (a blue-green
	// rollout's last event is recorded there).
	if rec := k8s.StableTemplate(d, snap.ReplicaSets, hash, r.StableHash); rec != "" && rec != r.StableHash && rec != hash &&
		newerTemplate(snap.ReplicaSets, rec, r.StableHash) &&
		workflow.GetVersion(ctx, changeStableOnCluster, workflow.DefaultVersion, 1) == 1 {
		r.log.Info("Stable template read from the cluster", "memory", r.StableHash, "cluster", rec)
		r.StableHash = rec
	}
	if r.StableHash == "" {
		r.StableHash = stableHash(d, snap.ReplicaSets, hash)
	}
	if r.Abort != nil && hash != r.Abort.Hash && hash != r.StableHash {
		// A new template arrived after the abort: the user moved on; it rolls out as any other.
		r.log.Info("New template during an abort; the abort is over", "reason", r.Abort.Reason)
		r.Abort = nil
	}
	if ab := r.Abort; ab != nil && ab.Until != nil && hash == r.StableHash {
		// Back on the stable template, the aborted ReplicaSet keeps its pods until the hold
		// ends (a blue-green cap on the stable template scales nothing down).
		r.canary.endSteps()
		r.blueGreen.endBlueGreen()
		return &k8s.Canary{Hash: hash, BlueGreen: true, Hold: true, Message: fmt.Sprintf(
			"Blue-green: aborted; the aborted ReplicaSet keeps its pods until %s (abortScaleDownDelaySeconds %d)", ab.Until.Format(time.RFC3339), ab.Delay)}
	}
	if r.Abort != nil || hash == r.StableHash || r.StableHash == "" {
		r.canary.endSteps()
		r.blueGreen.endBlueGreen()
		return nil
	}
	if c, ok := r.blueGreen.blueGreenRequest(ctx, d, snap.ReplicaSets, hash); ok {
		return c
	}
	return r.canary.stepsRequest(ctx, d, snap.ReplicaSets, hash)
}

// afterSync moves a stepped rollout on from a sync's plan: a setWeight step whose weight is
// reached passes; a complete rollout makes its template the stable one; a deadline exceeded
// with auto-rollback aborts.
func (r *deploymentRun) afterSync(ctx workflow.Context, snap k8s.Snapshot, plan k8s.Plan) {
	if plan.CanaryStale {
		r.Dirty = true
		return
	}
	if plan.Phase == k8s.PhaseComplete {
		if r.Abort != nil {
			if r.LastHash == r.StableHash {
				r.aborted = r.Abort
			}
			r.Abort = nil
		}
		r.StableHash = r.LastHash
		r.canary.endSteps()
		return
	}
	r.canary.weightReached(ctx, plan, func() bool { return r.route.stepReached(ctx, snap, plan) })
	if plan.Phase == k8s.PhaseDeadlineExceeded && r.Abort == nil && r.StableHash != "" && r.LastHash != r.StableHash {
		if auto, err := k8s.ParseAutoRollback(snap.Deployment.Annotations); err == nil && auto {
			r.startAbort(ctx, "progress deadline exceeded ("+plan.Message+conditionMessage(plan.Status)+")")
		}
	}
}

// startAbort returns the Deployment to the stable revision at full speed, skipping all steps:
// a rollback to it, which restores its template as `kubectl rollout undo` does.
func (r *deploymentRun) startAbort(ctx workflow.Context, reason string) {
	rev := int64(0)
	for _, rs := range r.Status.ReplicaSets {
		if rs.Hash == r.StableHash {
			rev = rs.Revision
		}
	}
	spec := r.blueGreen.spec
	blueGreen := r.BlueGreen != nil && spec != nil
	r.canary.endSteps()
	r.blueGreen.endBlueGreen()
	r.Abort = &abortState{Reason: reason, Hash: r.LastHash}
	if blueGreen {
		if d := spec.AbortScaleDownDelay(); d > 0 && workflow.GetVersion(ctx, changeBlueGreenAbortDelay, workflow.DefaultVersion, 1) >= 1 {
			until := workflow.Now(ctx).Add(d).UTC()
			r.Abort.Until, r.Abort.Delay = &until, int32(d/time.Second)
			r.blueGreen.startAbortHold(ctx)
		}
	}
	r.aborted = nil
	r.RollbackTo = &rev
	r.Dirty = true
	r.Status.AbortReason = reason
	target := "the previous revision"
	if rev > 0 {
		target = fmt.Sprintf("revision %d", rev)
	}
	msg := fmt.Sprintf("Rollout of revision %d aborted: %s; returning to %s", r.Status.TargetRevision, reason, target)
	r.log.Warn("Rollout aborted", "reason", reason, "to", target)
	r.recordStepWarning(ctx, "RolloutAborted", msg)
}

// applyUpdates applies queued updates (main loop only). Each is validated again: the state may
// have moved since its validator ran.
func (r *deploymentRun) applyUpdates(ctx workflow.Context) bool {
	applied := len(r.applied)
	for len(r.updates) > 0 {
		u := r.updates[0]
		r.updates = r.updates[1:]
		switch {
		case u.promote != nil:
			if u.err = r.canPromote(*u.promote); u.err == nil {
				u.err = r.promoteFrozen(ctx)
			}
			if u.err == nil {
				r.applyPromote(ctx, *u.promote)
			}
		case u.abort != nil:
			if u.err = r.canAbort(); u.err == nil {
				reason := "aborted by user"
				if strings.TrimSpace(u.abort.Reason) != "" {
					reason += ": " + u.abort.Reason
				}
				r.startAbort(ctx, reason)
			}
		}
		if u.err != nil {
			u.done = true
			continue
		}
		r.Dirty = true
		r.applied = append(r.applied, u)
	}
	return len(r.applied) > applied
}

// promoteFrozen refuses a promote during a fleet freeze (main loop only: it asks).
func (r *deploymentRun) promoteFrozen(ctx workflow.Context) error {
	if (r.BlueGreen == nil && r.Steps == nil) || !freezeChecked(ctx) {
		return nil
	}
	if f := r.fleetFreeze(ctx); f != nil {
		return frozenError(r.in.Namespace, r.in.Name, f)
	}
	return nil
}

// resumeWaits restarts, in a run continued from another, what the state says is under way: the
// step's or blue-green phase's timer or analysis (a timer waits only what is left of it), and
// the notifications the previous run did not deliver.
func (r *deploymentRun) resumeWaits(ctx workflow.Context) {
	r.canary.resumeSteps(ctx)
	r.blueGreen.resumeBlueGreen(ctx)
	carried := r.Notifications
	r.Notifications = nil
	for i := range carried {
		r.deliver(ctx, &carried[i])
	}
}

// nextInput is the next run's input: this run's state, whole, with idle (the rollout converged
// with nothing owed), the run counted, and the notifications not yet delivered.
func (r *deploymentRun) nextInput(idle bool) Input {
	if r.in.State != nil {
		r.Runs++
	}
	r.Idle = idle
	r.Notifications = r.carriedNotifications()
	st := r.State
	return Input{Input: contract.Input{Namespace: r.in.Namespace, Name: r.in.Name, Cluster: r.in.Cluster}, State: &st}
}

// released ends the run of a Deployment that is kube-controller-manager's (k8s.PhaseReleased):
// it opted out and was handed back, never opted in, or cannot be parked, which a
// ManagedStrategyUnsupported warning says on the Deployment.
func (r *deploymentRun) released(ctx workflow.Context, plan k8s.Plan) contract.Result {
	if plan.Message != "" {
		ref := activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID}
		events := []k8s.Event{{Type: "Warning", Reason: "ManagedStrategyUnsupported", Message: plan.Message + "; left to the Deployment controller"}}
		ectx := withSummary(ctx, "record ManagedStrategyUnsupported on "+r.in.Namespace+"/"+r.in.Name)
		if err := workflow.ExecuteLocalActivity(ectx, a.RecordEvent, activities.RecordEventInput{Deployment: ref, Events: events}).Get(ctx, nil); err != nil {
			r.log.Warn("Recording the ManagedStrategyUnsupported event failed", "error", err)
		}
	}
	r.finishRollout(ctx, contract.OutcomeReleased)
	r.log.Info("Deployment is not driven in managed mode, workflow ends", "reason", plan.Message)
	r.endRun(ctx)
	return contract.Result{Outcome: contract.OutcomeReleased, Revision: r.Status.CurrentRevision, Message: plan.Message}
}

// releaseOnCancel hands the Deployment back when the run is canceled in managed mode: a parked
// Deployment nobody drives would stay paused.
func (r *deploymentRun) releaseOnCancel(ctx workflow.Context) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	dctx = withSummary(workflow.WithLocalActivityOptions(dctx, releaseOptions), "hand "+r.in.Namespace+"/"+r.in.Name+" back to kube-controller-manager (the run was canceled)")
	ref := activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID}
	events := []k8s.Event{{Type: "Normal", Reason: "Released", Message: "Workflow canceled: spec.paused and spec.strategy restored, handed back to the Deployment controller"}}
	if err := workflow.ExecuteLocalActivity(dctx, a.ReleaseDeployment, activities.ParkInput{Deployment: ref, Events: events}).Get(dctx, nil); err != nil {
		r.log.Warn("Handing the deployment back after cancellation failed", "error", err)
	}
}
