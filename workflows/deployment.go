package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

const (
	maxBackoff = 5 * time.Minute
	// staleRetries: stale decisions synced again at once, from a live read, in a row before
	// backing off (see failed).
	staleRetries = 10
	// maxSyncsPerRun bounds one run's history; past it the run continues as new.
	maxSyncsPerRun = 200
)

var a *activities.Activities

// awaitMaxWait bounds one AwaitChange: a rollout under way is synced at least this often.
const awaitMaxWait = 5 * time.Minute

// awaitOptions: AwaitChange is a regular activity (it may wait minutes), heartbeating so that a
// dead worker's wait fails within the heartbeat timeout and the workflow syncs instead. It is
// not retried: the workflow decides what comes next. These are the options of runs before
// sparse-await-heartbeats: a 20 s heartbeat timeout, one heartbeat reaching the server every
// 16 s (3.75 billable actions a minute of any wait).
var awaitOptions = workflow.ActivityOptions{
	ScheduleToCloseTimeout: awaitMaxWait + time.Minute,
	HeartbeatTimeout:       20 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
}

// awaitHeartbeatTimeout is AwaitChange's heartbeat timeout from sparse-await-heartbeats on: the
// wait beats every 3 minutes (activities.heartbeatPace), so a wait under that costs no
// heartbeat and a 5-minute one (awaitMaxWait) one, and the server fails the wait of a worker
// that died at most 4 minutes after its last heartbeat. A worker that comes back sooner takes its rollouts over at once:
// at start it signals every rollout under way (watcher.TakeOver), whose workflow then gives
// up the dead wait, syncs and waits again on a live worker.
const awaitHeartbeatTimeout = 4 * time.Minute

// takeOver reports whether a trigger naming no version (a starting worker's, watcher.TakeOver;
// `starter sync`) gives up the AwaitChange activity under way and syncs: the wait may have died
// with its worker, which the server learns only at its heartbeat timeout
// (sparse-await-heartbeats). A local wait runs in this worker's workflow task: no signal
// reaches the workflow before it ends.
func (r *rollout) takeOver(ctx workflow.Context) bool {
	return !r.awaitLocal && workflow.GetVersion(ctx, changeSparseAwaitHeartbeats, workflow.DefaultVersion, 1) >= 1
}

// awaitActivityOptions are AwaitChange's activity options for this run (sparse-await-heartbeats).
func awaitActivityOptions(ctx workflow.Context) workflow.ActivityOptions {
	opts := awaitOptions
	if workflow.GetVersion(ctx, changeSparseAwaitHeartbeats, workflow.DefaultVersion, 1) >= 1 {
		opts.HeartbeatTimeout = awaitHeartbeatTimeout
	}
	return opts
}

// localAwaitOptions: a local wait (see rollout.localWait) is not retried; on any error the
// AwaitChange activity waits.
func localAwaitOptions(window time.Duration) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: window + 10*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// localActivityOptions: every Kubernetes read and write is a local activity, recorded as one
// marker event, so a rollout's history stays small. Each is idempotent, so a retry after a
// worker crash repeats it safely.
var localActivityOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 2 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    500 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    5,
	},
}

// rollout is one run's state, by concern, as argo-rollouts splits rollout/ into canary, pause
// and analysis: what the syncs need (syncState, here), the wait for a rollout's next move
// (waitState, wait.go), a stepped rollout (stepState, steps.go), managed mode (managedState,
// managed.go), the users' updates (updateState, steps.go), traffic routing (traffic.go) and
// notifications (notify.go).
type rollout struct {
	in     Input
	log    log.Logger
	status Status

	syncState
	waitState
	stepState
	managedState
	updateState
	bgState

	trigger, pause, resume, rollback workflow.ReceiveChannel

	// traffic: the route as the last traffic move left it (traffic.go).
	traffic *TrafficStatus
	// trafficAsk: what the last traffic move asked (k8s.DecideTraffic), for AwaitChange to
	// weigh the route the same way; trafficChanges: the traffic change IDs asked in this run.
	trafficAsk     *k8s.TrafficAsk
	trafficChanges map[string]bool
	// notifier: the webhook of the notify annotation (notify.go).
	notifier notifier
}

