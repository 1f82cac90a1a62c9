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
	// recordUpdate: an update was applied; the next wait is the activity too, so the workflow
	// task that accepted it completes and records it at once.
	recordUpdate bool
	// atRest: the last wait ended AwaitRest (the rollout is held at rest on the cluster): no
	// wait runs until a signal, an update or a timer makes the next sync.
	atRest bool
	// observed: the snapshot AwaitChange decided on; the next sync uses it instead of an
	// Observe of its own.
	observed *k8s.Snapshot

	wakeAt     time.Time
	wake       workflow.Future
	cancelWake workflow.CancelFunc
}

// waitForWork blocks until a signal or the wake timer.
func (r *rollout) waitForWork(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	r.addSignals(ctx, sel)
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if r.wake != nil {
		sel.AddFuture(r.wake, func(workflow.Future) {
			r.wake, r.cancelWake, r.wakeAt = nil, nil, time.Time{}
			r.dirty = true
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
			r.dirty = true
			r.observed = res.Snapshot
			if len(res.Moves) > 0 {
				// The wait made the rollout's scale moves itself (AwaitInput.Inline).
				r.markProgressed(ctx)
				r.inlineMoves += len(res.Moves)
			}
			if res.Reason == activities.AwaitGone {
				r.liveNext = true
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
		Namespace: r.in.Namespace, Name: r.in.Name, UID: r.uid, AtLeast: r.atLeast,
		Request: k8s.Request{RollbackTo: r.rollbackTo, Canary: r.canaryReq, Managed: r.managed}, MaxWait: awaitMaxWait,
	}
	if in.Request.Managed {
		in.Request.ManagedProgress, in.Request.ManagedGuard = r.progress, r.managedGuard
	}
	ann := r.rolloutAnnotations
	in.RolloutAnnotations = &ann
	// A plain rollout's scale moves are the wait's to make (activities.inlineMoves) while the
	// Deployment stays at the generation this sync decided on.
	in.Inline = !r.managed && r.canaryReq == nil && r.rollbackTo == nil && r.traffic == nil && r.bg == nil && r.abort == nil
	// So are a stepped rollout's moves within its step, with no traffic routing (the route
	// follows the pods through the sync's gate) and not blue-green.
	if !in.Inline && !r.managed && r.canaryReq != nil && !r.canaryReq.BlueGreen && r.rollbackTo == nil && r.traffic == nil &&
		r.bg == nil && r.abort == nil && workflow.GetVersion(ctx, changeInlineCanaryMoves, workflow.DefaultVersion, 1) >= 1 {
		in.Inline, in.InlineCanary = true, true
	}
	in.Generation = r.generation
	// With traffic routing, the wait also wakes the workflow when the route should move (the
	// pods it weighs changed, k8s.DecideTraffic), so a held rollout keeps following them.
	if r.traffic != nil && r.trafficAsk != nil && r.trafficChange(ctx)(k8s.ChangeTrafficFollowsPods) {
		t := r.traffic
		in.Traffic = &activities.AwaitTraffic{Ask: *r.trafficAsk, Weight: t.CanaryWeight, Changes: r.trafficChanges, NeedsCanaryPods: r.headerStep(),
			Cur:       &k8s.TrafficState{StableHash: t.Stable.Hash, CanaryHash: t.Canary.Hash, Route: k8s.RouteState{CanaryWeight: t.CanaryWeight, HeaderRoutes: t.HeaderRoutes}},
			Returning: r.abort != nil}
	}
	// Held (a step's pause or analysis, a freeze, a blue-green preview): once at rest the wait
	// ends (AwaitRest) rather than heartbeat for as long as the hold lasts.
	if r.canaryReq != nil && r.canaryReq.Hold && workflow.GetVersion(ctx, changeHeldAtRest, workflow.DefaultVersion, 1) >= 1 {
		in.Rest = true
	}
	if r.localWait > 0 && !r.awaitRemote && !r.recordRollback && !r.recordUpdate {
		in.MaxWait = r.localWait
		lctx, cancel := workflow.WithCancel(workflow.WithLocalActivityOptions(ctx, localAwaitOptions(r.localWait)))
		r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteLocalActivity(lctx, a.AwaitChange, in), cancel, true
		return
	}
	opts := awaitActivityOptions(ctx)
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
	in := activities.AwaitInput{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.uid, Retry: true, MaxWait: awaitMaxWait}
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(ctx, awaitActivityOptions(ctx)))
	r.await, r.cancelAwait, r.awaitLocal = workflow.ExecuteActivity(actx, a.AwaitChange, in), cancel, false
}

// stopAwait cancels a wait still running: a signal or timer came first, and the sync that
// follows starts a new one on its own writes.
func (r *rollout) stopAwait() {
	if r.cancelAwait != nil {
		r.cancelAwait()
	}
	r.await, r.cancelAwait, r.awaitLocal = nil, nil, false
}

// scheduleWake keeps one timer for a converged Deployment: the recheck its plan asks for (a
// progress deadline, minReadySeconds). A rollout under way is woken by AwaitChange, which also
// wakes it at its progress deadline and after awaitMaxWait.
func (r *rollout) scheduleWake(ctx workflow.Context, plan k8s.Plan) {
	if !plan.Phase.Converged() || plan.RecheckAt == nil {
		return
	}
	r.setWake(ctx, plan.RecheckAt.Time)
}

// setWake starts the timer unless one already fires no later than at (within a second).
func (r *rollout) setWake(ctx workflow.Context, at time.Time) {
	if r.wake != nil && !r.wakeAt.After(at.Add(time.Second)) {
		return
	}
	if r.cancelWake != nil {
		r.cancelWake()
	}
	d := at.Sub(workflow.Now(ctx))
	if d < time.Second {
		d = time.Second
	}
	tctx, cancel := workflow.WithCancel(ctx)
	r.wake = workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: fmt.Sprintf("sync %s/%s again at %s", r.in.Namespace, r.in.Name, at.UTC().Format(time.RFC3339))})
	r.wakeAt, r.cancelWake = at, cancel
}
