package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// waitForWork blocks until a signal or the wake timer.
func (r *deploymentRun) waitForWork(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	r.addSignals(ctx, sel)
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if r.wake != nil {
		sel.AddFuture(r.wake, func(workflow.Future) {
			r.wake, r.cancelWake, r.wakeAt = nil, nil, time.Time{}
			r.Dirty = true
		})
	}
	if r.await != nil {
		sel.AddFuture(r.await, func(f workflow.Future) {
			var res activities.AwaitResult
			err := f.Get(ctx, &res)
			local, fenced := r.awaitLocal, r.awaitFenced
			r.await, r.cancelAwait, r.awaitLocal, r.awaitFenced = nil, nil, false, false
			if err != nil && fenced {
				// A wait that failed (its worker's heartbeats stopped) may still run.
				r.superseded = true
			}
			if local && (err != nil || res.Reason == activities.AwaitResync || res.Reason == activities.AwaitBusy) {
				// No move within the window (or no local slot): wait in the activity, outside
				// the workflow task, so signals and queries are not held up.
				r.awaitRemote = true
				return
			}
			if err == nil && res.Reason == activities.AwaitRest {
				// Held at rest: nothing moves without a change the watcher signals.
				r.atRest = true
				return
			}
			if err != nil {
				// The worker that waited died (heartbeat timeout) or the wait failed: sync
				// after a backoff rather than at once.
				r.failures++
				r.setWake(ctx, workflow.Now(ctx).Add(backoffFor(r.failures)))
				r.log.Warn("Waiting for the rollout's next move failed, syncing after backoff", "error", err)
				return
			}
			r.Dirty = true
			r.observed = res.Snapshot
			if len(res.Moves) > 0 {
				// The wait made the rollout's scale moves itself (AwaitInput.Inline).
				r.markProgressed(ctx)
				r.inlineMoves += len(res.Moves)
			}
			// And its route moves (AwaitInput.InlineTraffic): the sync records the route as
			// the wait left it, and reads it again after a move that failed part-way, before
			// it weighs its own.
			r.route.waited, r.route.recheck = res.Traffic, r.route.recheck || (fenced && res.RouteUnknown)
			if res.Reason == activities.AwaitGone {
				r.LiveNext = true
			}
		})
	}
	sel.Select(ctx)
	r.pauseBlocked = false
}

