package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// phase is the machinery a rollout's phases share, a stepped rollout's steps (steps.go) and a
// blue-green rollout's phases (bluegreen.go) alike: the phase's durable timer and analysis
// (phaseWaits), which phase the timer is for, the fleet freeze's hold before the phase goes on
// and its recheck, an invalid annotation's hold, and what an analysis's verdict does. A
// strategy holds one and says only what its phases are and where each goes next.
type phase struct {
	// effects, and through them the run's State.
	*effects
	waits phaseWaits
	// timerFor names the phase the timer is for (a step's index, a blue-green phase, or the
	// abort's hold): a timer that fires for another is stale.
	timerFor string
	// abort starts an abort (the rollout's: it ends every strategy's phases).
	abort func(ctx workflow.Context, reason string)
	// fired and verdict are the strategy's: its timer fired, its analysis has a verdict.
	fired   func(ctx workflow.Context)
	verdict func(ctx workflow.Context, res analysisResult)
}

func newPhase(ctx workflow.Context, fx *effects) phase {
	return phase{effects: fx, waits: newPhaseWaits(ctx)}
}

// startTimer waits until until for the phase named key; summary names the timer in the
// Temporal UI.
func (p *phase) startTimer(ctx workflow.Context, key string, until time.Time, summary string) {
	p.waits.startTimer(ctx, until, summary)
	p.timerFor = key
}

// stop cancels the phase's timer and analysis.
func (p *phase) stop() { p.waits.stop() }

// addTo adds the phase's timer and analysis to sel.
func (p *phase) addTo(ctx workflow.Context, sel workflow.Selector) {
	p.waits.addTo(ctx, sel, func() { p.fired(ctx) }, func(res analysisResult) { p.verdict(ctx, res) })
}

// startAnalysis measures spec against template hash in a goroutine, its state in st: it
// records the provider (the status query shows it) and, for a Job, the Job's name: the
// Deployment's, the template's, the step's and this run's, so every attempt (and a run
// continued from this one, which carries the name) waits on the same Job, and a later rollout
// of the same template makes a new one.
func (p *phase) startAnalysis(ctx workflow.Context, spec *k8s.AnalysisStep, st *contract.AnalysisStatus, hash string) {
	st.Provider = spec.Provider()
	if spec.Job != nil && st.Job == "" {
		st.Job = k8s.AnalysisJobName(p.dep.Name, hash, st.Step+1, workflow.GetInfo(ctx).WorkflowExecution.RunID)
	}
	p.waits.startAnalysis(ctx, &measurer{spec: spec, st: st, hash: hash,
		ref: activities.DeploymentRef{Namespace: p.dep.Namespace, Name: p.dep.Name, UID: p.UID}})
}

// analysisVerdict does what an analysis's verdict says, for the analysis label names ("Step 2
// of 4 (analysis ...): analysis", "Blue-green: pre-promotion analysis"): passed, the event and
// then passed; failed, the event and an abort (abortReason and the verdict's message);
// inconclusive, the phase (w) waits for promote or abort.
func (p *phase) analysisVerdict(ctx workflow.Context, res analysisResult, label, abortReason string, w *PhaseWait, passed func()) {
	switch res.verdict {
	case analysisSuccessful:
		p.recordStep(ctx, "AnalysisSuccessful", label+" passed: "+res.message)
		passed()
	case analysisFailed:
		p.recordStepWarning(ctx, "AnalysisFailed", label+" failed: "+res.message)
		p.abort(ctx, abortReason+res.message)
	default:
		w.WaitingFor, w.Message = contract.WaitingForPromote, label+" inconclusive, paused until promoted or aborted: "+res.message
		p.recordStepWarning(ctx, "AnalysisInconclusive", w.Message)
	}
	p.Dirty = true
}

// holdInvalid holds the rollout for an invalid annotation until it is fixed: a Warning event
// once per value, and the cap that freezes the rollout where it is.
func (p *phase) holdInvalid(ctx workflow.Context, d *appsv1.Deployment, hash string, err error) *k8s.Canary {
	key := k8s.RolloutAnnotations(d.Annotations)
	msg := "Rollout held: invalid annotation: " + err.Error()
	if p.Warned != key {
		p.Warned = key
		p.recordStepWarning(ctx, "InvalidRolloutAnnotation", msg)
	}
	p.AnnotationError = msg
	return &k8s.Canary{Hash: hash, Hold: true, Freeze: true, Message: msg}
}

