package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/k8s"
)

// AwaitInput names the Deployment a rollout is under way for, the versions the cache must hold
// before it is weighed (our last writes), and the request the workflow would sync with.
type AwaitInput struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	UID       types.UID           `json:"uid"`
	AtLeast   []k8s.ObjectVersion `json:"atLeast,omitempty"`
	Request   k8s.Request         `json:"request"`
	// MaxWait is how long to wait at most; the workflow then syncs anyway (its resync).
	MaxWait time.Duration `json:"maxWait"`
	// RolloutAnnotations, when set, are the stepped-rollout annotations the request was
	// weighed on (k8s.RolloutAnnotations): a Deployment whose annotations differ calls for a
	// sync (steps added, fixed or removed mid-rollout).
	RolloutAnnotations *string `json:"rolloutAnnotations,omitempty"`
	// Retry: the workflow's last decisions were stale more than once in a row; it syncs again
	// from a live read. The wait weighs nothing: it returns AwaitDecide, with no snapshot, as
	// soon as Admission admits a move (at most maxHold), so that a run of retries neither
	// holds one workflow task open nor jumps the queue of a saturated client budget.
	Retry bool `json:"retry,omitempty"`
	// Inline: the workflow lets the wait make a plain rollout's scale moves itself (see
	// inlineMoves), while the Deployment is still at Generation, the one its last sync
	// decided on. Set only for a full-mode rollout with no steps and no pending rollback.
	Inline     bool  `json:"inline,omitempty"`
	Generation int64 `json:"generation,omitempty"`
	// InlineCanary (with Inline): the wait also makes a stepped rollout's scale moves within
	// its step (no traffic routing, not blue-green, no abort or rollback), while the
	// Deployment keeps the generation and the rollout annotations (RolloutAnnotations) its
	// last sync decided on; a move that enters or leaves the step's hold, or reaches the step,
	// is the workflow's.
	InlineCanary bool `json:"inlineCanary,omitempty"`
	// InlineAnnotated (with Inline): the wait also makes the moves of a rollout whose request
	// has no canary although the Deployment has stepped-rollout annotations (its steps passed,
	// the rollout goes to 100% as a plain one; or a return to the stable template at full
	// speed), while the annotations are the ones its last sync decided on (RolloutAnnotations)
	// and name no traffic routing and no blue-green.
	InlineAnnotated bool `json:"inlineAnnotated,omitempty"`
	// Traffic: the route as the last sync left it and what it asked; a change of the pods that
	// would move the route (k8s.DecideTraffic) calls for a sync, held rollout or not.
	Traffic *AwaitTraffic `json:"traffic,omitempty"`
	// InlineTraffic (with Inline and Traffic): the wait also makes a routed rollout's moves
	// (see routeInline): each route move through the gate (SyncTraffic, as the sync runs it,
	// before the plan's scale moves), then the scale moves as InlineCanary or InlineAnnotated
	// allow them. Not for a held rollout (Rest).
	InlineTraffic *InlineTraffic `json:"inlineTraffic,omitempty"`
	// Rest: the rollout is held (a step's pause, an analysis, a freeze, a blue-green preview
	// waiting for promotion). Once the Deployment is held at rest on the cluster
	// (k8s.HeldAtRest) and no sync would write, the wait returns AwaitRest and the workflow
	// waits with no activity: the watcher signals what would move it. Only a worker whose
	// watcher runs beside it (Activities.RestWatched) returns AwaitRest.
	Rest bool `json:"rest,omitempty"`
	// RestCheck (with Rest): look once, as soon as the cache holds AtLeast (within MaxWait),
	// and return: AwaitRest if the rollout is held at rest, AwaitResync if nothing is to be
	// done but it is not at rest yet, as the wait would otherwise return. It writes nothing.
	// The workflow runs it as a local activity in the task of its last sync, at no action,
	// and starts the AwaitChange activity only when it does not return AwaitRest.
	RestCheck bool `json:"restCheck,omitempty"`
}

// AwaitTraffic is a routed rollout's traffic as the wait weighs it: what the last sync asked,
// the canary's weight it left on the route, and the traffic change IDs in force for the run
// (a change not listed is).
type AwaitTraffic struct {
	Ask     k8s.TrafficAsk  `json:"ask"`
	Weight  int32           `json:"weight"`
	Changes map[string]bool `json:"changes,omitempty"`
	// NeedsCanaryPods: the step (setHeaderRoute) passes only once the canary has an available
	// pod.
	NeedsCanaryPods bool `json:"needsCanaryPods,omitempty"`
	// Cur: the route and Services as the last sync left them; the wait weighs what a sync
	// would write through the gate (k8s.GateTraffic), so a route the gate holds does not wake
	// the workflow until the pods change what it allows. Returning: an abort is under way.
	Cur       *k8s.TrafficState `json:"cur,omitempty"`
	Returning bool              `json:"returning,omitempty"`
}

