package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Analysis providers: a Prometheus query and a web endpoint are measured by MeasureAnalysis,
// one activity per measurement; a Job by RunAnalysisJob, one activity that creates the Job
// and waits for its result. Each result is in the history.

// measurer takes an analysis step's measurements with its provider's activity.
type measurer struct {
	spec *k8s.AnalysisStep
	st   *contract.AnalysisStatus
	ref  activities.DeploymentRef
	hash string
}

// take takes the next measurement.
func (m *measurer) take(ctx workflow.Context) (activities.Measurement, error) {
	var res activities.Measurement
	spec, st := m.spec, m.st
	if spec.Job != nil {
		o := jobOptions(time.Duration(spec.Job.Timeout))
		o.Summary = fmt.Sprintf("run analysis Job %s (step %d of %s/%s, template %s)", st.Job, st.Step+1, m.ref.Namespace, m.ref.Name, m.hash)
		jctx := workflow.WithActivityOptions(ctx, o)
		err := workflow.ExecuteActivity(jctx, a.RunAnalysisJob, activities.JobAnalysisInput{
			Deployment: m.ref, Step: st.Step + 1, Hash: m.hash, Name: st.Job, Job: *spec.Job,
		}).Get(ctx, &res)
		return res, err
	}
	o := measureOptions
	o.Summary = fmt.Sprintf("measurement %d of %d (%s) of step %d of %s/%s", st.Taken+1, spec.Count, spec.Provider(), st.Step+1, m.ref.Namespace, m.ref.Name)
	mctx := workflow.WithActivityOptions(ctx, o)
	err := workflow.ExecuteActivity(mctx, a.MeasureAnalysis, activities.MeasureInput{
		Deployment: m.ref, Step: st.Step + 1, Measurement: st.Taken + 1, Query: spec.Query, Min: spec.Min, Max: spec.Max, Web: spec.Web,
	}).Get(ctx, &res)
	return res, err
}

// Outcomes of an analysis.
const (
	analysisSuccessful   = "Successful"
	analysisFailed       = "Failed"
	analysisInconclusive = "Inconclusive"
)

// maxKeptMeasurements bounds the measurements the state (and the status query) keeps; every
// one is in the history as its activity's result.
const maxKeptMeasurements = 10

// analysisResult is what an analysis goroutine hands the main loop.
type analysisResult struct {
	gen     int
	verdict string
	message string
}

// run takes the analysis's measurements, Interval apart, and hands its verdict to send (also
// recorded in the state); it returns without a verdict when ctx is canceled.
func (meas *measurer) run(gctx workflow.Context, send func(verdict, msg string)) {
	spec, st := meas.spec, meas.st
	done := func(verdict, msg string) {
		st.Verdict, st.Message = verdict, msg
		send(verdict, msg)
	}
	for st.Taken < spec.Count {
		if st.Taken > 0 {
			if err := workflow.NewTimerWithOptions(gctx, time.Duration(spec.Interval), workflow.TimerOptions{Summary: fmt.Sprintf("next measurement (%d of %d) of step %d of %s/%s in %s", st.Taken+1, spec.Count, st.Step+1, meas.ref.Namespace, meas.ref.Name, time.Duration(spec.Interval))}).Get(gctx, nil); err != nil {
				return
			}
		}
		m, err := meas.take(gctx)
		if gctx.Err() != nil {
			return
		}
		if err != nil {
			done(analysisInconclusive, fmt.Sprintf("measurement %d could not be taken: %v", st.Taken+1, err))
			return
		}
		st.Taken++
		st.Measurements = append(st.Measurements, m)
		if len(st.Measurements) > maxKeptMeasurements {
			st.Measurements = st.Measurements[len(st.Measurements)-maxKeptMeasurements:]
		}
		switch m.Verdict {
		case activities.VerdictFailed:
			st.Failures++
		case activities.VerdictNoData:
			if spec.OnNoData != k8s.OnNoDataFail {
				done(analysisInconclusive, m.Message+" (onNoData: pause)")
				return
			}
			st.Failures++
		}
		if st.Failures > spec.FailureLimit {
			done(analysisFailed, fmt.Sprintf("%d of %d measurements failed (failureLimit %d); last: %s", st.Failures, st.Taken, spec.FailureLimit, m.Message))
			return
		}
	}
	done(analysisSuccessful, fmt.Sprintf("%d measurements, %d failed (failureLimit %d)", st.Taken, st.Failures, spec.FailureLimit))
}