// syncState is what the syncs need: the work owed, the Deployment as last seen, and the
// versions the next Observe must see.
type syncState struct {
	dirty        bool
	pendingPause *bool
	rollbackTo   *int64
	uid          types.UID
	fromRevision int64
	// generation: the Deployment's generation the last sync decided on.
	generation int64
	// inlineMoves: scale moves AwaitChange made itself in this run (AwaitResult.Moves).
	inlineMoves int
	// atLeast: versions the next Observe must see (from the watcher and our own writes);
	// liveNext: read live, after a stale decision.
	atLeast  []k8s.ObjectVersion
	liveNext bool
	// pauseBlocked: the last SetPaused failed; wait for the backoff timer or a signal.
	pauseBlocked bool
	// recordRollback: a sync rolled back; the sync that rolls the restored template out and
	// any local wait come after the workflow task that rolled back completed, with the
	// rollback recorded. A rollback to "the previous revision" is not idempotent once the next
	// sync has bumped the restored ReplicaSet's revision: re-run from before it (a lost task,
	// or a continue-as-new that a late signal rejects, re-runs the task's local activities on
	// the cluster as it then is), it would roll back once more.
	recordRollback bool

	failures   int
	progressed bool
	startedAt  time.Time
	syncs      int
	// syncStart: when the sync under way began (workflow time, which local activities
	// advance): its writes' Spent (see activities.Activities.busy).
	syncStart time.Time
}

// managedState is managed mode's (managed.go).
type managedState struct {
	// managed: the worker runs in managed mode (Observe says so).
	managed bool
	// managedGuard: --managed-guard (Observe says so).
	managedGuard bool
	// progress (managed mode): the rollout's own Progressing condition, the progress
	// deadline's clock (k8s.Request.ManagedProgress).
	progress *appsv1.DeploymentCondition
}

// DeploymentWorkflow drives one Deployment, the way kube-controller-manager's Deployment
// controller does, one sync at a time. Each sync observes the Deployment and its ReplicaSets,
// decides with k8s.Decide, and carries the steps out as local activities. Between syncs it
// waits for a signal (trigger from the watcher, pause, resume, rollback) or a timer (progress
// deadline, resync). When a rollout converges it continues as new, so each run reads as one
// rollout.
func DeploymentWorkflow(ctx workflow.Context, in Input) (Result, error) {
	if err := in.Validate(); err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", nil)
	}
	r := &rollout{
		in:       in,
		log:      log.With(workflow.GetLogger(ctx), "namespace", in.Namespace, "deployment", in.Name),
		status:   Status{Namespace: in.Namespace, Name: in.Name, Phase: "Pending"},
		trigger:  workflow.GetSignalChannel(ctx, SignalTrigger),
		pause:    workflow.GetSignalChannel(ctx, SignalPause),
		resume:   workflow.GetSignalChannel(ctx, SignalResume),
		rollback: workflow.GetSignalChannel(ctx, SignalRollback),

		syncState:   syncState{dirty: true},
		updateState: updateState{kick: workflow.NewBufferedChannel(ctx, 1)},
		stepState:   stepState{stepWaits: newPhaseWaits(ctx)},
		bgState:     bgState{bgWaits: newPhaseWaits(ctx)},
	}
	if c := in.Carry; c != nil {
		r.dirty = !c.Idle || c.Dirty
		r.rollbackTo, r.pendingPause = c.RollbackTo, c.Pause
		if c.Status != nil {
			r.status = *c.Status
		}
		r.fromRevision = r.status.CurrentRevision
		if c.RollbackTo != nil || c.Pause != nil {
			r.dirty = true
		}
		r.atLeast, r.liveNext = c.AtLeast, c.LiveNext
		r.steps, r.stepList, r.stableHash, r.abort, r.warned = c.Steps, c.StepList, c.StableHash, c.Abort, c.Warned
		r.managed, r.managedGuard, r.progress = c.Managed, c.ManagedGuard, c.ManagedProgress
		r.uid, r.localWait = c.UID, c.LocalWait
		r.traffic = c.Traffic
		r.bg, r.bgServices = c.BlueGreen, c.BlueGreenServices
		r.notifier.config, r.notifier.uiURL = c.Notify, c.UIURL
		if c.Abort != nil {
			r.dirty = true
		}
	}
	if in.Trigger != nil {
		// Started by the watcher without a signal: the trigger it would have signalled.
		r.atLeast = append(r.atLeast, in.Trigger.Versions...)
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return r.queryStatus(), nil
	}); err != nil {
		return Result{}, fmt.Errorf("register status query: %w", err)
	}
	if err := r.registerUpdates(ctx); err != nil {
		return Result{}, err
	}
	ctx = workflow.WithLocalActivityOptions(ctx, localActivityOptions)
	r.resumeStepWaits(ctx)
	r.resumeBlueGreenWaits(ctx)
	if c := in.Carry; c != nil {
		for i := range c.Notifications {
			r.deliver(ctx, &c.Notifications[i])
		}
	}

	if len(in.Image) > 0 {
		if err := r.setImage(ctx); err != nil {
			return Result{}, err
		}
	}

	for {
		if !r.dirty && (r.pendingPause == nil || r.pauseBlocked) {
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
			if r.managed {
				r.releaseOnCancel(ctx)
			}
			return Result{}, err
		}
		r.drainSignals(ctx)
		if r.applyUpdates(ctx) {
			r.returnUpdates(ctx)
			r.drainSignals(ctx)
		}
		if r.pendingPause != nil {
			r.applyPause(ctx)
		}
		if !r.dirty {
			continue
		}
		r.dirty = false
		r.stopAwait()
		r.awaitRemote, r.atRest = false, false
		plan, found, err := r.sync(ctx)
		r.syncedUpdates()
		if err != nil {
			r.failed(ctx, err)
			continue
		}
		r.failures = 0
		r.rolling = !plan.Phase.Converged()
		if !found {
			r.finishRollout(ctx, OutcomeDeleted)
			msg := fmt.Sprintf("deployment %s/%s no longer exists", in.Namespace, in.Name)
			r.log.Info("Deployment deleted, workflow ends")
			r.endRun(ctx)
			return Result{Outcome: OutcomeDeleted, Revision: r.status.CurrentRevision, Message: msg}, nil
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
					outcome = OutcomeAborted
				}
				r.finishRollout(ctx, outcome)
				r.log.Info("Rollout converged, continuing as new", "phase", plan.Phase, "revision", plan.Revision, "syncs", r.syncs, "next", pending)
				return Result{}, r.continueAsNew(ctx, !pending)
			}
		}
		if r.syncs >= maxSyncsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			r.drainSignals(ctx)
			return Result{}, r.continueAsNew(ctx, plan.Phase.Converged() && !r.pendingWork(ctx))
		}
	}
}