// InlineTraffic is what the wait needs beside AwaitTraffic to move a route as the workflow's
// sync would (workflows' syncRoute): the traffic annotation as the sync parsed it, the route's
// name for the events, and every header route the steps add (SyncTrafficInput).
type InlineTraffic struct {
	Spec              k8s.TrafficSpec   `json:"spec"`
	Route             string            `json:"route"`
	KnownHeaderRoutes []k8s.HeaderRoute `json:"knownHeaderRoutes,omitempty"`
	// Fence: the epoch of the rule's fence the wait was started under
	// (SyncTrafficInput.Fence): a workflow that gives the wait up raises it on the route,
	// and the wait moves nothing more, the route nor a ReplicaSet.
	Fence int64 `json:"fence,omitempty"`
}

// moves reports whether a sync on plan would move the route, and whether the route carries
// the step's weight as far as the sizes allow (k8s.TrafficStepReached).
func (t *AwaitTraffic) moves(rss []*appsv1.ReplicaSet, plan k8s.Plan) (move, reached bool) {
	return t.Moves(rss, plan)
}

// Moves is moves, for the workflow tests' fake wait, which weighs the route as this one does.
func (t *AwaitTraffic) Moves(rss []*appsv1.ReplicaSet, plan k8s.Plan) (move, reached bool) {
	dec := k8s.DecideTraffic(t.Ask, rss, plan, t.on)
	reached = true
	if t.Ask.Canary != t.Ask.Stable {
		sizes := k8s.SizesAfter(rss, plan)
		reached = k8s.TrafficStepReached(t.Weight, t.Ask.Target, sizes[t.Ask.Canary], sizes[t.Ask.Stable])
	}
	if t.NeedsCanaryPods && k8s.SizesAfter(rss, plan)[t.Ask.Canary] > 0 && min(dec.Available[t.Ask.Canary], dec.After[t.Ask.Canary]) <= 0 {
		reached = false
	}
	if c := t.Cur; c != nil {
		want := k8s.TrafficState{StableHash: dec.Stable, CanaryHash: dec.Canary, Route: k8s.RouteState{CanaryWeight: dec.Weight, HeaderRoutes: c.Route.HeaderRoutes}}
		g := k8s.GateTraffic(k8s.TrafficSpec{}, k8s.GateInput{Cur: *c, Want: want, Available: k8s.AvailablePods(rss), Sizes: k8s.SizesAfter(rss, plan),
			Returning: t.Returning || dec.Abort, Handover: dec.Handover})
		return g.Want.Route.CanaryWeight != c.Route.CanaryWeight || g.Want.StableHash != c.StableHash || g.Want.CanaryHash != c.CanaryHash, reached
	}
	return dec.Weight != t.Weight, reached
}

// on reports whether a traffic change is in force for the run: asked and on, or not asked
// (a run that asks it later gets it).
func (t *AwaitTraffic) on(change string) bool {
	on, asked := t.Changes[change]
	return on || !asked
}

// Await reasons: why AwaitChange returned.
const (
	// AwaitDecide: a sync would do more than refresh status counts (scale, create, adopt,
	// clean up, change a condition, complete or end the rollout).
	AwaitDecide = "Decide"
	// AwaitGone: the cache no longer holds the Deployment, or holds another one of the same
	// name; the sync confirms it live.
	AwaitGone = "Gone"
	// AwaitResync: MaxWait passed.
	AwaitResync = "Resync"
	// AwaitFailed: a status refresh failed; the sync reports it.
	AwaitFailed = "StatusWriteFailed"
	// AwaitBusy: run as a local activity while every local wait slot of this worker is taken
	// (Activities.LocalWaits); the workflow waits in the AwaitChange activity instead.
	AwaitBusy = "Busy"
	// AwaitRest: the rollout is held at rest (AwaitInput.Rest); the workflow waits for a
	// signal, an update or its own timers, and starts no wait until one comes.
	AwaitRest = "Rest"
)