// freezeHold asks whether the fleet freeze holds the phase before it goes on: nil to go on (the
// run has no freeze branch, the fleet is not frozen, or the rollout is a release's rollback).
func (p *phase) freezeHold(ctx workflow.Context) *contract.FreezeHold {
	if !freezeChecked(ctx) {
		return nil
	}
	f := p.fleetFreeze(ctx)
	if f == nil || (p.releaseRollback && workflow.GetVersion(ctx, changeReleaseRollbackUnfrozen, workflow.DefaultVersion, 1) >= 1) {
		// A release's rollback is not held (change fleet-freeze-skips-release-rollback): one
		// holding in the freeze ran out of rolloutTimeout, and left the release Halted half
		// rolled back.
		return nil
	}
	return f
}

// recheckFreeze asks the freeze again for a phase it holds (w.Freeze): still frozen, the phase
// holds on (text says how, look starts the next look, the event is recorded again only when
// the freeze changed) and it returns true; over, it records the thaw ("...: " + then) and
// returns false for the strategy to go on.
func (p *phase) recheckFreeze(ctx workflow.Context, w *PhaseWait, text func() string, look func(workflow.Context), then string) bool {
	if f := p.fleetFreeze(ctx); f != nil {
		changed := *f != *w.Freeze
		w.Freeze = f
		w.Message = text()
		look(ctx)
		if changed {
			p.recordStepWarning(ctx, "RolloutFrozen", w.Message)
		}
		return true
	}
	was := w.Freeze
	w.Freeze = nil
	p.recordStep(ctx, "RolloutThawed", fmt.Sprintf("Fleet freeze over (was until %s: %s): %s", was.Until.Format(time.RFC3339), was.Reason, then))
	return false
}

// nextLook is when a phase the freeze holds asks again: in freezeRecheck, or at the freeze's
// end if sooner.
func nextLook(ctx workflow.Context, f *contract.FreezeHold) time.Time {
	at := workflow.Now(ctx).Add(freezeRecheck)
	if u := f.Until; !u.IsZero() && u.Before(at) {
		at = u
	}
	return at
}

// phaseWaits are the durable waits of the phase a rollout holds at (a stepped rollout's step,
// a blue-green phase): its timer and its analysis. The analysis runs in a goroutine and
// reports its verdict on verdicts with the generation it started at; stop cancels both and
// makes a report of an earlier generation stale.
type phaseWaits struct {
	timer          workflow.Future
	cancelTimer    workflow.CancelFunc
	cancelAnalysis workflow.CancelFunc
	analysisGen    int
	verdicts       workflow.Channel
}

func newPhaseWaits(ctx workflow.Context) phaseWaits {
	return phaseWaits{verdicts: workflow.NewBufferedChannel(ctx, 4)}
}

// startTimer waits until until (at least a millisecond); summary names the timer in the
// Temporal UI (metadata: no command changes).
func (w *phaseWaits) startTimer(ctx workflow.Context, until time.Time, summary string) {
	d := max(until.Sub(workflow.Now(ctx)), time.Millisecond)
	tctx, cancel := workflow.WithCancel(ctx)
	w.timer, w.cancelTimer = workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: summary}), cancel
}

// startAnalysis takes meas's measurements in a goroutine and reports its verdict.
func (w *phaseWaits) startAnalysis(ctx workflow.Context, meas *measurer) {
	actx, cancel := workflow.WithCancel(ctx)
	w.cancelAnalysis = cancel
	gen := w.analysisGen
	workflow.Go(actx, func(gctx workflow.Context) {
		meas.run(gctx, func(verdict, msg string) {
			w.verdicts.Send(gctx, analysisResult{gen: gen, verdict: verdict, message: msg})
		})
	})
}

// stop cancels the timer and the analysis.
func (w *phaseWaits) stop() {
	if w.cancelTimer != nil {
		w.cancelTimer()
	}
	w.timer, w.cancelTimer = nil, nil
	if w.cancelAnalysis != nil {
		w.cancelAnalysis()
	}
	w.cancelAnalysis = nil
	w.analysisGen++
}

// addTo adds the timer and the analysis's report to sel: fired runs when the timer fires,
// verdict with the report of the analysis under way (one of an analysis stopped since is
// dropped).
func (w *phaseWaits) addTo(ctx workflow.Context, sel workflow.Selector, fired func(), verdict func(analysisResult)) {
	if w.timer != nil {
		sel.AddFuture(w.timer, func(f workflow.Future) {
			w.timer, w.cancelTimer = nil, nil
			if f.Get(ctx, nil) == nil {
				fired()
			}
		})
	}
	sel.AddReceive(w.verdicts, func(c workflow.ReceiveChannel, _ bool) {
		var res analysisResult
		c.Receive(ctx, &res)
		if res.gen != w.analysisGen {
			return
		}
		w.cancelAnalysis = nil
		verdict(res)
	})
}
