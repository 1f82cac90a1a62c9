package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
)

// Prometheus answers instant PromQL queries (analysis.Client): the single value of the result,
// ok=false when it holds no data, an error when the query could not be answered.
type Prometheus interface {
	Query(ctx context.Context, query string) (value float64, ok bool, err error)
}

// MeasureInput is one measurement of an analysis step.
type MeasureInput struct {
	Deployment DeploymentRef `json:"deployment"`
	// Step is the 1-based step the analysis belongs to, Measurement the 1-based measurement.
	Step        int      `json:"step"`
	Measurement int      `json:"measurement"`
	Query       string   `json:"query"`
	Min         *float64 `json:"min,omitempty"`
	Max         *float64 `json:"max,omitempty"`
}

// Verdicts of one measurement.
const (
	VerdictSuccessful = "Successful"
	VerdictFailed     = "Failed"
	VerdictNoData     = "NoData"
)

// Measurement is one measurement and its verdict, as the history records it.
type Measurement struct {
	Value   *float64  `json:"value,omitempty"`
	Verdict string    `json:"verdict"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// ErrNoPrometheus: the worker was started without --prometheus-address.
const ErrNoPrometheus = "NoPrometheus"

// MeasureAnalysis queries Prometheus once and weighs the value against the step's bounds. A
// query that fails (Prometheus unreachable, a bad query, a result that is not one value) is an
// error, retried by the activity's retry policy and never a failed measurement.
func (a *Activities) MeasureAnalysis(ctx context.Context, in MeasureInput) (Measurement, error) {
	if a.Prometheus == nil {
		return Measurement{}, nonRetryable(ErrNoPrometheus, "analysis of %s: the worker has no Prometheus to ask (start it with --prometheus-address)", in.Deployment)
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, ok, err := a.Prometheus.Query(qctx, in.Query)
	if err != nil {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("Analysis query failed; retrying", "deployment", in.Deployment.String(), "query", in.Query, "error", err)
		}
		return Measurement{}, fmt.Errorf("query %q: %w", in.Query, err)
	}
	m := Weigh(in, v, ok)
	m.At = time.Now().UTC()
	return m, nil
}

// Weigh is a measurement's verdict: NoData without a value, Successful within [Min, Max],
// Failed otherwise.
func Weigh(in MeasureInput, v float64, ok bool) Measurement {
	if !ok {
		return Measurement{Verdict: VerdictNoData, Message: fmt.Sprintf("measurement %d: %s returned no data", in.Measurement, in.Query)}
	}
	m := Measurement{Value: &v, Verdict: VerdictSuccessful}
	switch {
	case in.Min != nil && v < *in.Min:
		m.Verdict = VerdictFailed
		m.Message = fmt.Sprintf("measurement %d: %s = %g, below min %g", in.Measurement, in.Query, v, *in.Min)
	case in.Max != nil && v > *in.Max:
		m.Verdict = VerdictFailed
		m.Message = fmt.Sprintf("measurement %d: %s = %g, above max %g", in.Measurement, in.Query, v, *in.Max)
	default:
		m.Message = fmt.Sprintf("measurement %d: %s = %g, within %s", in.Measurement, in.Query, v, bounds(in.Min, in.Max))
	}
	return m
}

func bounds(lo, hi *float64) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("[%g, %g]", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("min %g", *lo)
	case hi != nil:
		return fmt.Sprintf("max %g", *hi)
	}
	return "no bounds"
}