// AwaitResult says why the wait ended and how many status refreshes it wrote meanwhile.
type AwaitResult struct {
	Reason string `json:"reason"`
	// StatusWrites counts the status writes made while waiting: refreshes of the counts and,
	// with Completed, the completing one.
	StatusWrites int `json:"statusWrites,omitempty"`
	// Completed: the last status write completed the rollout (the Progressing condition
	// turned NewReplicaSetAvailable); the sync that follows records the convergence.
	Completed bool `json:"completed,omitempty"`
	// Unwatched (RestCheck): this worker runs no watcher beside it (Activities.RestWatched),
	// so no wait of its ends AwaitRest.
	Unwatched bool `json:"unwatched,omitempty"`
	// Steps are the kinds of write the sync would make, for the history reader.
	Steps []k8s.StepKind `json:"steps,omitempty"`
	// Held is how long the move waited for the client budget (see Admission) before the wait
	// handed it to the workflow.
	Held time.Duration `json:"held,omitempty"`
	// Snapshot is what the decision was weighed on, redacted as Observe's (with Reason
	// AwaitDecide): the sync decides on it and records no Observe of its own.
	Snapshot *k8s.Snapshot `json:"snapshot,omitempty"`
	Error    string        `json:"error,omitempty"`
	// Moves are the scale moves the wait made itself (AwaitInput.Inline), in order.
	Moves []Move `json:"moves,omitempty"`
	// RouteMoves are the route moves the wait made itself (AwaitInput.InlineTraffic), in
	// order; Traffic is the last one's result, the route as the wait left it, which the
	// workflow records as its sync's own.
	RouteMoves []RouteMove        `json:"routeMoves,omitempty"`
	Traffic    *SyncTrafficResult `json:"traffic,omitempty"`
	// RouteUnknown: a route move of the wait failed, perhaps part-way (a write conflicted, the
	// fence or the gateways stopped it): the route may be neither as Traffic says nor as
	// asked, and the sync reads it again.
	RouteUnknown bool `json:"routeUnknown,omitempty"`
}

// RouteMove is one route move AwaitChange made itself through the gate: the canary's weight
// From → To, and the templates the stable and canary Services select after it.
type RouteMove struct {
	From   int32     `json:"from"`
	To     int32     `json:"to"`
	Stable string    `json:"stable"`
	Canary string    `json:"canary"`
	Hold   string    `json:"hold,omitempty"`
	At     time.Time `json:"at"`
}

// Move is one scale move AwaitChange made itself: a ReplicaSet's replicas From → To, with
// the Deployment's status written after it, and the move's event recorded.
type Move struct {
	Kind       k8s.StepKind `json:"kind"`
	ReplicaSet string       `json:"replicaSet"`
	From       int32        `json:"from"`
	To         int32        `json:"to"`
	At         time.Time    `json:"at"`
}

const (
	// heartbeatEvery paces the heartbeats of a wait with a heartbeat timeout under two minutes
	// (runs before sparse-await-heartbeats: 20 s); the SDK throttles them further, to one
	// reaching the server every 16 s.
	heartbeatEvery = 5 * time.Second
	// catchUpBound bounds the wait for the cache to hold our own writes. A Deployment the
	// cache saw deleted (or replaced by a new UID) ends the wait at once.
	catchUpBound = 2 * time.Second
)