// startAwait starts AwaitChange for the rollout under way, with the versions the next sync
// must see and the request it would sync with.
func (r *deploymentRun) startAwait(ctx workflow.Context) {
	in := activities.AwaitInput{
		Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID, AtLeast: r.AtLeast,
		Request: k8s.Request{RollbackTo: r.RollbackTo, Canary: r.canaryReq, Managed: r.Managed}, MaxWait: awaitMaxWait,
	}
	if in.Request.Managed {
		in.Request.ManagedProgress, in.Request.ManagedGuard = r.ManagedProgress, r.ManagedGuard
	}
	ann := r.rolloutAnnotations
	in.RolloutAnnotations = &ann
	// A plain rollout's scale moves are the wait's to make (activities.inlineMoves) while the
	// Deployment stays at the generation this sync decided on.
	in.Inline = !r.Managed && r.canaryReq == nil && r.RollbackTo == nil && r.Traffic == nil && r.BlueGreen == nil && r.Abort == nil
	// So are a stepped rollout's moves within its step, with no traffic routing (the route
	// follows the pods through the sync's gate) and not blue-green.
	if !in.Inline && !r.Managed && r.canaryReq != nil && !r.canaryReq.BlueGreen && r.RollbackTo == nil && r.Traffic == nil &&
		r.BlueGreen == nil && r.Abort == nil && workflow.GetVersion(ctx, changeInlineCanaryMoves, workflow.DefaultVersion, 1) >= 1 {
		in.Inline, in.InlineCanary = true, true
	}
	// So are the moves of a rollout with no canary request on a Deployment with steps
	// annotations: its steps passed and it goes to 100%, or it returns to the stable template.
	if in.Inline && !in.InlineCanary && ann != k8s.RolloutAnnotations(nil) && workflow.GetVersion(ctx, changeInlineAnnotatedMoves, workflow.DefaultVersion, 1) >= 1 {
		in.InlineAnnotated = true
	}
	in.Generation = r.generation
	// With traffic routing, the wait also wakes the workflow when the route should move (the
	// pods it weighs changed, k8s.DecideTraffic), so a held rollout keeps following them.
	if r.Traffic != nil && r.route.ask != nil && r.route.trafficChange(ctx)(k8s.ChangeTrafficFollowsPods) {
		t := r.Traffic
		in.Traffic = &activities.AwaitTraffic{Ask: *r.route.ask, Weight: t.CanaryWeight, Changes: r.route.asked, NeedsCanaryPods: r.headerStep(),
			Cur:       &k8s.TrafficState{StableHash: t.Stable.Hash, CanaryHash: t.Canary.Hash, Route: k8s.RouteState{CanaryWeight: t.CanaryWeight, HeaderRoutes: t.HeaderRoutes}},
			Returning: r.Abort != nil}
	}
	// Held (a step's pause or analysis, a freeze, a blue-green preview): once at rest the wait
	// ends (AwaitRest) rather than heartbeat for as long as the hold lasts.
	if r.canaryReq != nil && r.canaryReq.Hold && workflow.GetVersion(ctx, changeHeldAtRest, workflow.DefaultVersion, 1) >= 1 {
		in.Rest = true
	}
	// A routed rollout under way: the wait moves the route through the same gate as the sync
	// (SyncTraffic), then makes the scale moves within its step, or back to the stable
	// template, as it does without routing (activities.routeInline). Not while held, nor with a
	// stable Service kept on its old template (syncRoute), which the next sync may move.
	if in.Traffic != nil && !in.Inline && !in.Rest && !r.Managed && r.RollbackTo == nil && r.BlueGreen == nil && !r.route.keptStable &&
		(r.canaryReq == nil || !r.canaryReq.BlueGreen) && r.route.spec != nil && r.RouteFenced >= r.RouteFence && !r.superseded &&
		workflow.GetVersion(ctx, changeInlineTrafficMoves, workflow.DefaultVersion, 1) >= 1 {
		in.Inline, in.InlineCanary, in.InlineAnnotated = true, r.canaryReq != nil, r.canaryReq == nil
		in.InlineTraffic = &activities.InlineTraffic{Spec: *r.route.spec, Route: r.Traffic.Route, KnownHeaderRoutes: knownHeaderRoutes(r.StepList), Fence: r.RouteFence}
	}
	if in.Rest && r.restChecked(ctx, in) {
		return
	}
	if r.LocalWait > 0 && !r.awaitRemote && !r.recordRollback && !r.recordUpdate {
		in.MaxWait = r.LocalWait
		lo := localAwaitOptions(r.LocalWait)
		lo.Summary = fmt.Sprintf("wait up to %s in the workflow task for the next move of %s/%s", r.LocalWait, r.in.Namespace, r.in.Name)
		lctx, cancel := workflow.WithCancel(workflow.WithLocalActivityOptions(ctx, lo))
		r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteLocalActivity(lctx, a.AwaitChange, in), cancel, true
		return
	}
	opts := awaitActivityOptions(ctx)
	opts.Summary = "wait for the next move of " + r.in.Namespace + "/" + r.in.Name
	if in.Rest {
		opts.Summary += " (held: ends once at rest)"
	}
	if in.InlineTraffic != nil {
		opts.Summary += " (moves the route as its pods allow)"
	}
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, opts))
	r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteActivity(actx, a.AwaitChange, in), cancel, false
	r.awaitFenced = in.InlineTraffic != nil
	r.recordRollback, r.recordUpdate = false, false
}