// pendingWork drains signals that arrived during the sync and reports whether any work is owed.
func (r *rollout) pendingWork(ctx workflow.Context) bool {
	r.drainSignals(ctx)
	return r.dirty || r.commandPending()
}

// commandPending reports whether a user's pause, resume, rollback or update waits to be applied.
func (r *rollout) commandPending() bool {
	return r.pendingPause != nil || r.rollbackTo != nil || len(r.updates) > 0
}

// nextChangeOnly reports whether the work owed after a converged rollout is a change
// signalled alone (a trigger: a new template, say), which the next run takes. A pause, a
// rollback or an update stays in this run, as before (a paused rollout keeps its run, and an
// update is not refused for a run that ends).
func (r *rollout) nextChangeOnly(ctx workflow.Context) bool {
	return r.dirty && !r.commandPending() &&
		workflow.GetVersion(ctx, changeFinishBeforeNext, workflow.DefaultVersion, 1) == 1
}

// endRun lets every update handler finish before the run ends: one queued but not applied is
// told to try again (the next run takes it).
func (r *rollout) endRun(ctx workflow.Context) {
	r.flushStepState(ctx)
	for _, u := range r.updates {
		u.err, u.done = errors.New("the run ended before this update was applied; send it again"), true
	}
	r.updates = nil
	r.syncedUpdates()
	r.ended = true
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// queryStatus is the status query's answer.
func (r *rollout) queryStatus() Status {
	st := r.status
	st.Cluster = r.in.Cluster
	st.PendingRollback = r.rollbackTo
	st.Syncs = r.syncs
	st.WaitMoves = r.inlineMoves
	st.Steps = r.stepsStatus()
	st.AnnotationError = r.annotationError
	st.Traffic = r.traffic
	st.BlueGreen = r.blueGreenStatus()
	if r.abort != nil {
		st.AbortScaleDownAt = r.abort.Until
	}
	return st
}

func (r *rollout) continueAsNew(ctx workflow.Context, idle bool) error {
	st := r.status
	next := Input{Input: contract.Input{Namespace: r.in.Namespace, Name: r.in.Name, Cluster: r.in.Cluster}, Carry: &Carry{
		Idle:         idle,
		Dirty:        r.dirty,
		RollbackTo:   r.rollbackTo,
		Pause:        r.pendingPause,
		Status:       &st,
		AtLeast:      r.atLeast,
		LiveNext:     r.liveNext,
		Steps:        r.steps,
		StepList:     r.stepList,
		StableHash:   r.stableHash,
		Abort:        r.abort,
		Warned:       r.warned,
		Managed:      r.managed,
		ManagedGuard: r.managedGuard,

		ManagedProgress: r.progress,
		UID:             r.uid,
		LocalWait:       r.localWait,
		Traffic:         r.traffic,

		BlueGreen:         r.bg,
		BlueGreenServices: r.bgServices,

		Notify:        r.notifier.config,
		UIURL:         r.notifier.uiURL,
		Notifications: r.carriedNotifications(),
	}}
	r.stopAwait()
	if r.in.Carry != nil {
		next.Carry.Runs = r.in.Carry.Runs + 1
	}
	r.endRun(ctx)
	return workflow.NewContinueAsNewError(ctx, WorkflowType, next)
}

// drainSignals handles every signal already delivered, without blocking.
func (r *rollout) drainSignals(ctx workflow.Context) {
	for {
		sel := workflow.NewSelector(ctx)
		r.addSignals(ctx, sel)
		if !sel.HasPending() {
			return
		}
		sel.Select(ctx)
	}
}

func (r *rollout) addSignals(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(r.trigger, func(c workflow.ReceiveChannel, _ bool) {
		raw, _ := receive(ctx, c)
		versions := ParseTrigger(raw)
		r.atLeast = append(r.atLeast, versions...)
		if len(versions) == 0 && workflow.GetVersion(ctx, changePlainTriggerReadsLive, workflow.DefaultVersion, 1) == 1 {
			// A trigger naming no version (the watcher's for a deleted Deployment, `starter
			// sync`): the next sync reads live, not a snapshot a wait took before it. One
			// that came in the task of the wait's return was lost otherwise: the sync
			// decided on the wait's snapshot, found the rollout converged, and the run
			// continued as new, idle, for a Deployment already gone.
			r.liveNext = true
		}
		if r.await != nil && !(len(versions) == 0 && r.takeOver(ctx)) {
			// AwaitChange sees every change the watcher can signal (it weighs the
			// Deployment, its ReplicaSets and pods on the worker's cache) and returns when
			// a sync would write: a trigger adds nothing but history.
			return
		}
		r.dirty = true
	})
	sel.AddReceive(r.pause, func(c workflow.ReceiveChannel, _ bool) {
		receive(ctx, c)
		t := true
		r.pendingPause = &t
		r.log.Info("Pause requested")
	})
	sel.AddReceive(r.resume, func(c workflow.ReceiveChannel, _ bool) {
		receive(ctx, c)
		f := false
		r.pendingPause = &f
		r.log.Info("Resume requested")
	})
	sel.AddReceive(r.rollback, func(c workflow.ReceiveChannel, _ bool) {
		raw, err := receive(ctx, c)
		var rev int64
		if err == nil {
			rev, err = ParseRollback(raw)
		}
		if err != nil {
			r.status.IgnoredSignal = "rollback: " + err.Error()
			r.log.Warn("Ignoring malformed rollback signal", "payload", string(raw), "error", err)
			return
		}
		r.rollbackTo = &rev
		r.dirty = true
		r.log.Info("Rollback requested", "revision", rev)
	})
	r.addStepWaits(ctx, sel)
	r.addBlueGreenWaits(ctx, sel)
}

// receive takes the next value off a signal channel as raw JSON. It receives the payload
// undecoded, so a payload the data converter cannot decode (another codec, a proto) is taken
// off the channel and reported here instead of being dropped by the SDK while the receive
// blocks for the next signal, which would stall every sync, timer and signal behind it.
func receive(ctx workflow.Context, c workflow.ReceiveChannel) (json.RawMessage, error) {
	var v converter.RawValue
	c.Receive(ctx, &v)
	p := v.Payload()
	if p == nil {
		return nil, nil
	}
	switch enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc {
	case converter.MetadataEncodingJSON:
		return p.GetData(), nil
	case converter.MetadataEncodingNil:
		return nil, nil
	default:
		return nil, fmt.Errorf("payload encoding %q is not JSON (%d bytes)", enc, len(p.GetData()))
	}
}

// ParseTrigger reads the versions a trigger signal carries. Any other payload, or none, is a
// plain trigger.
func ParseTrigger(raw json.RawMessage) []k8s.ObjectVersion {
	var t Trigger
	if len(raw) == 0 || json.Unmarshal(raw, &t) != nil {
		return nil
	}
	return t.Versions
}

// ParseRollback validates a rollback payload: an object with a non-negative integer
// "revision" and nothing else.
func ParseRollback(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New(`payload is empty; want {"revision": N}`)
	}
	var req RollbackRequest
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return 0, fmt.Errorf(`payload %s is not {"revision": N}: %w`, string(raw), err)
	}
	if dec.More() {
		return 0, fmt.Errorf(`payload %s has data after {"revision": N}`, string(raw))
	}
	if req.Revision == nil {
		return 0, fmt.Errorf(`payload %s has no "revision"; want {"revision": N}`, string(raw))
	}
	if *req.Revision < 0 {
		return 0, fmt.Errorf("revision %d is negative", *req.Revision)
	}
	return *req.Revision, nil
}

