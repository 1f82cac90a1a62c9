package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// phaseWaits are the durable waits of the phase a rollout holds at (a stepped rollout's step,
// a blue-green phase): its timer and its analysis. The analysis runs in a goroutine and
// reports its verdict on analysisDone with the generation it started at; stop cancels both and
// makes a report of an earlier generation stale.
type phaseWaits struct {
	timer          workflow.Future
	cancelTimer    workflow.CancelFunc
	cancelAnalysis workflow.CancelFunc
	analysisGen    int
	analysisDone   workflow.Channel
}

func newPhaseWaits(ctx workflow.Context) phaseWaits {
	return phaseWaits{analysisDone: workflow.NewBufferedChannel(ctx, 4)}
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
			w.analysisDone.Send(gctx, analysisResult{gen: gen, verdict: verdict, message: msg})
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
	sel.AddReceive(w.analysisDone, func(c workflow.ReceiveChannel, _ bool) {
		var res analysisResult
		c.Receive(ctx, &res)
		if res.gen != w.analysisGen {
			return
		}
		w.cancelAnalysis = nil
		verdict(res)
	})
}