// restChecked looks once whether a held rollout is at rest, with AwaitChange as a local
// activity (AwaitInput.RestCheck) in the workflow task of the sync that held it, and reports
// whether it is (change rest-checked-locally): the rollout then waits with no activity, as
// after an AwaitChange activity that ends AwaitRest, but without that activity's start (an
// action) and the workflow task its end takes. Anything else, a failure included, leaves the
// wait to the activity.
func (r *deploymentRun) restChecked(ctx workflow.Context, in activities.AwaitInput) bool {
	if r.restUnwatched || workflow.GetVersion(ctx, changeRestCheckedLocally, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	in.RestCheck, in.MaxWait = true, restCheckWait
	lo := localAwaitOptions(restCheckWait)
	lo.Summary = fmt.Sprintf("look whether %s/%s is held at rest", r.in.Namespace, r.in.Name)
	var res activities.AwaitResult
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), a.AwaitChange, in).Get(ctx, &res); err != nil || res.Reason != activities.AwaitRest {
		r.restUnwatched = err == nil && res.Unwatched
		return false
	}
	r.atRest = true
	r.recordRollback, r.recordUpdate = false, false
	return true
}

// raiseFence raises the route's wait fence (State.RouteFence) once a wait that may move the
// route was given up or failed (superseded): the next SyncTraffic writes it on the route
// before any move, and that wait, should it still run, moves nothing more.
func (r *deploymentRun) raiseFence() {
	if r.superseded {
		r.RouteFence, r.superseded = max(r.RouteFence, r.RouteFenced)+1, false
	}
}

// startRetryAwait starts AwaitChange for a stale decision's retry (AwaitInput.Retry): the
// workflow task ends, and the retry's sync follows once the client budget admits it.
func (r *deploymentRun) startRetryAwait(ctx workflow.Context) {
	r.stopAwait()
	in := activities.AwaitInput{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID, Retry: true, MaxWait: awaitMaxWait}
	opts := awaitActivityOptions(ctx)
	opts.Summary = "sync " + r.in.Namespace + "/" + r.in.Name + " again once the client budget admits it"
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, opts))
	r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteActivity(actx, a.AwaitChange, in), cancel, false
}

// stopAwait cancels a wait still running: a signal or timer came first, and the sync that
// follows starts a new one on its own writes.
func (w *waitState) stopAwait() {
	if w.cancelAwait != nil {
		w.cancelAwait()
		// The cancellation reaches the wait with its next heartbeat: until then it may
		// still move the route, so the next sync fences it out first.
		w.superseded = w.superseded || w.awaitFenced
	}
	w.await, w.cancelAwait, w.awaitLocal, w.awaitFenced = nil, nil, false, false
}

// setWake starts the timer unless one already fires no later than at (within a second).
func (w *waitState) setWake(ctx workflow.Context, at time.Time) {
	if w.wake != nil && !w.wakeAt.After(at.Add(time.Second)) {
		return
	}
	if w.cancelWake != nil {
		w.cancelWake()
	}
	d := at.Sub(workflow.Now(ctx))
	if d < time.Second {
		d = time.Second
	}
	tctx, cancel := workflow.WithCancel(ctx)
	w.wake = workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: fmt.Sprintf("sync %s again at %s", w.deployment, at.UTC().Format(time.RFC3339))})
	w.wakeAt, w.cancelWake = at, cancel
}

// scheduleWake keeps one timer for a converged Deployment: the recheck its plan asks for (a
// progress deadline, minReadySeconds). A rollout under way is woken by AwaitChange, which also
// wakes it at its progress deadline and after awaitMaxWait.
func (w *waitState) scheduleWake(ctx workflow.Context, plan k8s.Plan) {
	if !plan.Phase.Converged() || plan.RecheckAt == nil {
		return
	}
	w.setWake(ctx, plan.RecheckAt.Time)
}

