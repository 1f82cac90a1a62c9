package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/k8s"
)

// The fleet freeze (docs/releases.md): while `starter freeze` holds, a stepped rollout that is
// about to enter its next step holds where it is, at its current weight, until `starter thaw`
// or the freeze's end. The workflow learns the freeze from the FleetFreeze local activity (its
// answer is in the history), only when a step is passed, and while held again on a durable
// timer, every freezeRecheck or at the freeze's end if sooner. An error asking is no freeze: a
// rollout never sticks on an unreachable freeze workflow. A blue-green rollout's automatic
// promotion holds the same way, in its Paused phase. Promote is refused during a freeze; abort
// always works. Plain rollouts are not held.

// unfrozenRollback: the rollout is a release's rollback (r.releaseRollback, from the last
// sync) and the run has the change fleet-freeze-skips-release-rollback: the fleet freeze
// does not hold it. A rollback holding in the freeze ran out of rolloutTimeout, and left the
// release Halted half rolled back.
func (r *rollout) unfrozenRollback(ctx workflow.Context) bool {
	return r.releaseRollback && workflow.GetVersion(ctx, changeReleaseRollbackUnfrozen, workflow.DefaultVersion, 1) >= 1
}

// freezeRecheck is how often a held rollout asks the freeze again.
const freezeRecheck = 15 * time.Second

// freezeOptions: one quick question; an answer that does not come is no freeze.
var freezeOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    5 * time.Second,
	ScheduleToCloseTimeout: 12 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
}

// freezeChecked reports whether this run asks for the fleet freeze (the versioned branch).
func freezeChecked(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeFleetFreezeHold, workflow.DefaultVersion, 1) >= 1
}

// nextStep passes the current step: it enters the next one, or, while the fleet is frozen,
// holds before it.
func (r *rollout) nextStep(ctx workflow.Context) {
	s := r.Steps
	if !freezeChecked(ctx) {
		r.enterStep(ctx, s.Step+1)
		return
	}
	f := r.fleetFreeze(ctx)
	if f == nil || r.unfrozenRollback(ctx) {
		r.enterStep(ctx, s.Step+1)
		return
	}
	r.stopStepWaits()
	s.PauseUntil, s.Freeze = nil, f
	s.WaitingFor, s.Message = WaitingForFreeze, r.frozenMessage()
	r.startFreezeTimer(ctx)
	r.recordStepWarning(ctx, "RolloutFrozen", s.Message)
}

// startFreezeTimer starts the held rollout's next look at the freeze: in freezeRecheck, or at
// the freeze's end if sooner.
func (r *rollout) startFreezeTimer(ctx workflow.Context) {
	s := r.Steps
	at := workflow.Now(ctx).Add(freezeRecheck)
	if u := s.Freeze.Until; !u.IsZero() && u.Before(at) {
		at = u
	}
	r.stepWaits.startTimer(ctx, at, fmt.Sprintf("fleet freeze: %s/%s asks again before step %d", r.in.Namespace, r.in.Name, s.Step+1))
	r.stepTimerFor = s.Step
}

// recheckFreeze asks again for a held rollout: still frozen, it holds on; otherwise it enters
// the next step.
func (r *rollout) recheckFreeze(ctx workflow.Context) {
	s := r.Steps
	if f := r.fleetFreeze(ctx); f != nil {
		changed := *f != *s.Freeze
		s.Freeze = f
		s.Message = r.frozenMessage()
		r.startFreezeTimer(ctx)
		if changed {
			r.recordStepWarning(ctx, "RolloutFrozen", s.Message)
		}
		return
	}
	held := s.Freeze
	s.Freeze = nil
	r.recordStep(ctx, "RolloutThawed", fmt.Sprintf("Fleet freeze over (was until %s: %s): going on past step %d of %d", held.Until.Format(time.RFC3339), held.Reason, s.Step+1, len(r.StepList)))
	r.enterStep(ctx, s.Step+1)
	r.Dirty = true
}

// autoPromoteBlueGreen promotes a blue-green rollout automatically, unless the fleet is
// frozen: then it holds in the Paused phase (the preview ready, the active Service where it
// is), asking again on a timer.
func (r *rollout) autoPromoteBlueGreen(ctx workflow.Context, why string) {
	if !freezeChecked(ctx) {
		r.promoteBlueGreen(ctx, PromoteRequest{}, why)
		return
	}
	f := r.fleetFreeze(ctx)
	if f == nil || r.unfrozenRollback(ctx) {
		r.promoteBlueGreen(ctx, PromoteRequest{}, why)
		return
	}
	bg := r.BlueGreen
	r.stopBlueGreenWaits()
	bg.Phase, bg.Analysis, bg.AnalysisSpec, bg.Freeze = BlueGreenPaused, nil, nil, f
	bg.WaitingFor, bg.Message = WaitingForFreeze, blueGreenFrozenMessage(f)
	r.startBlueGreenFreezeTimer(ctx)
	r.recordStepWarning(ctx, "RolloutFrozen", bg.Message)
	r.Dirty = true
}

func blueGreenFrozenMessage(f *FreezeHold) string {
	return fmt.Sprintf("Blue-green: automatic promotion held: %s %s (%s)", k8s.FleetFreezeHeldText, f.Until.Format(time.RFC3339), f.Reason)
}

// startBlueGreenFreezeTimer: the held promotion's next look at the freeze, as
// startFreezeTimer (Until is that look, so a continued run resumes it).
func (r *rollout) startBlueGreenFreezeTimer(ctx workflow.Context) {
	bg := r.BlueGreen
	at := workflow.Now(ctx).Add(freezeRecheck)
	if u := bg.Freeze.Until; !u.IsZero() && u.Before(at) {
		at = u
	}
	bg.Until = &at
	r.startBlueGreenTimer(ctx)
}

// recheckBlueGreenFreeze asks again for a held automatic promotion.
func (r *rollout) recheckBlueGreenFreeze(ctx workflow.Context) {
	bg := r.BlueGreen
	if f := r.fleetFreeze(ctx); f != nil {
		changed := *f != *bg.Freeze
		bg.Freeze, bg.Message = f, blueGreenFrozenMessage(f)
		r.startBlueGreenFreezeTimer(ctx)
		if changed {
			r.recordStepWarning(ctx, "RolloutFrozen", bg.Message)
		}
		return
	}
	held := bg.Freeze
	bg.Freeze, bg.Until = nil, nil
	r.recordStep(ctx, "RolloutThawed", fmt.Sprintf("Fleet freeze over (was until %s: %s): promoting", held.Until.Format(time.RFC3339), held.Reason))
	r.promoteBlueGreen(ctx, PromoteRequest{}, "Promoted automatically after the fleet freeze")
	r.Dirty = true
}

// promoteFrozen refuses a promote during a fleet freeze (main loop only: it asks).
func (r *rollout) promoteFrozen(ctx workflow.Context) error {
	if (r.BlueGreen == nil && r.Steps == nil) || !freezeChecked(ctx) {
		return nil
	}
	if f := r.fleetFreeze(ctx); f != nil {
		return frozenError(r.in.Namespace, r.in.Name, f)
	}
	return nil
}

func frozenError(ns, name string, f *FreezeHold) error {
	return fmt.Errorf("promote refused: the fleet is frozen until %s (%s); %s/%s goes on after `starter thaw` or the freeze's end, and abort still works", f.Until.Format(time.RFC3339), f.Reason, ns, name)
}
