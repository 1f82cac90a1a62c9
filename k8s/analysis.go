package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/temporal-rollout/rollout/analysis/jsonpath"
)

// Analysis providers (AnalysisStep.Provider).
const (
	ProviderPrometheus = "prometheus"
	ProviderWeb        = "web"
	ProviderJob        = "job"
)

// Limits and defaults of the web and job providers.
const (
	// DefaultWebTimeout bounds one web measurement's request; MaxWebTimeout is the most a step
	// may ask for (a measurement's activity runs 45 seconds at most).
	DefaultWebTimeout = 10 * time.Second
	MaxWebTimeout     = 30 * time.Second
	// DefaultJobTimeout bounds an analysis Job from its creation to its verdict;
	// MaxJobTimeout is the most a step may ask for.
	DefaultJobTimeout = 10 * time.Minute
	MaxJobTimeout     = 24 * time.Hour
	// DefaultJobTTL is the ttlSecondsAfterFinished an analysis Job gets when its template sets
	// none: it stays an hour for inspection (kubectl logs job/...), then the TTL controller
	// removes it.
	DefaultJobTTL int32 = 3600
)

// WebMetric is a web analysis: each measurement sends one HTTP request and reads the number
// at JSONPath in the JSON answer (see package analysis/jsonpath for the paths it reads:
// "$.data.errorRate", "$.results[0].value"). The number is weighed against min and max as a
// Prometheus value is. A non-2xx answer, an answer that is not JSON, or a value that is not a
// number is an error, retried as a failing query is; a path that leads nowhere (or to null)
// is no data, which onNoData decides on.
type WebMetric struct {
	URL string `json:"url"`
	// Method is GET (the default) or POST.
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent with POST.
	Body     string   `json:"body,omitempty"`
	JSONPath string   `json:"jsonPath"`
	Timeout  Duration `json:"timeout,omitempty"`
}

// JobMetric is a job analysis: the rollout creates a Job from Template (a batch/v1 JobSpec)
// and waits for it, up to Timeout. Complete is a successful analysis; Failed (including a Job
// past its activeDeadlineSeconds, which defaults to Timeout) a failed one, which aborts the
// rollout.
type JobMetric struct {
	Template batchv1.JobSpec `json:"template"`
	Timeout  Duration        `json:"timeout,omitempty"`
}

// Provider names the analysis' provider: prometheus, web or job.
func (a *AnalysisStep) Provider() string {
	switch {
	case a.Job != nil:
		return ProviderJob
	case a.Web != nil:
		return ProviderWeb
	}
	return ProviderPrometheus
}

// String describes the analysis in a few words: "analysis of <query>", "web analysis of
// <method> <url> <path>", "job analysis".
func (a *AnalysisStep) String() string {
	switch {
	case a.Job != nil:
		return "job analysis"
	case a.Web != nil:
		return "web analysis of " + a.Web.String()
	}
	return "analysis of " + a.Query
}

// String is "GET http://... $.path".
func (w *WebMetric) String() string {
	m := w.Method
	if m == "" {
		m = http.MethodGet
	}
	return m + " " + w.URL + " " + w.JSONPath
}

func (w *WebMetric) withDefaults() *WebMetric {
	if w == nil {
		return nil
	}
	c := *w
	c.Method = strings.ToUpper(c.Method)
	if c.Method == "" {
		c.Method = http.MethodGet
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(DefaultWebTimeout)
	}
	return &c
}

