package k8s

import (
	"strings"
	"testing"
	"time"
)

const jobTemplate = `{"template":{"spec":{"containers":[{"name":"check","image":"busybox","command":["true"]}]}}}`

func TestParseAnalysisProviders(t *testing.T) {
	tests := []struct {
		name         string
		give         string
		wantProvider string
		wantString   string
		wantErr      []string
	}{
		{
			name:         "web, defaults",
			give:         `[{"analysis":{"web":{"url":"http://metrics.local/api","jsonPath":"$.data.errorRate"},"max":0.05}}]`,
			wantProvider: ProviderWeb, wantString: "web analysis of GET http://metrics.local/api $.data.errorRate",
		},
		{
			name:         "web POST with headers and body",
			give:         `[{"analysis":{"web":{"url":"https://m.example/q","method":"post","headers":{"Authorization":"Bearer x"},"body":"{}","jsonPath":"$.a.b[0].c","timeout":"5s"},"min":1,"count":3,"interval":"5s","failureLimit":1}}]`,
			wantProvider: ProviderWeb, wantString: "web analysis of POST https://m.example/q $.a.b[0].c",
		},
		{
			name:         "job",
			give:         `[{"analysis":{"job":{"template":` + jobTemplate + `,"timeout":"10m"}}}]`,
			wantProvider: ProviderJob, wantString: "job analysis",
		},
		{
			name:         "prometheus unchanged",
			give:         `[{"analysis":{"query":"up","min":1}}]`,
			wantProvider: ProviderPrometheus, wantString: "analysis of up",
		},
		{
			name:    "no provider",
			give:    `[{"analysis":{"min":1}}]`,
			wantErr: []string{"step 1 (analysis): query is empty (an analysis has exactly one of query (Prometheus), web or job)"},
		},
		{
			name:    "two providers",
			give:    `[{"analysis":{"query":"up","web":{"url":"http://x","jsonPath":"$.a"},"min":1}}]`,
			wantErr: []string{"an analysis has exactly one of query (Prometheus), web or job, this one has 2"},
		},
		{
			name:    "three providers",
			give:    `[{"analysis":{"query":"up","web":{"url":"http://x","jsonPath":"$.a"},"job":{"template":` + jobTemplate + `},"min":1}}]`,
			wantErr: []string{"this one has 3"},
		},
		{
			name: "bad web, every field named",
			give: `[{"analysis":{"web":{"url":"ftp://x/y","method":"PUT","headers":{"Bad Header":"v","X-Ok":"a\nb"},"jsonPath":"$.a[x]","timeout":"1m"}}}]`,
			wantErr: []string{`web.url "ftp://x/y" is not an absolute http(s) URL`, `web.method "PUT" is neither GET nor POST`,
				`web.headers: "Bad Header" is not a header name`, "web.headers: the value of X-Ok holds a line break",
				"web.jsonPath: json path \"$.a[x]\"", "web.timeout 1m0s is not between 0 and 30s", "neither min nor max"},
		},
		{
			name:    "web without url or path",
			give:    `[{"analysis":{"web":{},"max":1}}]`,
			wantErr: []string{"web.url is empty", "web.jsonPath is empty"},
		},
		{
			name:    "web GET with a body",
			give:    `[{"analysis":{"web":{"url":"http://x","jsonPath":"$.a","body":"{}"},"max":1}}]`,
			wantErr: []string{"web.body is set with method GET"},
		},
		{
			name:    "web unknown field",
			give:    `[{"analysis":{"web":{"url":"http://x","jsonPath":"$.a","path":"$.b"},"max":1}}]`,
			wantErr: []string{`step 1: json: unknown field "path"`},
		},
		{
			name: "bad job, every field named",
			give: `[{"analysis":{"job":{"template":{"template":{"spec":{"restartPolicy":"Always"}}},"timeout":"48h"},"min":1,"count":2,"interval":"5s","failureLimit":1,"onNoData":"fail"}}]`,
			wantErr: []string{"job.template.template.spec.containers is empty", `restartPolicy "Always": a Job takes Never or OnFailure`,
				"job.timeout 48h0m0s is not between 0 and 24h0m0s", "min and max do not apply to a job analysis", "count 2: a job analysis is one measurement",
				"interval does not apply", "failureLimit does not apply", "onNoData does not apply"},
		},
		{
			name:    "job container without image",
			give:    `[{"analysis":{"job":{"template":{"template":{"spec":{"containers":[{"name":"c"}]}}}}}}]`,
			wantErr: []string{"containers[0] needs a name and an image"},
		},
		{
			name:    "job template unknown field",
			give:    `[{"analysis":{"job":{"template":{"completionz":1}}}}]`,
			wantErr: []string{`step 1: json: unknown field "completionz"`},
		},
		{
			name:    "every bad step named",
			give:    `[{"analysis":{"web":{"url":"","jsonPath":"$.a"},"max":1}},{"setWeight":50},{"analysis":{"job":{"template":{}}}}]`,
			wantErr: []string{"step 1 (analysis): web.url is empty", "step 3 (analysis): job.template.template.spec.containers is empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := ParseSteps(map[string]string{StepsAnnotation: tt.give})
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseSteps = %v, want an error", steps)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSteps: %v", err)
			}
			a := steps[0].Analysis
			if got := a.Provider(); got != tt.wantProvider {
				t.Errorf("provider = %s, want %s", got, tt.wantProvider)
			}
			if got := steps[0].String(); got != tt.wantString {
				t.Errorf("String() = %q, want %q", got, tt.wantString)
			}
		})
	}
}