// awaitActivityOptions are AwaitChange's activity options for this run (sparse-await-heartbeats).
func awaitActivityOptions(ctx workflow.Context) workflow.ActivityOptions {
	opts := awaitOptions
	if workflow.GetVersion(ctx, changeSparseAwaitHeartbeats, workflow.DefaultVersion, 1) >= 1 {
		opts.HeartbeatTimeout = awaitHeartbeatTimeout
	}
	return opts
}

// takeOver reports whether a trigger naming no version (a starting worker's, watcher.TakeOver;
// `starter sync`) gives up the AwaitChange activity under way and syncs: the wait may have died
// with its worker, which the server learns only at its heartbeat timeout
// (sparse-await-heartbeats). A local wait runs in this worker's workflow task: no signal
// reaches the workflow before it ends.
func (r *deploymentRun) takeOver(ctx workflow.Context) bool {
	return !r.awaitLocal && workflow.GetVersion(ctx, changeSparseAwaitHeartbeats, workflow.DefaultVersion, 1) >= 1
}

func (r *deploymentRun) addSignals(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(r.trigger, func(c workflow.ReceiveChannel, _ bool) {
		raw, _ := receive(ctx, c)
		versions := ParseTrigger(raw)
		r.AtLeast = append(r.AtLeast, versions...)
		if len(versions) == 0 && workflow.GetVersion(ctx, changePlainTriggerReadsLive, workflow.DefaultVersion, 1) == 1 {
			// A trigger naming no version (the watcher's for a deleted Deployment, `starter
			// sync`): the next sync reads live, not a snapshot a wait took before it. One
			// that came in the task of the wait's return was lost otherwise: the sync
			// decided on the wait's snapshot, found the rollout converged, and the run
			// continued as new, idle, for a Deployment already gone.
			r.LiveNext = true
		}
		if r.await != nil && !(len(versions) == 0 && r.takeOver(ctx)) {
			// AwaitChange sees every change the watcher can signal (it weighs the
			// Deployment, its ReplicaSets and pods on the worker's cache) and returns when
			// a sync would write: a trigger adds nothing but history.
			return
		}
		r.Dirty = true
	})
	sel.AddReceive(r.pause, func(c workflow.ReceiveChannel, _ bool) {
		receive(ctx, c)
		t := true
		r.Pause = &t
		r.log.Info("Pause requested")
	})
	sel.AddReceive(r.resume, func(c workflow.ReceiveChannel, _ bool) {
		receive(ctx, c)
		f := false
		r.Pause = &f
		r.log.Info("Resume requested")
	})
	sel.AddReceive(r.rollback, func(c workflow.ReceiveChannel, _ bool) {
		raw, err := receive(ctx, c)
		var rev int64
		if err == nil {
			rev, err = ParseRollback(raw)
		}
		if err != nil {
			r.Status.IgnoredSignal = "rollback: " + err.Error()
			r.log.Warn("Ignoring malformed rollback signal", "payload", string(raw), "error", err)
			return
		}
		r.RollbackTo = &rev
		r.Dirty = true
		r.log.Info("Rollback requested", "revision", rev)
	})
	sel.AddReceive(r.kick, func(c workflow.ReceiveChannel, _ bool) {
		var v bool
		c.Receive(ctx, &v)
	})
	r.canary.addTo(ctx, sel)
	r.blueGreen.addTo(ctx, sel)
}

// markProgressed notes the run's first write of a rollout: a sync's, or a move its wait made.
func (r *deploymentRun) markProgressed(ctx workflow.Context) {
	if r.progressed {
		return
	}
	r.progressed = true
	r.startedAt = workflow.Now(ctx)
	workflow.GetMetricsHandler(ctx).Counter("rollout_rollouts_started").Inc(1)
}

// maxBackoff bounds the wait before a sync after failures.
const maxBackoff = 5 * time.Minute

// backoffFor is 2s, 4s, 8s ... up to maxBackoff.
func backoffFor(failures int) time.Duration {
	return min(time.Second<<min(max(failures, 1), 9), maxBackoff)
}