func (w *WebMetric) validate() []error {
	var errs []error
	if strings.TrimSpace(w.URL) == "" {
		errs = append(errs, errors.New("web.url is empty"))
	} else if u, err := url.Parse(w.URL); err != nil {
		errs = append(errs, fmt.Errorf("web.url %q: %v", w.URL, err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("web.url %q is not an absolute http(s) URL", w.URL))
	}
	switch strings.ToUpper(w.Method) {
	case "", http.MethodGet:
		if w.Body != "" {
			errs = append(errs, errors.New("web.body is set with method GET; send a body with POST"))
		}
	case http.MethodPost:
	default:
		errs = append(errs, fmt.Errorf("web.method %q is neither GET nor POST", w.Method))
	}
	// In a fixed order: this runs in workflow code, and its message is recorded.
	names := make([]string, 0, len(w.Headers))
	for k := range w.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !validHeaderName(k) {
			errs = append(errs, fmt.Errorf("web.headers: %q is not a header name", k))
		}
		if strings.ContainsAny(w.Headers[k], "\r\n") {
			errs = append(errs, fmt.Errorf("web.headers: the value of %s holds a line break", k))
		}
	}
	if strings.TrimSpace(w.JSONPath) == "" {
		errs = append(errs, errors.New("web.jsonPath is empty; name the number to weigh, like $.data.errorRate"))
	} else if _, err := jsonpath.Parse(w.JSONPath); err != nil {
		errs = append(errs, fmt.Errorf("web.jsonPath: %v", err))
	}
	if t := time.Duration(w.Timeout); t < 0 || t > MaxWebTimeout {
		errs = append(errs, fmt.Errorf("web.timeout %s is not between 0 and %s", t, MaxWebTimeout))
	}
	return errs
}

// validHeaderName: an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func (j *JobMetric) withDefaults() *JobMetric {
	if j == nil {
		return nil
	}
	c := *j
	if c.Timeout == 0 {
		c.Timeout = Duration(DefaultJobTimeout)
	}
	return &c
}

// validateJob checks a job analysis: a template with containers and a restartPolicy a Job
// takes, a timeout, and none of the fields that weigh values (min, max, count above 1,
// interval, failureLimit, onNoData): the Job's result is the verdict.
func (a *AnalysisStep) validateJob() error {
	var errs []error
	j := a.Job
	spec := j.Template.Template.Spec
	if len(spec.Containers) == 0 {
		errs = append(errs, errors.New("job.template.template.spec.containers is empty"))
	}
	for i, c := range spec.Containers {
		if c.Name == "" || c.Image == "" {
			errs = append(errs, fmt.Errorf("job.template.template.spec.containers[%d] needs a name and an image", i))
		}
	}
	switch spec.RestartPolicy {
	case "", corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		errs = append(errs, fmt.Errorf("job.template.template.spec.restartPolicy %q: a Job takes Never or OnFailure", spec.RestartPolicy))
	}
	if t := time.Duration(j.Timeout); t < 0 || t > MaxJobTimeout {
		errs = append(errs, fmt.Errorf("job.timeout %s is not between 0 and %s", t, MaxJobTimeout))
	}
	if a.Min != nil || a.Max != nil {
		errs = append(errs, errors.New("min and max do not apply to a job analysis (the Job's result is the verdict)"))
	}
	if a.Count > 1 {
		errs = append(errs, fmt.Errorf("count %d: a job analysis is one measurement", a.Count))
	}
	if a.Interval != 0 {
		errs = append(errs, errors.New("interval does not apply to a job analysis (one measurement)"))
	}
	if a.FailureLimit != 0 {
		errs = append(errs, errors.New("failureLimit does not apply to a job analysis (one measurement)"))
	}
	if a.OnNoData != "" {
		errs = append(errs, errors.New("onNoData does not apply to a job analysis (a Job always has a result)"))
	}
	return errors.Join(errs...)
}

// AnalysisJobName is an analysis Job's name: the Deployment's (up to 30 characters), the
// template hash, the step, and 5 hex digits of key (the workflow run that entered the step),
// so a retried activity finds the Job it created, and a later rollout of the same template
// makes a new one. At most 52 characters:
//
//	web, 6d4cf56db6, step 3, run 0f8e...: web-6d4cf56db6-s3-9c1a2
func AnalysisJobName(deployment, hash string, step int, key string) string {
	name := deployment
	if len(name) > 30 {
		name = strings.TrimRight(name[:30], "-.")
	}
	if len(hash) > 10 {
		hash = hash[:10]
	}
	return fmt.Sprintf("%s-%s-s%d-%s", name, hash, step, shortHash(key))
}

func shortHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:5]
}

// Labels on an analysis Job (and its pods): the Deployment it measures and the 1-based step.
const (
	AnalysisDeploymentLabel = "temporal-rollout.io/deployment"
	AnalysisStepLabel       = "temporal-rollout.io/analysis-step"
)