func TestAnalysisProviderDefaults(t *testing.T) {
	steps, err := ParseSteps(map[string]string{StepsAnnotation: `[{"analysis":{"web":{"url":"http://x","method":"post","jsonPath":"$.a"},"max":1}},{"analysis":{"job":{"template":` + jobTemplate + `}}}]`})
	if err != nil {
		t.Fatal(err)
	}
	web, job := steps[0].Analysis, steps[1].Analysis
	if web.Web.Method != "POST" || time.Duration(web.Web.Timeout) != DefaultWebTimeout || web.Count != 1 {
		t.Errorf("web defaults: method %s, timeout %s, count %d; want POST, %s, 1", web.Web.Method, time.Duration(web.Web.Timeout), web.Count, DefaultWebTimeout)
	}
	if time.Duration(job.Job.Timeout) != DefaultJobTimeout || job.Count != 1 {
		t.Errorf("job defaults: timeout %s, count %d; want %s, 1", time.Duration(job.Job.Timeout), job.Count, DefaultJobTimeout)
	}
}

func TestAnalysisJobName(t *testing.T) {
	tests := []struct {
		name       string
		deployment string
		hash       string
		step       int
		key        string
		want       string
	}{
		{name: "short", deployment: "web", hash: "6d4cf56db6", step: 3, key: "run-1", want: "web-6d4cf56db6-s3-"},
		{name: "long name cut at 30", deployment: strings.Repeat("a", 29) + "-bbbbbbbbbb", hash: "h", step: 1, key: "k", want: strings.Repeat("a", 29) + "-h-s1-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AnalysisJobName(tt.deployment, tt.hash, tt.step, tt.key)
			if !strings.HasPrefix(got, tt.want) || len(got) != len(tt.want)+5 || len(got) > 52 {
				t.Errorf("AnalysisJobName = %q, want %q + 5 hex digits", got, tt.want)
			}
			if again := AnalysisJobName(tt.deployment, tt.hash, tt.step, tt.key); again != got {
				t.Errorf("not stable: %q then %q", got, again)
			}
			if other := AnalysisJobName(tt.deployment, tt.hash, tt.step, tt.key+"x"); other == got {
				t.Errorf("another run's key gave the same name %q", got)
			}
		})
	}
}

func TestParseNotify(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    *NotifyConfig
		wantErr []string
	}{
		{name: "absent", give: ""},
		{name: "defaults", give: `{"url":"https://hooks.example/x"}`, want: &NotifyConfig{URL: "https://hooks.example/x", Format: NotifyFormatJSON}},
		{name: "slack with events", give: `{"url":"http://h/x","format":"slack","events":["aborted","completed"]}`,
			want: &NotifyConfig{URL: "http://h/x", Format: NotifyFormatSlack, Events: []string{"aborted", "completed"}}},
		{name: "not an object", give: `["x"]`, wantErr: []string{"is not a JSON object"}},
		{name: "unknown field", give: `{"url":"http://h","channel":"#x"}`, wantErr: []string{`unknown field "channel"`}},
		{name: "every problem named", give: `{"url":"hooks/x","format":"xml","events":["aborted","done","failed"]}`,
			wantErr: []string{`url "hooks/x" is not an absolute http(s) URL`, `format "xml" is neither "json" nor "slack"`, `event "done" is not one of`, `event "failed" is not one of`}},
		{name: "empty url", give: `{"format":"json"}`, wantErr: []string{"url is empty"}},
		{name: "trailing data", give: `{"url":"http://h"} {}`, wantErr: []string{"has data after the object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNotify(map[string]string{NotifyAnnotation: tt.give})
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseNotify = %+v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseNotify: %v", err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && (got.URL != tt.want.URL || got.Format != tt.want.Format || strings.Join(got.Events, ",") != strings.Join(tt.want.Events, ","))) {
				t.Errorf("ParseNotify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNotifyWants(t *testing.T) {
	tests := []struct {
		name  string
		give  *NotifyConfig
		event string
		want  bool
	}{
		{name: "nil", give: nil, event: NotifyAborted, want: false},
		{name: "all by default", give: &NotifyConfig{}, event: NotifyStepReached, want: true},
		{name: "listed", give: &NotifyConfig{Events: []string{NotifyAborted}}, event: NotifyAborted, want: true},
		{name: "not listed", give: &NotifyConfig{Events: []string{NotifyAborted}}, event: NotifyCompleted, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.give.Wants(tt.event); got != tt.want {
				t.Errorf("Wants(%s) = %t, want %t", tt.event, got, tt.want)
			}
		})
	}
}