func (r *rollout) applyPause(ctx workflow.Context) {
	paused := *r.pendingPause
	var res activities.SetPausedResult
	err := workflow.ExecuteLocalActivity(ctx, a.SetPaused, activities.SetPausedInput{
		Namespace: r.in.Namespace, Name: r.in.Name, Paused: paused,
	}).Get(ctx, &res)
	r.atLeast = append(r.atLeast, res.Wrote...)
	if err != nil && !activities.IsKind(err, activities.ErrNotFound) {
		// Keep the request, and retry it after a backoff rather than at once.
		r.status.LastError = fmt.Sprintf("set paused=%t: %v", paused, err)
		r.failures++
		r.pauseBlocked = true
		r.setWake(ctx, workflow.Now(ctx).Add(backoffFor(r.failures)))
		r.log.Warn("Setting spec.paused failed, retrying after backoff", "paused", paused, "error", err)
		return
	}
	r.pendingPause = nil
	r.dirty = true
}

func (r *rollout) setImage(ctx workflow.Context) error {
	var res activities.SetImageResult
	err := workflow.ExecuteLocalActivity(ctx, a.SetImage, activities.SetImageInput{
		Namespace: r.in.Namespace, Name: r.in.Name, Images: r.in.Image, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
	}).Get(ctx, &res)
	r.atLeast = append(r.atLeast, res.Wrote...)
	if err != nil {
		if activities.IsKind(err, activities.ErrInvalid) || activities.IsKind(err, activities.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError("set image: "+err.Error(), "InvalidInput", err)
		}
		return fmt.Errorf("set image: %w", err)
	}
	return nil
}

