package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// Annotations of a stepped (canary) rollout, set by users on the Deployment.
const (
	// StepsAnnotation holds the rollout's steps as a JSON list, in Argo Rollouts' vocabulary:
	//   [{"setWeight":30},{"pause":{"duration":"30s"}},{"setWeight":60},{"pause":{}},
	//    {"analysis":{"query":"...","min":0.95}}]
	StepsAnnotation = "temporal-rollout.io/steps"
	// AutoRollbackAnnotation: "true" aborts a rollout that exceeds its progress deadline,
	// returning the Deployment to the last revision that completed.
	AutoRollbackAnnotation = "temporal-rollout.io/auto-rollback"
)

// Limits on the steps annotation.
const (
	maxSteps        = 100
	maxMeasurements = 1000
	minInterval     = time.Second
)

// RolloutStep is one step of a stepped rollout: exactly one of its fields is set.
type RolloutStep struct {
	// SetWeight brings the new ReplicaSet to ceil(weight% × replicas) and the old ones to the
	// rest, within maxSurge and maxUnavailable. 0–100, never lower than an earlier step's.
	SetWeight *int32 `json:"setWeight,omitempty"`
	// Pause waits: for Duration on a durable timer, or, without one, for promote.
	Pause *PauseStep `json:"pause,omitempty"`
	// Analysis measures a Prometheus query, a web endpoint or a Job's result, and aborts the
	// rollout when it fails.
	Analysis *AnalysisStep `json:"analysis,omitempty"`
	// SetHeaderRoute and SetCanaryScale need the traffic annotation (see traffic.go).
	SetHeaderRoute *HeaderRoute `json:"setHeaderRoute,omitempty"`
	SetCanaryScale *CanaryScale `json:"setCanaryScale,omitempty"`
}

// PauseStep is a pause step. Duration is a Go duration ("30s", "5m") or a number of seconds;
// empty waits for promote.
type PauseStep struct {
	Duration Duration `json:"duration,omitempty"`
}

// AnalysisStep is an analysis step: Count measurements of Query, Interval apart, each
// successful when its value lies within [Min, Max] (either may be left out). More than
// FailureLimit failed measurements fail the analysis, which aborts the rollout. A query that
// returns no data is, with OnNoData "pause" (the default), an inconclusive analysis that waits
// for promote or abort, and with "fail" a failed measurement. A query error is retried and is
// not a measurement.
//
// Exactly one provider measures: Query (Prometheus), Web (an HTTP endpoint's JSON answer,
// weighed as a query's value is) or Job (a Kubernetes Job whose result is the verdict; see
// analysis.go).
type AnalysisStep struct {
	Query        string     `json:"query"`
	Web          *WebMetric `json:"web,omitempty"`
	Job          *JobMetric `json:"job,omitempty"`
	Min          *float64   `json:"min,omitempty"`
	Max          *float64   `json:"max,omitempty"`
	Interval     Duration   `json:"interval,omitempty"`
	Count        int        `json:"count,omitempty"`
	FailureLimit int        `json:"failureLimit,omitempty"`
	OnNoData     string     `json:"onNoData,omitempty"`
}

// OnNoData values.
const (
	OnNoDataPause = "pause"
	OnNoDataFail  = "fail"
)

// Duration is a time.Duration written as a Go duration string or a number of seconds.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "30s" or 30.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return fmt.Errorf("duration %s is neither a string like \"30s\" nor a number of seconds", string(b))
	}
	*d = Duration(n * float64(time.Second))
	return nil
}

// Kind names a step for messages and the history: setWeight, pause or analysis.
func (s RolloutStep) Kind() string {
	switch {
	case s.SetWeight != nil:
		return "setWeight"
	case s.Pause != nil:
		return "pause"
	case s.Analysis != nil:
		return "analysis"
	case s.SetHeaderRoute != nil:
		return "setHeaderRoute"
	case s.SetCanaryScale != nil:
		return "setCanaryScale"
	}
	return "unknown"
}

// String describes a step in a few words ("setWeight 30", "pause 30s", "pause until promoted",
// "analysis of <query>").
func (s RolloutStep) String() string {
	switch {
	case s.SetWeight != nil:
		return fmt.Sprintf("setWeight %d", *s.SetWeight)
	case s.Pause != nil && s.Pause.Duration > 0:
		return "pause " + time.Duration(s.Pause.Duration).String()
	case s.Pause != nil:
		return "pause until promoted"
	case s.Analysis != nil:
		return s.Analysis.String()
	case s.SetHeaderRoute != nil:
		return "setHeaderRoute: " + s.SetHeaderRoute.String()
	case s.SetCanaryScale != nil:
		return "setCanaryScale " + s.SetCanaryScale.String()
	}
	return "unknown step"
}

