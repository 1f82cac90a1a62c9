package workflows

import (
	"time"

	"github.com/temporal-rollout/rollout/k8s"
	"go.temporal.io/sdk/workflow"
)

// deploymentRun is one run: its State, whole (state.go), and the runtime parts rebuilt around it
// (newRollout): the effects every part shares (effects.go), what the syncs need (syncState,
// here), the wait for a rollout's next move (waitState, wait.go), the users' updates
// (updateState, updates.go), and the two strategies on the shared phase machinery (phase.go):
// canary steps (steps.go) and blue-green (bluegreen.go).
type deploymentRun struct {
	in Input
	// State is the run's state, whole (state.go): what it started from and hands on.
	State
	// effects: events, notifications, memo and search attributes (effects.go).
	effects

	syncState
	waitState
	updateState

	canary    *canaryStrategy
	blueGreen *blueGreenStrategy

	trigger, pause, resume, rollback workflow.ReceiveChannel

	// route moves the traffic (traffic.go).
	route *router
}

// syncState is what the syncs need: the work owed, the Deployment as last seen, and the
// versions the next Observe must see.
type syncState struct {
	fromRevision int64
	// canaryReq: the cap the last sync decided with (canaryRequest); rolloutAnnotations:
	// k8s.RolloutAnnotations at the last sync. Both go to AwaitChange.
	canaryReq          *k8s.Canary
	rolloutAnnotations string
	// aborted: the abort that the last sync completed (its outcome is Aborted).
	aborted *abortState
	// generation: the Deployment's generation the last sync decided on.
	generation int64
	// inlineMoves: scale moves AwaitChange made itself in this run (AwaitResult.Moves).
	inlineMoves int
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

// waitState is the wait between two syncs: for a rollout under way, AwaitChange (as an
// activity, or first inside the workflow task with --local-wait); for a converged one, the
// wake timer of its plan's recheck or a backoff.
type waitState struct {
	// rolling: the last sync left a rollout under way; AwaitChange waits for its next move.
	rolling     bool
	await       workflow.Future
	cancelAwait workflow.CancelFunc
	// awaitLocal: the pending wait is the local one; awaitRemote: it ended without a move, so
	// the next wait before a sync is the AwaitChange activity.
	awaitLocal, awaitRemote bool
	// awaitFenced: the pending wait may move the route (AwaitInput.InlineTraffic);
	// superseded: such a wait was given up or failed, and may still run: the next sync raises
	// the route's fence before it moves anything (raiseFence).
	awaitFenced, superseded bool
	// atRest: the last wait ended AwaitRest (the rollout is held at rest on the cluster): no
	// wait runs until a signal, an update or a timer makes the next sync.
	atRest bool
	// restUnwatched: a look of restChecked found no watcher beside the worker, so none
	// returns AwaitRest: this run looks no more (a run continued as new looks again).
	restUnwatched bool
	// observed: the snapshot AwaitChange decided on; the next sync uses it instead of an
	// Observe of its own.
	observed *k8s.Snapshot

	wakeAt     time.Time
	wake       workflow.Future
	cancelWake workflow.CancelFunc
	// deployment names the Deployment ("namespace/name") in the timers' summaries.
	deployment string
}
