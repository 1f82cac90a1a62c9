package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// Analysis providers: a Prometheus query and a web endpoint are measured by MeasureAnalysis,
// one activity per measurement; a Job by RunAnalysisJob, one activity that creates the Job
// and waits for its result. Each result is in the history.

// jobOptions: RunAnalysisJob may wait for its Job up to the step's timeout, heartbeating, so a
// dead worker's wait fails within the heartbeat timeout and the retry (on any worker) finds
// the Job the first attempt created and waits on. Past the timeout (plus a margin over the
// Job's activeDeadlineSeconds, which fails it first) the analysis is inconclusive.
func jobOptions(timeout time.Duration) workflow.ActivityOptions {
	if timeout <= 0 {
		timeout = k8s.DefaultJobTimeout
	}
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: timeout + 2*time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrInvalid, activities.ErrJobGone, activities.ErrNotFound},
		},
	}
}

// measurer takes an analysis step's measurements with its provider's activity.
type measurer struct {
	spec *k8s.AnalysisStep
	st   *analysisState
	ref  activities.DeploymentRef
	hash string
}

// newMeasurer prepares the current analysis step's measurements: it records the provider in
// the step's state (the status query shows it) and, for a Job, the Job's name: the
// Deployment's, the template's, the step's and this run's, so every attempt (and a run
// continued from this one, which carries the name) waits on the same Job, and a later rollout
// of the same template makes a new one.
func (r *rollout) newMeasurer(ctx workflow.Context, spec *k8s.AnalysisStep, st *analysisState) *measurer {
	st.Provider = spec.Provider()
	if spec.Job != nil && st.Job == "" {
		st.Job = k8s.AnalysisJobName(r.in.Name, r.Steps.Hash, st.Step+1, workflow.GetInfo(ctx).WorkflowExecution.RunID)
	}
	return &measurer{
		spec: spec, st: st, hash: r.Steps.Hash,
		ref: activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID},
	}
}

// take takes the next measurement.
func (m *measurer) take(ctx workflow.Context) (activities.Measurement, error) {
	var res activities.Measurement
	spec, st := m.spec, m.st
	if spec.Job != nil {
		jctx := workflow.WithActivityOptions(ctx, jobOptions(time.Duration(spec.Job.Timeout)))
		err := workflow.ExecuteActivity(jctx, a.RunAnalysisJob, activities.JobAnalysisInput{
			Deployment: m.ref, Step: st.Step + 1, Hash: m.hash, Name: st.Job, Job: *spec.Job,
		}).Get(ctx, &res)
		return res, err
	}
	mctx := workflow.WithActivityOptions(ctx, measureOptions)
	err := workflow.ExecuteActivity(mctx, a.MeasureAnalysis, activities.MeasureInput{
		Deployment: m.ref, Step: st.Step + 1, Measurement: st.Taken + 1, Query: spec.Query, Min: spec.Min, Max: spec.Max, Web: spec.Web,
	}).Get(ctx, &res)
	return res, err
}