// AwaitChange is the wait between two syncs of a rollout under way. It lives in the worker:
// it sleeps on the worker's informer cache and weighs every change to the Deployment, its
// ReplicaSets or (Recreate) its pods with k8s.Decide, the same engine the sync runs, so the
// workflow wakes within the informer's latency of a change that calls for a decision.
//
// A change that would only refresh the status counts (upstream writes those on every
// ReplicaSet status change) is written here at once, with the Deployment's resourceVersion as
// precondition, and costs the history nothing: `kubectl rollout status` stays live while a
// 10-replica rollout's history stays a few syncs long. So is the status write that completes
// a plain rollout (k8s.SyncNeed): `kubectl rollout status` returns as soon as the last old
// pod is gone, not after a round trip through the Temporal server; the wait then returns
// AwaitDecide, with Completed, once its cache holds that write, and the workflow's sync on it
// finds nothing to write and converges. Anything else returns AwaitDecide and the workflow
// syncs, recording each write as its own step.
//
// It heartbeats (see heartbeatPace: with the workflow's 5-minute heartbeat timeout, once every
// 3¾ minutes), and returns on cancellation or after MaxWait (or at the progress deadline, as a
// Decide). A cancellation reaches it with its next heartbeat's answer: until then a wait its
// workflow gave up on goes on weighing; its writes keep their preconditions (the Deployment's
// resourceVersion, the ReplicaSet's replicas, the generation and annotations it was started
// for), so the workflow's own writes make its stale ones fail.
//
// The workflow runs it first as a local activity, inside the workflow task that made the last
// writes, for a short MaxWait: a move that comes within it is synced in the same task, with no
// round trip through the Temporal server. Local waits take one of LocalWaits' slots, or return
// AwaitBusy at once when none is free.
func (a *Activities) AwaitChange(ctx context.Context, in AwaitInput) (AwaitResult, error) {
	if in.Namespace == "" || in.Name == "" {
		return AwaitResult{}, nonRetryable(ErrInvalid, "await change: namespace and name are required, got %q/%q", in.Namespace, in.Name)
	}
	if a.Cache == nil {
		return AwaitResult{}, nonRetryable(ErrInvalid, "await change: the worker has no informer cache")
	}
	// A RestCheck is one look, in the slot of the sync whose workflow task runs it: it takes
	// none of the local waits'.
	if a.LocalWaits != nil && !in.RestCheck && activity.IsActivity(ctx) && activity.GetInfo(ctx).IsLocalActivity {
		select {
		case a.LocalWaits <- struct{}{}:
			defer func() { <-a.LocalWaits }()
		default:
			return AwaitResult{Reason: AwaitBusy}, nil
		}
	}
	if in.Retry {
		return a.admitRetry(ctx, in)
	}
	if in.RestCheck && !a.RestWatched {
		return AwaitResult{Reason: AwaitResync, Unwatched: true}, nil
	}
	wake, stop := a.Cache.Subscribe(in.Namespace, in.Name)
	defer stop()
	maxWait := in.MaxWait
	if maxWait <= 0 {
		maxWait = 5 * time.Minute
	}
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	beat := time.NewTicker(heartbeatPace(ctx))
	defer beat.Stop()
	var recheck, retry, hold <-chan time.Time
	started, local := time.Now(), activity.IsActivity(ctx) && activity.GetInfo(ctx).IsLocalActivity
	var heldSince time.Time

	var res AwaitResult
	// holdFrom: when the move being weighed began to be held (maxHold bounds each move).
	holdFrom := started
	atLeast, catchUpBy := in.AtLeast, time.Now().Add(catchUpBound)
	for {
		if a.Cache.DeploymentDeleted(in.UID) {
			// Gone for good, whichever of our writes the cache has yet to show: do not wait
			// for them (the ReplicaSets of a Deployment deleted and created again under its
			// name, say, which the garbage collector deletes).
			res.Reason = AwaitGone
			return res, nil
		}
		caughtUp := a.Cache.CaughtUp(in.Namespace, atLeast)
		if !caughtUp && time.Now().After(catchUpBy) {
			// An object we wrote may be gone before this informer saw it: weigh what the
			// cache holds; at worst the sync it asks for reads live.
			atLeast, caughtUp = nil, true
		}
		retry, hold = nil, nil
		if !caughtUp {
			retry = time.After(10 * time.Millisecond)
		} else {
			d, err := a.Cache.Deployment(in.Namespace, in.Name)
			if apierrors.IsNotFound(err) || (err == nil && in.UID != "" && d.UID != in.UID) {
				res.Reason = AwaitGone
				return res, nil
			}
			if err != nil {
				return res, classify("get cached deployment "+in.Namespace+"/"+in.Name, err)
			}
			snap := a.Cache.Snapshot(d)
			plan, err := k8s.Decide(snap, in.Request, time.Now())
			if err != nil {
				res.Reason, res.Error = AwaitDecide, err.Error()
				return res, nil
			}
			canary := in.Request.Canary
			stepReached := canary != nil && !canary.Hold && plan.CanaryReached
			annotated := in.RolloutAnnotations != nil && *in.RolloutAnnotations != k8s.RolloutAnnotations(d.Annotations)
			routeMoves := false
			if in.Traffic != nil {
				var reached bool
				routeMoves, reached = in.Traffic.moves(snap.ReplicaSets, plan)
				stepReached = stepReached && reached
			}
			need := k8s.SyncNeed(plan, d, in.Request, k8s.UnderWay)
			switch {
			case plan.CanaryStale || stepReached || annotated || (routeMoves && !routeInline(plan, d, snap.ReplicaSets, need, in, local)):
				// The template changed under a stepped rollout, or the rollout reached its
				// step's weight: the workflow takes its next step.
				return res.decide(plan, a.redactSnapshot(snap)), nil
			case need == k8s.NeedNothing && (res.Completed || plan.Phase.Converged()):
				// Our completing write (below) is in the cache, or the rollout had converged
				// before this wait began (a wait run again after its workflow task was lost,
				// whose first run wrote the completing status): the workflow syncs on it,
				// finds nothing to write, and converges.
				return res.decide(plan, a.redactSnapshot(snap)), nil
			case need == k8s.NeedNothing && !routeMoves && in.Rest && a.RestWatched && plan.RecheckAt == nil && k8s.HeldAtRest(d, snap.ReplicaSets):
				// Held, and nothing moves without a change the watcher signals: the workflow
				// waits without this activity and its heartbeats.
				res.Reason = AwaitRest
				return res, nil
			case in.RestCheck:
				// Not at rest yet: the AwaitChange activity waits, and makes what moves.
				res.Reason = AwaitResync
				return res, nil
			case need == k8s.NeedNothing && !routeMoves:
			case need == k8s.NeedStatus && !routeMoves:
				res.Completed = plan.Phase == k8s.PhaseComplete
				wr, err := a.UpdateDeploymentStatus(ctx, DeploymentWriteInput{Deployment: plan.Steps[0].Deployment})
				if err != nil {
					res.Completed = false
					if IsKind(err, ErrStale) || apierrors.IsConflict(err) {
						// Someone wrote the Deployment since; weigh it again once the
						// cache has it.
						break
					}
					if IsKind(err, ErrBusy) {
						// A local wait on a saturated budget: wait in the activity.
						res.Reason = AwaitBusy
						return res, nil
					}
					res.Reason, res.Error = AwaitFailed, err.Error()
					return res, nil
				}
				res.StatusWrites++
				// Wait for our own write before weighing again, or the next look would
				// see the old status and write it once more.
				atLeast, catchUpBy = wr.Wrote, time.Now().Add(catchUpBound)
			default:
				// A move: hand it to the workflow once the client budget can take it (see
				// Admission).
				if wait := a.Admission.Wait(time.Now()); wait > 0 && time.Since(holdFrom) < maxHold {
					if local {
						// A local wait holds its workflow task open: wait in the activity.
						res.Reason = AwaitBusy
						return res, nil
					}
					if heldSince.IsZero() {
						heldSince = time.Now()
					}
					hold = time.After(wait)
					break
				}
				if !heldSince.IsZero() {
					res.Held += time.Since(heldSince).Round(time.Millisecond)
					heldSince = time.Time{}
				}
				if routeMoves {
					// The route first, as the sync moves it before the plan's writes; then
					// look again at once: the same plan's scale moves or status come next.
					if err := a.moveRoute(ctx, d, snap, plan, in, &res); err != nil {
						if !errors.Is(err, errHandOver) {
							res.Error = err.Error()
						}
						return res.decide(plan, a.redactSnapshot(snap)), nil
					}
					holdFrom = time.Now()
					retry = time.After(0)
					break
				}
				steps, ok := inlineMoves(plan, d, in, local)
				if ok && in.InlineTraffic != nil {
					// A routed rollout's scale moves are the wait's only while its workflow has
					// not fenced it out (InlineTraffic.Fence).
					ok = a.fenceHolds(ctx, in)
				}
				if !ok {
					return res.decide(plan, a.redactSnapshot(snap)), nil
				}
				wrote, err := a.moveInline(ctx, d, steps, &res)
				if err != nil && !IsKind(err, ErrStale) {
					// The sync it hands over to writes again and reports the error.
					res.Error = err.Error()
					return res.decide(plan, a.redactSnapshot(snap)), nil
				}
				// Moved, or the decision was stale (someone wrote since): weigh again once
				// the cache holds what was written.
				atLeast, catchUpBy, holdFrom = wrote, time.Now().Add(catchUpBound), time.Now()
			}
			recheck = nil
			if plan.RecheckAt != nil {
				recheck = time.After(time.Until(plan.RecheckAt.Time) + 10*time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-deadline.C:
			res.Reason = AwaitResync
			return res, nil
		case <-beat.C:
			activity.RecordHeartbeat(ctx, res.StatusWrites)
		case <-recheck:
		case <-retry:
		case <-hold:
		case <-wake:
		}
	}
}

// inlineMoves returns the writes of a plan that the wait makes itself, with the status write
// folded into the last ReplicaSet write as a sync does (k8s.FoldStatus): a plain rollout's
// (AwaitInput.Inline) scale-ups and scale-downs of its existing ReplicaSets and the status
// after them, while the Deployment is the one the workflow's last sync decided on (same
// generation, not paused, RollingUpdate, none of our rollout annotations). Anything else (a
// ReplicaSet to create, adopt, release or delete, a rollback, a changed spec, a condition
// with an event) goes to the workflow. The moves skip one round trip through the Temporal
// server each, as upstream's controller moves within its informer's latency; each is listed
// in the result (Moves) and recorded as an event, as the workflow's own would be.
//
// A local wait (--local-wait) makes none: its workflow task syncs at once anyway.
func inlineMoves(plan k8s.Plan, d *appsv1.Deployment, in AwaitInput, local bool) ([]k8s.Step, bool) {
	canary := inlineCanary(in)
	if !in.Inline || local || in.Generation == 0 || d.Generation != in.Generation || !(k8s.PlainRollout(in.Request) || canary) ||
		in.Request.RollbackTo != nil || d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		plan.Phase != k8s.PhaseProgressing {
		return nil, false
	}
	if canary {
		// A move that reaches the step's replicas passes the step: the workflow's. A routed
		// step passes once the route carries its weight too (the route's moves that follow
		// are the wait's, InlineTraffic), so there the move is the wait's as well.
		if in.RolloutAnnotations == nil || *in.RolloutAnnotations != k8s.RolloutAnnotations(d.Annotations) || (plan.CanaryReached && in.InlineTraffic == nil) || plan.CanaryStale {
			return nil, false
		}
	} else if ann := k8s.RolloutAnnotations(d.Annotations); ann != k8s.RolloutAnnotations(nil) && !inlineAnnotated(in, d, ann) {
		return nil, false
	}
	// The closing status folds into the last scale (a plan that only writes status was
	// written above as a refresh).
	steps := k8s.FoldStatus(plan.Steps)
	for _, st := range steps {
		switch {
		case (st.Kind == k8s.StepScaleUp || st.Kind == k8s.StepScaleDown) && st.ReplicaSet != nil:
			if canary && st.Deployment != nil && k8s.HoldChanges(d, st.Deployment) {
				return nil, false
			}
			if in.InlineAnnotated && st.Deployment != nil && (k8s.HoldChanges(d, st.Deployment) || k8s.RecordsStable(d, st.Deployment)) {
				// Leaving a hold, or recording the stable template, is the workflow's.
				return nil, false
			}
			for _, e := range st.Events {
				if e.Type != corev1.EventTypeNormal {
					return nil, false
				}
			}
		default:
			return nil, false
		}
	}
	return steps, len(steps) > 0
}

// moveInline makes inlineMoves' writes in order, each ReplicaSet write with the preconditions
// of the workflow's own (writeReplicaSet: a ReplicaSet changed since the decision makes it
// stale), and lists them in res.Moves. It returns the versions written.
func (a *Activities) moveInline(ctx context.Context, d *appsv1.Deployment, steps []k8s.Step, res *AwaitResult) ([]k8s.ObjectVersion, error) {
	var wrote []k8s.ObjectVersion
	for _, st := range steps {
		wr, err := a.writeReplicaSet(ctx, WriteReplicaSetInput{
			Deployment: refOf(d), ReplicaSet: st.ReplicaSet, FromReplicas: st.FromReplicas, Events: st.Events, ThenStatus: st.Deployment,
		})
		wrote = append(wrote, wr.Wrote...)
		if len(wr.Wrote) > 0 {
			res.Moves = append(res.Moves, Move{Kind: st.Kind, ReplicaSet: st.ReplicaSet.Name, From: st.FromReplicas, To: wr.Replicas, At: time.Now().UTC()})
			if st.Deployment != nil && len(wr.Wrote) > 1 {
				res.StatusWrites++
			}
		}
		if err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

// maxRouteMoves bounds the route moves one wait makes; past it the workflow syncs.
const maxRouteMoves = 50

// errHandOver: the wait's route move left something for the workflow's sync to record or decide
// (the gate held, an invariant check failed, the route did not move); not an error.
var errHandOver = errors.New("route move handed to the workflow")

// routeInline reports whether the wait makes a routed rollout's route move for plan itself
// (AwaitInput.InlineTraffic), as the workflow's sync would through the same gate: a plan
// under way on the generation and annotations the last sync decided on, whose other writes
// are a status refresh or scale moves the wait makes (inlineMoves), with the Services on the
// templates the last sync asked for, and no header route to a canary that has no available
// pod before or after the plan (the sync drops those, change traffic-step-pods). A local
// wait, a rest check and a held rollout's wait make none.
func routeInline(plan k8s.Plan, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, need k8s.Need, in AwaitInput, local bool) bool {
	t := in.Traffic
	if in.InlineTraffic == nil || t == nil || t.Cur == nil || !in.Inline || local || in.RestCheck || in.Rest || in.Generation == 0 ||
		d.Generation != in.Generation || d.Spec.Paused || plan.Phase != k8s.PhaseProgressing || t.NeedsCanaryPods {
		return false
	}
	if len(t.Cur.Route.HeaderRoutes) > 0 && min(k8s.AvailablePods(rss)[t.Ask.Canary], k8s.AvailableAfter(rss, plan)[t.Ask.Canary]) <= 0 {
		return false
	}
	switch need {
	case k8s.NeedNothing, k8s.NeedStatus:
		return true
	}
	_, ok := inlineMoves(plan, d, in, local)
	return ok
}

// moveRoute makes the route move a sync on plan would make (workflows' syncRoute), through
// the gate (SyncTraffic), and lists it in res. It returns errHandOver when the workflow must
// take over: the gate held, the route left fails its invariant check, or nothing moved.
func (a *Activities) moveRoute(ctx context.Context, d *appsv1.Deployment, snap k8s.Snapshot, plan k8s.Plan, in AwaitInput, res *AwaitResult) error {
	t, it := in.Traffic, in.InlineTraffic
	if len(res.RouteMoves) >= maxRouteMoves {
		return errHandOver
	}
	dec := k8s.DecideTraffic(t.Ask, snap.ReplicaSets, plan, t.on)
	if dec.Stable != t.Cur.StableHash || dec.Canary != t.Cur.CanaryHash {
		// A Service switches templates: the workflow's move.
		return errHandOver
	}
	want := k8s.TrafficState{StableHash: dec.Stable, CanaryHash: dec.Canary, Route: k8s.RouteState{CanaryWeight: dec.Weight, HeaderRoutes: t.Cur.Route.HeaderRoutes}}
	out, err := a.SyncTraffic(ctx, SyncTrafficInput{
		Deployment: refOf(d), Spec: it.Spec, Want: want, Available: dec.Available, AvailableAfter: dec.After, Handover: dec.Handover,
		Abort: dec.Abort || t.Returning, SizesAfter: k8s.SizesAfter(snap.ReplicaSets, plan), KnownHeaderRoutes: it.KnownHeaderRoutes,
		Events:     []k8s.Event{{Type: corev1.EventTypeNormal, Reason: "TrafficShifted", Message: k8s.TrafficMessage(it.Route, it.Spec, want, dec.Available, t.Ask.Target)}},
		Fence:      it.Fence,
		FenceCheck: true,
	})
	if err != nil {
		res.RouteUnknown = true
	}
	if IsKind(err, ErrFenced) || IsKind(err, ErrStale) {
		// Fenced (the workflow gave this wait up), or another writer moved the route since
		// it was read: the workflow's sync reads it again.
		return errHandOver
	}
	if err != nil {
		// The workflow's sync reads the route again and moves it, or reports why not.
		return err
	}
	res.Traffic = &out
	res.RouteMoves = append(res.RouteMoves, RouteMove{From: t.Cur.Route.CanaryWeight, To: out.After.Route.CanaryWeight,
		Stable: out.After.StableHash, Canary: out.After.CanaryHash, Hold: out.Hold, At: time.Now().UTC()})
	check := out.Check
	for _, m := range out.Moves {
		check += m.Check
	}
	if out.Hold != "" || check != "" || sameTraffic(out.After, *t.Cur) {
		return errHandOver
	}
	cur := out.After
	t.Cur, t.Weight = &cur, cur.Route.CanaryWeight
	return nil
}

// fenceHolds reports whether the route still carries the fence epoch the wait was started
// under (InlineTraffic.Fence), read live; a route it cannot read holds no fence for it.
func (a *Activities) fenceHolds(ctx context.Context, in AwaitInput) bool {
	it := in.InlineTraffic
	if a.Dynamic == nil {
		return false
	}
	route, err := a.Dynamic.Resource(HTTPRouteResource).Namespace(in.Namespace).Get(ctx, it.Spec.HTTPRoute.Name, metav1.GetOptions{})
	return err == nil && routeFence(route, it.Spec.HTTPRoute.Rule) == it.Fence
}

// sameTraffic: the same templates, weight and header routes.
func sameTraffic(a, b k8s.TrafficState) bool {
	return a.StableHash == b.StableHash && a.CanaryHash == b.CanaryHash && a.Route.CanaryWeight == b.Route.CanaryWeight &&
		k8s.HeaderRouteNames(a.Route.HeaderRoutes) == k8s.HeaderRouteNames(b.Route.HeaderRoutes)
}

// admitRetry is AwaitChange for a retry (AwaitInput.Retry): AwaitDecide once Admission admits
// the move, or AwaitGone at once for a Deployment the cache saw deleted.
func (a *Activities) admitRetry(ctx context.Context, in AwaitInput) (AwaitResult, error) {
	beat := time.NewTicker(heartbeatPace(ctx))
	defer beat.Stop()
	started, held := time.Now(), false
	for {
		if a.Cache.DeploymentDeleted(in.UID) {
			return AwaitResult{Reason: AwaitGone}, nil
		}
		wait := a.Admission.Wait(time.Now())
		if wait == 0 || time.Since(started) >= maxHold {
			res := AwaitResult{Reason: AwaitDecide}
			if held {
				res.Held = time.Since(started).Round(time.Millisecond)
			}
			return res, nil
		}
		held = true
		select {
		case <-ctx.Done():
			return AwaitResult{}, ctx.Err()
		case <-beat.C:
			activity.RecordHeartbeat(ctx)
		case <-time.After(wait):
		}
	}
}

// heartbeatPace is how often a wait calls RecordHeartbeat, from its heartbeat timeout: every
// heartbeatEvery under two minutes (the SDK sends one every 80% of the timeout, and folds the
// rest into it), and three quarters of the timeout from two minutes on, each of which reaches
// the server at once (the SDK sends a heartbeat at once when none went in the last min(80% of
// the timeout, the worker's MaxHeartbeatThrottleInterval, 60 s by default); from two minutes
// three quarters of the timeout is past that). With the workflow's 5-minute
// timeout (sparse-await-heartbeats) that is one heartbeat every 3¾ minutes, 75 s before the
// server would time the wait out, instead of one every 16 s: a wait of 3½ minutes costs none. A local wait
// (no heartbeats) or a call outside an activity gets heartbeatEvery; its beats do nothing.
func heartbeatPace(ctx context.Context) time.Duration {
	if !activity.IsActivity(ctx) {
		return heartbeatEvery
	}
	return heartbeatPaceFor(activity.GetInfo(ctx).HeartbeatTimeout)
}

// heartbeatPaceFor is heartbeatPace for a heartbeat timeout.
func heartbeatPaceFor(timeout time.Duration) time.Duration {
	if timeout < 2*time.Minute {
		return heartbeatEvery
	}
	return timeout * 3 / 4
}

// decide is the result that asks the workflow to sync: the writes the plan would make, and the
// snapshot it was weighed on, redacted as Observe's (recorded: a.redactSnapshot's).
func (res AwaitResult) decide(plan k8s.Plan, recorded k8s.Snapshot) AwaitResult {
	res.Reason = AwaitDecide
	for _, st := range plan.Steps {
		res.Steps = append(res.Steps, st.Kind)
	}
	res.Snapshot = &recorded
	return res
}

// inlineAnnotated: the wait may make the moves of a rollout with no canary request on a
// Deployment with stepped-rollout annotations ann (InlineAnnotated): those its workflow decided
// on, with no traffic routing and no blue-green.
func inlineAnnotated(in AwaitInput, d *appsv1.Deployment, ann string) bool {
	_, traffic := d.Annotations[k8s.TrafficAnnotation]
	_, blueGreen := d.Annotations[k8s.BlueGreenAnnotation]
	return in.InlineAnnotated && in.RolloutAnnotations != nil && *in.RolloutAnnotations == ann && (!traffic || in.InlineTraffic != nil) && !blueGreen
}

// inlineCanary: the wait may make a stepped rollout's moves within its step (InlineCanary).
func inlineCanary(in AwaitInput) bool {
	c := in.Request.Canary
	return in.InlineCanary && c != nil && !c.BlueGreen && !in.Request.Managed && in.Request.RollbackTo == nil && (in.Traffic == nil || in.InlineTraffic != nil)
}