// sync is one pass of the controller: observe, decide, act.
func (r *rollout) sync(ctx workflow.Context) (k8s.Plan, bool, error) {
	r.syncs++
	r.syncStart = workflow.Now(ctx)
	var obs activities.ObserveResult
	if r.observed != nil && !r.liveNext && r.observed.Holds(r.atLeast) {
		obs = activities.ObserveResult{Found: true, Snapshot: *r.observed, FromCache: true}
	} else if err := workflow.ExecuteLocalActivity(ctx, a.Observe, activities.ObserveInput{
		Namespace: r.in.Namespace, Name: r.in.Name, AtLeast: r.atLeast, Live: r.liveNext, Command: r.rollbackTo != nil,
	}).Get(ctx, &obs); err != nil {
		r.observed = nil
		return k8s.Plan{}, false, fmt.Errorf("observe: %w", err)
	} else {
		r.managed, r.managedGuard, r.localWait = obs.Managed, obs.ManagedGuard, obs.LocalWait
		r.notifier.uiURL = obs.UIURL
	}
	r.observed = nil
	r.atLeast, r.liveNext = nil, false
	if !obs.Found {
		return k8s.Plan{}, false, nil
	}
	d := obs.Snapshot.Deployment
	if r.uid != "" && r.uid != d.UID {
		r.log.Info("Deployment was recreated", "uid", d.UID)
	}
	r.uid = d.UID
	r.generation = d.Generation
	req := k8s.Request{RollbackTo: r.rollbackTo, Managed: r.managed}
	if req.Managed {
		req.ManagedProgress, req.ManagedGuard = r.progress, r.managedGuard
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
		r.progress = plan.ManagedProgress
	}
	ref := activities.DeploymentRef{Namespace: d.Namespace, Name: d.Name, UID: d.UID}
	// Traffic moves before the plan's writes: weights fall before pods go (traffic.go).
	if err := r.syncTraffic(ctx, ref, obs.Snapshot, plan); err != nil {
		r.report(obs.Snapshot, plan)
		return plan, true, err
	}
	if err := r.syncBlueGreen(ctx, ref, obs.Snapshot, plan); err != nil {
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
			r.dirty, restarted = true, true
			break
		}
	}
	// A sync that starts over (a hash collision) before its rollback step ran has not rolled
	// back: the request stays for the next sync.
	if plan.RollbackHandled && !restarted {
		r.rollbackTo = nil
		r.recordRollback = true
	}
	if wrote {
		r.markProgressed(ctx)
	}
	r.report(obs.Snapshot, plan)
	r.status.LastError = ""
	r.afterBlueGreen(ctx, plan)
	r.afterSync(ctx, obs.Snapshot, plan)
	workflow.SetCurrentDetails(ctx, r.details())
	// After a rollback (PhaseRollingBack) the restored template is rolled out by the next
	// sync, which AwaitChange asks for at once, in a workflow task of its own (recordRollback).
	return plan, true, nil
}

