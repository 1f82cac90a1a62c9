package workflows

import (
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// State is one run's state, whole: a run starts from it (Input.State) and hands it, as it
// then is, to the next run through Continue-As-New. The rollout works on it in place (it is
// embedded in rollout), so nothing is copied by hand either way: a field added here is carried
// over with no other line to write (TestStateCarriedWhole checks every field by reflection).
// What is not here is rebuilt by each run from it (newRollout): the signal channels, the
// timers, analyses and waits under way, the last snapshot, and the answers of
// workflow.GetVersion, which belong to one run's history.
//
// Its JSON is the "carry" object of the runs recorded before it had this name: the field
// names are unchanged, so those runs' inputs decode as they did.
type State struct {
	// Idle: the previous run converged, so wait for a change before syncing. Set as a run
	// continues as new; Dirty is the work owed (a sync), at any time.
	Idle  bool `json:"idle,omitempty"`
	Dirty bool `json:"dirty,omitempty"`
	// RollbackTo: a rollback asked (the signal, an abort) and not yet done; Pause: a pause or
	// resume asked and not yet written to spec.paused.
	RollbackTo *int64 `json:"rollbackTo,omitempty"`
	Pause      *bool  `json:"pause,omitempty"`
	// Runs counts the runs before this one.
	Runs int `json:"runs,omitempty"`
	// UID is the Deployment's UID as last seen, so the events a run records before its first
	// sync (a step timer that fires, a promote) name the object.
	UID types.UID `json:"uid,omitempty"`
	// LocalWait is the worker's --local-wait as Observe last reported it.
	LocalWait time.Duration `json:"localWait,omitempty"`
	// Status is the status query's answer as the last sync left it, so the query answers
	// before a run's first sync.
	Status Status `json:"status"`
	// AtLeast and LiveNext are read-your-writes: the versions the next sync must see, and
	// whether it must read live (after a stale decision).
	AtLeast  []k8s.ObjectVersion `json:"atLeast,omitempty"`
	LiveNext bool                `json:"liveNext,omitempty"`
	// A stepped rollout in progress (steps.go): its state and steps; the stable template (the
	// last that completed); the template of the last sync; an abort under way; the invalid
	// annotation already warned about.
	Steps      *stepsState       `json:"steps,omitempty"`
	StepList   []k8s.RolloutStep `json:"stepList,omitempty"`
	StableHash string            `json:"stableHash,omitempty"`
	LastHash   string            `json:"lastHash,omitempty"`
	Abort      *abortState       `json:"abort,omitempty"`
	Warned     string            `json:"warned,omitempty"`
	// Managed and ManagedGuard: the worker runs in managed mode (--managed-guard), as Observe
	// last said; ManagedProgress: the rollout's own Progressing condition there, the progress
	// deadline's clock (k8s.Request.ManagedProgress).
	Managed         bool                        `json:"managed,omitempty"`
	ManagedProgress *appsv1.DeploymentCondition `json:"managedProgress,omitempty"`
	ManagedGuard    bool                        `json:"managedGuard,omitempty"`
	// Traffic: the route as the last traffic move left it (traffic.go).
	Traffic *TrafficStatus `json:"traffic,omitempty"`
	// BlueGreen: a blue-green rollout in progress, and what its Services select (bluegreen.go).
	BlueGreen         *blueGreenState    `json:"blueGreen,omitempty"`
	BlueGreenServices *BlueGreenServices `json:"blueGreenServices,omitempty"`
	// Notify is the notify annotation as the last sync read it, UIURL the worker's --ui-url,
	// and Notifications, as a run continues, those not yet delivered, which the next run
	// sends (notify.go).
	Notify        *k8s.NotifyConfig        `json:"notify,omitempty"`
	UIURL         string                   `json:"uiURL,omitempty"`
	Notifications []activities.NotifyInput `json:"notifications,omitempty"`
}

// newRollout builds a run from its input: the state the previous run handed over (or a new
// one), and the runtime parts rebuilt around it. resumeWaits restarts the waits under way.
func newRollout(ctx workflow.Context, in Input) *rollout {
	r := &rollout{
		in:       in,
		log:      log.With(workflow.GetLogger(ctx), "namespace", in.Namespace, "deployment", in.Name),
		trigger:  workflow.GetSignalChannel(ctx, SignalTrigger),
		pause:    workflow.GetSignalChannel(ctx, SignalPause),
		resume:   workflow.GetSignalChannel(ctx, SignalResume),
		rollback: workflow.GetSignalChannel(ctx, SignalRollback),

		updateState: updateState{kick: workflow.NewBufferedChannel(ctx, 1)},
		stepState:   stepState{stepWaits: newPhaseWaits(ctx)},
		bgState:     bgState{bgWaits: newPhaseWaits(ctx)},
	}
	if st := in.State; st != nil {
		r.State = *st
		// A sync is owed unless the previous run converged with nothing asked.
		r.Dirty = !st.Idle || st.Dirty || st.RollbackTo != nil || st.Pause != nil || st.Abort != nil
	} else {
		r.Dirty = true
	}
	if r.Status.Phase == "" {
		r.Status = Status{Namespace: in.Namespace, Name: in.Name, Phase: "Pending"}
	}
	r.fromRevision = r.Status.CurrentRevision
	if in.Trigger != nil {
		// Started by the watcher without a signal: the trigger it would have signalled.
		r.AtLeast = append(r.AtLeast, in.Trigger.Versions...)
	}
	return r
}

// resumeWaits restarts, in a run continued from another, what the state says is under way: the
// step's or blue-green phase's timer or analysis (a timer waits only what is left of it), and
// the notifications the previous run did not deliver.
func (r *rollout) resumeWaits(ctx workflow.Context) {
	r.resumeStepWaits(ctx)
	r.resumeBlueGreenWaits(ctx)
	carried := r.Notifications
	r.Notifications = nil
	for i := range carried {
		r.deliver(ctx, &carried[i])
	}
}

// nextInput is the next run's input: this run's state, whole, with idle (the rollout converged
// with nothing owed), the run counted, and the notifications not yet delivered.
func (r *rollout) nextInput(idle bool) Input {
	if r.in.State != nil {
		r.Runs++
	}
	r.Idle = idle
	r.Notifications = r.carriedNotifications()
	st := r.State
	return Input{Input: contract.Input{Namespace: r.in.Namespace, Name: r.in.Name, Cluster: r.in.Cluster}, State: &st}
}
