package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// waitState is the wait between two syncs: for a rollout under way, AwaitChange (as an
// activity, or first inside the workflow task with --local-wait); for a converged one, the
// wake timer of its plan's recheck or a backoff.
type waitState struct {
	// rolling: the last sync left a rollout under way; AwaitChange waits for its next move.
	rolling     bool
	await       workflow.Future
	cancelAwait workflow.CancelFunc
	// localWait is the worker's --local-wait, as its last Observe reported it (so a replay
	// decides as the run did): how long the wait for a rollout's next move runs first inside
	// the workflow task, as a local AwaitChange. 0: the wait is always the AwaitChange
	// activity, and the workflow task completes after every sync. Signals, updates and
	// queries that arrive during a local wait are delivered when it ends.
	localWait time.Duration
	// awaitLocal: the pending wait is the local one; awaitRemote: it ended without a move, so
	// the next wait before a sync is the AwaitChange activity.
	awaitLocal, awaitRemote bool
	// atRest: the last wait ended AwaitRest (the rollout is held at rest on the cluster): no
	// wait runs until a signal, an update or a timer makes the next sync.
	atRest bool
	// observed: the snapshot AwaitChange decided on; the next sync uses it instead of an
	// Observe of its own.
	observed *k8s.Snapshot

	wakeAt     time.Time
	wake       workflow.Future
	cancelWake workflow.CancelFunc
	// deployment names the Deployment ("namespace/name") in the timers' summaries.
	deployment string
}

// waitForWork blocks until a signal or the wake timer.
func (r *rollout) waitForWork(ctx workflow.Context) {
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
			local := r.awaitLocal
			r.await, r.cancelAwait, r.awaitLocal = nil, nil, false
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
func (r *rollout) startAwait(ctx workflow.Context) {
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
	in.Generation = r.generation
	// With traffic routing, the wait also wakes the workflow when the route should move (the
	// pods it weighs changed, k8s.DecideTraffic), so a held rollout keeps following them.
	if r.Traffic != nil && r.route.ask != nil && r.route.change(ctx)(k8s.ChangeTrafficFollowsPods) {
		t := r.Traffic
		in.Traffic = &activities.AwaitTraffic{Ask: *r.route.ask, Weight: t.CanaryWeight, Changes: r.route.changes, NeedsCanaryPods: r.headerStep(),
			Cur:       &k8s.TrafficState{StableHash: t.Stable.Hash, CanaryHash: t.Canary.Hash, Route: k8s.RouteState{CanaryWeight: t.CanaryWeight, HeaderRoutes: t.HeaderRoutes}},
			Returning: r.Abort != nil}
	}
	// Held (a step's pause or analysis, a freeze, a blue-green preview): once at rest the wait
	// ends (AwaitRest) rather than heartbeat for as long as the hold lasts.
	if r.canaryReq != nil && r.canaryReq.Hold && workflow.GetVersion(ctx, changeHeldAtRest, workflow.DefaultVersion, 1) >= 1 {
		in.Rest = true
	}
	if r.LocalWait > 0 && !r.awaitRemote && !r.recordRollback && !r.recordUpdate {
		in.MaxWait = r.LocalWait
		lctx, cancel := workflow.WithCancel(workflow.WithLocalActivityOptions(ctx, localAwaitOptions(r.LocalWait)))
		r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteLocalActivity(lctx, a.AwaitChange, in), cancel, true
		return
	}
	opts := awaitOptions
	opts.Summary = "wait for the next move of " + r.in.Namespace + "/" + r.in.Name
	if in.Rest {
		opts.Summary += " (held: ends once at rest)"
	}
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, opts))
	r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteActivity(actx, a.AwaitChange, in), cancel, false
	r.recordRollback, r.recordUpdate = false, false
}

// startRetryAwait starts AwaitChange for a stale decision's retry (AwaitInput.Retry): the
// workflow task ends, and the retry's sync follows once the client budget admits it.
func (r *rollout) startRetryAwait(ctx workflow.Context) {
	r.stopAwait()
	in := activities.AwaitInput{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID, Retry: true, MaxWait: awaitMaxWait}
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, awaitOptions))
	r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteActivity(actx, a.AwaitChange, in), cancel, false
}

// stopAwait cancels a wait still running: a signal or timer came first, and the sync that
// follows starts a new one on its own writes.
func (w *waitState) stopAwait() {
	if w.cancelAwait != nil {
		w.cancelAwait()
	}
	w.await, w.cancelAwait, w.awaitLocal = nil, nil, false
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