// markProgressed notes the run's first write of a rollout: a sync's, or a move its wait made.
func (r *rollout) markProgressed(ctx workflow.Context) {
	if r.progressed {
		return
	}
	r.progressed = true
	r.startedAt = workflow.Now(ctx)
	workflow.GetMetricsHandler(ctx).Counter("rollout_rollouts_started").Inc(1)
}

// execute carries out one step. It reports whether the sync must start over (a hash
// collision bumped collisionCount).
func (r *rollout) execute(ctx workflow.Context, ref activities.DeploymentRef, d *appsv1.Deployment, step k8s.Step) (bool, error) {
	// A sync that rolls back carries out a user's command: its writes (the new ReplicaSet that
	// upstream creates before a rollback, the status) go under the commands' budget too.
	cmd := r.rollbackTo != nil
	spent := workflow.Now(ctx).Sub(r.syncStart)
	ctx = withSummary(ctx, stepSummary(d, step))
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
		r.atLeast = append(r.atLeast, res.Wrote...)
		if res.Collision {
			r.log.Info("Hash collision, collisionCount bumped", "replicaSet", res.Name)
			r.liveNext = true
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
		r.dirty = true
		return false, r.wrote(ctx, workflow.ExecuteLocalActivity(ctx, fn, activities.ParkInput{Deployment: ref, Events: step.Events}))
	}
	return false, temporal.NewNonRetryableApplicationError("unknown step "+string(step.Kind), activities.ErrInvalid, nil)
}

// withSummary names the local activities started with ctx in the Temporal UI (metadata, not a
// command: histories replay unchanged).
func withSummary(ctx workflow.Context, summary string) workflow.Context {
	o := workflow.GetLocalActivityOptions(ctx)
	o.Summary = summary
	return workflow.WithLocalActivityOptions(ctx, o)
}

