package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temporal-rollout/rollout/analysis"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
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
	// Web, when set, measures an HTTP endpoint instead of Query (k8s.WebMetric).
	Web *k8s.WebMetric `json:"web,omitempty"`
}

// subject names what is measured in messages: the query, or "GET <url> <path>".
func (in MeasureInput) subject() string {
	if in.Web != nil {
		return in.Web.String()
	}
	return in.Query
}

// Measurement is one measurement and its verdict, as the history records it (the status
// query shows the last ones).
type Measurement = contract.Measurement

// Verdicts of one measurement.
const (
	VerdictSuccessful = "Successful"
	VerdictFailed     = "Failed"
	VerdictNoData     = "NoData"
)

// ErrNoPrometheus: the worker was started without --prometheus-address.
const ErrNoPrometheus = "NoPrometheus"

// MeasureAnalysis queries Prometheus once and weighs the value against the step's bounds. A
// query that fails (Prometheus unreachable, a bad query, a result that is not one value) is an
// error, retried by the activity's retry policy and never a failed measurement.
//
// With Web set it sends the step's HTTP request instead (measureWeb).
func (a *Activities) MeasureAnalysis(ctx context.Context, in MeasureInput) (Measurement, error) {
	if in.Web != nil {
		return a.measureWeb(ctx, in)
	}
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
	subject := in.subject()
	if !ok {
		return Measurement{Verdict: VerdictNoData, Message: fmt.Sprintf("measurement %d: %s returned no data", in.Measurement, subject)}
	}
	m := Measurement{Value: &v, Verdict: VerdictSuccessful}
	switch {
	case in.Min != nil && v < *in.Min:
		m.Verdict = VerdictFailed
		m.Message = fmt.Sprintf("measurement %d: %s = %g, below min %g", in.Measurement, subject, v, *in.Min)
	case in.Max != nil && v > *in.Max:
		m.Verdict = VerdictFailed
		m.Message = fmt.Sprintf("measurement %d: %s = %g, above max %g", in.Measurement, subject, v, *in.Max)
	default:
		m.Message = fmt.Sprintf("measurement %d: %s = %g, within %s", in.Measurement, subject, v, bounds(in.Min, in.Max))
	}
	return m
}

// measureWeb sends a web analysis' request once and weighs the number at its JSON path as a
// Prometheus value is weighed: a path that leads nowhere is no data (onNoData decides), and a
// request that fails, a non-2xx answer or a value that is not a number is an error, retried by
// the activity's retry policy and never a failed measurement.
func (a *Activities) measureWeb(ctx context.Context, in MeasureInput) (Measurement, error) {
	w := in.Web
	v, ok, err := analysis.MeasureWeb(ctx, a.HTTP, analysis.WebRequest{
		URL: w.URL, Method: w.Method, Headers: w.Headers, Body: w.Body, JSONPath: w.JSONPath, Timeout: time.Duration(w.Timeout),
	})
	if err != nil {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("Web analysis failed; retrying", "deployment", in.Deployment.String(), "url", w.URL, "error", err)
		}
		return Measurement{}, fmt.Errorf("web analysis: %w", err)
	}
	m := Weigh(in, v, ok)
	m.Provider = k8s.ProviderWeb
	m.At = time.Now().UTC()
	return m, nil
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