// ParseSteps reads and validates the steps annotation. An absent or empty annotation is no
// steps (nil, nil). The error names every problem found.
func ParseSteps(annotations map[string]string) ([]RolloutStep, error) {
	raw, ok := annotations[StepsAnnotation]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	var raws []json.RawMessage
	if err := dec.Decode(&raws); err != nil {
		return nil, fmt.Errorf("%s is not a JSON list of steps: %v", StepsAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s has data after the list of steps", StepsAnnotation)
	}
	if len(raws) > maxSteps {
		return nil, fmt.Errorf("%s has %d steps; at most %d", StepsAnnotation, len(raws), maxSteps)
	}
	// Each step is decoded on its own, so every bad step is named.
	var errs []error
	steps := make([]RolloutStep, len(raws))
	undecoded := map[int]bool{}
	for i, r := range raws {
		sd := json.NewDecoder(bytes.NewReader(r))
		sd.DisallowUnknownFields()
		if err := sd.Decode(&steps[i]); err != nil {
			errs = append(errs, fmt.Errorf("step %d: %v", i+1, err))
			undecoded[i] = true
		}
	}
	var weight int32
	for i, s := range steps {
		if undecoded[i] {
			continue
		}
		if err := validateStep(s, weight); err != nil {
			errs = append(errs, fmt.Errorf("step %d (%s): %w", i+1, s.Kind(), err))
		}
		if s.SetWeight != nil {
			weight = *s.SetWeight
		}
		if s.Analysis != nil {
			steps[i].Analysis = s.Analysis.withDefaults()
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", StepsAnnotation, errors.Join(errs...))
	}
	return steps, nil
}

func validateStep(s RolloutStep, weight int32) error {
	set := 0
	for _, b := range []bool{s.SetWeight != nil, s.Pause != nil, s.Analysis != nil, s.SetHeaderRoute != nil, s.SetCanaryScale != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("a step has exactly one of setWeight, pause, analysis, setHeaderRoute or setCanaryScale, this one has %d", set)
	}
	switch {
	case s.SetWeight != nil:
		w := *s.SetWeight
		if w < 0 || w > 100 {
			return fmt.Errorf("setWeight %d is not between 0 and 100", w)
		}
		if w < weight {
			return fmt.Errorf("setWeight %d is lower than the weight before it (%d); a rollout's weight never goes back", w, weight)
		}
	case s.Pause != nil:
		if s.Pause.Duration < 0 {
			return fmt.Errorf("pause duration %s is negative", time.Duration(s.Pause.Duration))
		}
	case s.Analysis != nil:
		return s.Analysis.validate()
	case s.SetHeaderRoute != nil:
		return s.SetHeaderRoute.validate()
	case s.SetCanaryScale != nil:
		return s.SetCanaryScale.validate()
	}
	return nil
}

func (a *AnalysisStep) withDefaults() *AnalysisStep {
	c := *a
	c.Web, c.Job = a.Web.withDefaults(), a.Job.withDefaults()
	if c.Job != nil {
		// A Job is one measurement: its result.
		c.Count = 1
	}
	if c.Interval == 0 {
		c.Interval = Duration(10 * time.Second)
	}
	if c.Count == 0 {
		c.Count = 1
	}
	if c.OnNoData == "" {
		c.OnNoData = OnNoDataPause
	}
	return &c
}

func (a *AnalysisStep) validate() error {
	var errs []error
	providers := 0
	for _, b := range []bool{a.Query != "", a.Web != nil, a.Job != nil} {
		if b {
			providers++
		}
	}
	switch {
	case providers > 1:
		errs = append(errs, fmt.Errorf("an analysis has exactly one of query (Prometheus), web or job, this one has %d", providers))
	case a.Job != nil:
		return a.validateJob()
	case a.Web != nil:
		errs = append(errs, a.Web.validate()...)
	case providers == 0 || strings.TrimSpace(a.Query) == "":
		errs = append(errs, errors.New("query is empty (an analysis has exactly one of query (Prometheus), web or job)"))
	}
	if a.Min == nil && a.Max == nil {
		errs = append(errs, errors.New("neither min nor max is set; a measurement needs a bound"))
	}
	// In a fixed order: this runs in workflow code, and its message is recorded.
	for _, b := range []struct {
		name string
		v    *float64
	}{{"min", a.Min}, {"max", a.Max}} {
		if b.v != nil && (math.IsNaN(*b.v) || math.IsInf(*b.v, 0)) {
			errs = append(errs, fmt.Errorf("%s is not a finite number", b.name))
		}
	}
	if a.Min != nil && a.Max != nil && *a.Min > *a.Max {
		errs = append(errs, fmt.Errorf("min %g is above max %g", *a.Min, *a.Max))
	}
	if a.Interval != 0 && time.Duration(a.Interval) < minInterval {
		errs = append(errs, fmt.Errorf("interval %s is below %s", time.Duration(a.Interval), minInterval))
	}
	if a.Count < 0 || a.Count > maxMeasurements {
		errs = append(errs, fmt.Errorf("count %d is not between 1 and %d", a.Count, maxMeasurements))
	}
	count := max(a.Count, 1)
	if a.FailureLimit < 0 || a.FailureLimit >= count {
		errs = append(errs, fmt.Errorf("failureLimit %d is not between 0 and count−1 (%d)", a.FailureLimit, count-1))
	}
	switch a.OnNoData {
	case "", OnNoDataPause, OnNoDataFail:
	default:
		errs = append(errs, fmt.Errorf("onNoData %q is neither %q nor %q", a.OnNoData, OnNoDataPause, OnNoDataFail))
	}
	return errors.Join(errs...)
}

// ParseAutoRollback reads the auto-rollback annotation: "true", "false" or absent.
func ParseAutoRollback(annotations map[string]string) (bool, error) {
	switch v, ok := annotations[AutoRollbackAnnotation]; {
	case !ok || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s is %q; want \"true\" or \"false\"", AutoRollbackAnnotation, v)
	}
}

// RolloutAnnotations is the value of a Deployment's stepped-rollout annotations, as one string
// to compare: a change to either calls for a new decision.
func RolloutAnnotations(annotations map[string]string) string {
	s := annotations[StepsAnnotation] + "\x00" + annotations[AutoRollbackAnnotation]
	if v, ok := annotations[TrafficAnnotation]; ok {
		s += "\x00" + v
	}
	if v, ok := annotations[BlueGreenAnnotation]; ok {
		s += "\x01" + v
	}
	return s
}

// WeightReplicas is the new ReplicaSet's share of replicas at a weight: ceil(weight% ×
// replicas). 10 replicas at 25%: 3.
func WeightReplicas(weight, replicas int32) int32 {
	if weight <= 0 || replicas <= 0 {
		return 0
	}
	if weight >= 100 {
		return replicas
	}
	return int32((int64(weight)*int64(replicas) + 99) / 100)
}

// StepShares is a setWeight step's end state: the new ReplicaSet's pods (canary) and the old
// ones' (stable). The new one takes WeightReplicas and the old ones the rest, but at a weight
// of 1–99 each side keeps a pod, as Argo Rollouts' basic canary does: where the ceiling takes
// every replica, the old ones keep one surge pod when maxSurge allows (replicas + 1 pods in
// all), and otherwise the new one gives one back. Only 1 replica without surge cannot have
// both: the ceiling gives the new one the pod.
//
//	10 replicas at 30%:                    3 and 7
//	10 replicas at 99%, maxSurge 1:       10 and 1 (11 pods)
//	10 replicas at 99%, maxSurge 0:        9 and 1
//	 3 replicas at 70%, maxSurge 1:        3 and 1 (ceil(2.1) = 3)
//	 1 replica  at 20%, maxSurge 1:        1 and 1
//	 1 replica  at 20%, maxSurge 0:        1 and 0
//	 any        at 0% / 100%:    0 and replicas / replicas and 0
//
// The ceiling stays where Argo takes the nearest count: 10 replicas at 14% are 2 and 8 here, 1
// and 9 in Argo; a canary step never runs fewer new pods than its weight asks for.
func StepShares(weight, replicas, maxSurge int32) (newRS, old int32) {
	newRS = WeightReplicas(weight, replicas)
	switch {
	case replicas <= 0 || weight <= 0 || weight >= 100 || newRS < replicas:
	case maxSurge > 0:
		return newRS, 1
	case replicas > 1:
		newRS--
	}
	return newRS, replicas - newRS
}

// StepsApply reports whether a Deployment's strategy can take steps: RollingUpdate only (a
// Recreate rollout never runs old and new pods together).
func StepsApply(d *appsv1.Deployment) error {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return fmt.Errorf("%s needs the RollingUpdate strategy; this Deployment uses Recreate", StepsAnnotation)
	}
	return nil
}