// stepSummary says in one line what a plan's write does: which object, from what to what
// ("scale web-5667b58498 2 → 3").
func stepSummary(d *appsv1.Deployment, step k8s.Step) string {
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
func (r *rollout) wrote(ctx workflow.Context, f workflow.Future) error {
	var res struct {
		Wrote []k8s.ObjectVersion `json:"wrote"`
	}
	if err := f.Get(ctx, &res); err != nil {
		return err
	}
	r.atLeast = append(r.atLeast, res.Wrote...)
	return nil
}

// failed records an error and schedules the next attempt: once the client budget admits it
// after a write refused as busy, at once after a stale decision (from the second in a row,
// once the budget admits it), otherwise after an exponential backoff.
func (r *rollout) failed(ctx workflow.Context, err error) {
	if activities.IsKind(err, activities.ErrBusy) && workflow.GetVersion(ctx, changeBusyWriteDeferred, workflow.DefaultVersion, 1) == 1 {
		// Nothing was written: the budget is saturated. End the task (its slot, and what was
		// sent to this workflow meanwhile, wait for it) and sync once the budget admits it.
		// Not a failure: it never backs off, and the status reports no error.
		r.log.Info("Client budget saturated, syncing once it admits the sync", "error", err)
		r.startRetryAwait(ctx)
		return
	}
	r.status.LastError = err.Error()
	r.failures++
	// A conflict is a stale decision by design (the write is not retried with the same
	// target), and conflicts are routine while the ReplicaSet controller and other clients
	// write the same objects: they sync again at once, from a live read, up to staleRetries in
	// a row before backing off.
	stale := activities.IsKind(err, activities.ErrStale) || activities.IsKind(err, activities.ErrNotFound)
	if stale && r.failures <= staleRetries {
		r.liveNext = true
		if r.failures > 1 && workflow.GetVersion(ctx, changeStaleRetryAdmitted, workflow.DefaultVersion, 1) == 1 {
			// Stale again: a run of retries in one workflow task held it (and every signal,
			// update and query behind it) for seconds on a saturated client budget. The next
			// one comes after this task, once the budget admits it.
			r.log.Info("Decision was stale again, syncing from a live read once the client budget admits it", "error", err, "failures", r.failures)
			r.startRetryAwait(ctx)
			return
		}
		r.log.Info("Decision was stale, syncing again from a live read", "error", err)
		r.dirty = true
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

// backoffFor is 2s, 4s, 8s ... up to maxBackoff.
func backoffFor(failures int) time.Duration {
	return min(time.Second<<min(max(failures, 1), 9), maxBackoff)
}

func (r *rollout) finishRollout(ctx workflow.Context, outcome string) {
	r.upsertSearchAttributes(ctx, outcome)
	r.notifyOutcome(ctx, outcome)
	if !r.progressed {
		return
	}
	mh := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome})
	mh.Counter("rollout_rollouts_completed").Inc(1)
	mh.Timer("rollout_duration").Record(workflow.Now(ctx).Sub(r.startedAt))
}

// details is the line the Temporal UI shows as the run's current details.
func (r *rollout) details() string {
	st := r.status
	line := fmt.Sprintf("**%s/%s** %s: revision %d → %d", st.Namespace, st.Name, st.Phase, r.fromRevision, st.TargetRevision)
	if r.steps != nil || r.abort != nil || r.bg != nil {
		line += "\n\n" + r.stepSummary()
	}
	for _, rs := range st.ReplicaSets {
		line += fmt.Sprintf("\n- `%s` (revision %d): %d replicas, %d ready, %d available", rs.Name, rs.Revision, rs.Replicas, rs.Ready, rs.Available)
	}
	return line
}

// report refreshes the status query's answer from the snapshot and plan.
func (r *rollout) report(s k8s.Snapshot, plan k8s.Plan) {
	d := s.Deployment
	st := &r.status
	st.Phase = string(plan.Phase)
	st.Paused = k8s.Effective(d).Spec.Paused
	if d.Spec.Replicas != nil {
		st.Replicas = *d.Spec.Replicas
	}
	st.Conditions = plan.Status.Conditions
	st.NewReplicaSet = plan.NewReplicaSet
	st.TargetRevision = plan.Revision
	st.Message = plan.Message
	st.ReplicaSets = nil
	for _, rs := range s.ReplicaSets {
		rev, _ := k8s.Revision(rs.Annotations)
		var n int32
		if rs.Spec.Replicas != nil {
			n = *rs.Spec.Replicas
		}
		st.ReplicaSets = append(st.ReplicaSets, ReplicaSetStatus{Name: rs.Name, Hash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], Revision: rev, Replicas: n, Ready: rs.Status.ReadyReplicas, Available: rs.Status.AvailableReplicas})
	}
	sort.Slice(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Revision > st.ReplicaSets[j].Revision })
	if plan.Phase == k8s.PhaseComplete {
		st.CurrentRevision = plan.Revision
	}
}
