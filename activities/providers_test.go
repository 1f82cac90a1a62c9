package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/temporal-rollout/rollout/k8s"
)

func f64(v float64) *float64 { return &v }

func TestMeasureAnalysisWeb(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/rate":
			_, _ = io.WriteString(w, `{"data":{"errorRate":0.02}}`)
		case "/high":
			_, _ = io.WriteString(w, `{"data":{"errorRate":0.3}}`)
		default:
			http.Error(w, "no such metric", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name        string
		give        string // path
		wantVerdict string
		wantValue   *float64
		wantMessage string
		wantErr     string
	}{
		{name: "within max", give: "/rate", wantVerdict: VerdictSuccessful, wantValue: f64(0.02), wantMessage: "= 0.02, within max 0.05"},
		{name: "above max", give: "/high", wantVerdict: VerdictFailed, wantValue: f64(0.3), wantMessage: "= 0.3, above max 0.05"},
		{name: "non-2xx is an error", give: "/none", wantErr: "HTTP 404: no such metric"},
	}
	a := &Activities{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := MeasureInput{Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Step: 2, Measurement: 1, Max: f64(0.05),
				Web: &k8s.WebMetric{URL: srv.URL + tt.give, JSONPath: "$.data.errorRate", Timeout: k8s.Duration(time.Second)}}
			m, err := a.MeasureAnalysis(context.Background(), in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("MeasureAnalysis = %+v, %v; want an error containing %q", m, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Verdict != tt.wantVerdict || m.Value == nil || *m.Value != *tt.wantValue || !strings.Contains(m.Message, tt.wantMessage) || m.Provider != k8s.ProviderWeb {
				t.Errorf("measurement %+v, want verdict %s value %g message containing %q provider web", m, tt.wantVerdict, *tt.wantValue, tt.wantMessage)
			}
		})
	}
	// A path that leads nowhere is no data, as a query without data is.
	in := MeasureInput{Measurement: 3, Max: f64(1), Web: &k8s.WebMetric{URL: srv.URL + "/rate", JSONPath: "$.data.latency"}}
	m, err := a.MeasureAnalysis(context.Background(), in)
	if err != nil || m.Verdict != VerdictNoData || !strings.Contains(m.Message, "measurement 3: GET "+srv.URL+"/rate $.data.latency returned no data") {
		t.Errorf("missing path: %+v, %v; want NoData naming the request", m, err)
	}
}

const jobNS = "default"

var jobDeployment = DeploymentRef{Namespace: jobNS, Name: "web", UID: types.UID("uid-web")}

func jobInput(name string) JobAnalysisInput {
	return JobAnalysisInput{
		Deployment: jobDeployment, Step: 3, Hash: "abc123", Name: name,
		Job: k8s.JobMetric{Timeout: k8s.Duration(5 * time.Minute), Template: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "check", Image: "busybox"}}},
		}}},
	}
}

// finish sets the Job's condition once it exists.
func finish(t *testing.T, c *fake.Clientset, name string, typ batchv1.JobConditionType, reason string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		job, err := c.BatchV1().Jobs(jobNS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "details"})
			job.Status.Succeeded = 1
			if _, err := c.BatchV1().Jobs(jobNS).UpdateStatus(context.Background(), job, metav1.UpdateOptions{}); err != nil {
				t.Errorf("update job status: %v", err)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("job %s was never created", name)
}

func TestRunAnalysisJob(t *testing.T) {
	tests := []struct {
		name        string
		give        batchv1.JobConditionType
		reason      string
		wantVerdict string
		wantMessage string
	}{
		{name: "complete", give: batchv1.JobComplete, wantVerdict: VerdictSuccessful, wantMessage: "job web-s3 completed (1 succeeded)"},
		{name: "failed", give: batchv1.JobFailed, reason: "BackoffLimitExceeded", wantVerdict: VerdictFailed, wantMessage: "job web-s3 failed: BackoffLimitExceeded: details"},
		{name: "past its deadline", give: batchv1.JobFailed, reason: "DeadlineExceeded", wantVerdict: VerdictFailed, wantMessage: "failed: DeadlineExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset()
			a := &Activities{Client: c, JobPoll: 5 * time.Millisecond}
			go finish(t, c, "web-s3", tt.give, tt.reason)
			m, err := a.RunAnalysisJob(context.Background(), jobInput("web-s3"))
			if err != nil {
				t.Fatal(err)
			}
			if m.Verdict != tt.wantVerdict || !strings.Contains(m.Message, tt.wantMessage) || m.Job != "web-s3" || m.Provider != k8s.ProviderJob {
				t.Errorf("measurement %+v, want verdict %s, message containing %q, job web-s3", m, tt.wantVerdict, tt.wantMessage)
			}
			job, err := c.BatchV1().Jobs(jobNS).Get(context.Background(), "web-s3", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the finished job is kept for inspection: %v", err)
			}
			if got := job.Labels; got[k8s.AnalysisDeploymentLabel] != "web" || got[k8s.AnalysisStepLabel] != "3" || got["pod-template-hash"] != "abc123" {
				t.Errorf("job labels %v, want the deployment, the step and the hash", got)
			}
			if got := job.Spec.Template.Labels; got[k8s.AnalysisDeploymentLabel] != "web" {
				t.Errorf("pod template labels %v, want the deployment", got)
			}
			if len(job.OwnerReferences) != 1 || job.OwnerReferences[0].UID != jobDeployment.UID || job.OwnerReferences[0].Kind != "Deployment" {
				t.Errorf("owner references %+v, want the deployment", job.OwnerReferences)
			}
			if s := job.Spec; s.TTLSecondsAfterFinished == nil || *s.TTLSecondsAfterFinished != k8s.DefaultJobTTL ||
				s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 300 || s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("job spec: ttl %v, activeDeadlineSeconds %v, restartPolicy %q; want %d, 300, Never", s.TTLSecondsAfterFinished, s.ActiveDeadlineSeconds, s.Template.Spec.RestartPolicy, k8s.DefaultJobTTL)
			}
		})
	}
}

// A retried attempt finds the Job the first created (its name is the step's) and does not run
// another; a Job of that name that is not this step's is refused.
func TestRunAnalysisJobIdempotent(t *testing.T) {
	existing := analysisJob(jobInput("web-s3"))
	existing.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	c := fake.NewClientset(existing)
	a := &Activities{Client: c, JobPoll: 5 * time.Millisecond}
	m, err := a.RunAnalysisJob(context.Background(), jobInput("web-s3"))
	if err != nil || m.Verdict != VerdictSuccessful {
		t.Fatalf("retry: %+v, %v; want the existing job's verdict", m, err)
	}
	creates := 0
	for _, act := range c.Actions() {
		if act.GetVerb() == "create" && act.GetResource().Resource == "jobs" {
			creates++
		}
	}
	if list, _ := c.BatchV1().Jobs(jobNS).List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 || creates != 1 {
		t.Errorf("jobs %d, create calls %d; want 1 job (the create refused as AlreadyExists)", len(list.Items), creates)
	}

	other := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web-s3", Namespace: jobNS}}
	a = &Activities{Client: fake.NewClientset(other), JobPoll: 5 * time.Millisecond}
	if _, err := a.RunAnalysisJob(context.Background(), jobInput("web-s3")); !IsKind(err, ErrInvalid) || !strings.Contains(err.Error(), "is not the analysis job of step 3") {
		t.Errorf("a foreign job of that name: %v, want %s", err, ErrInvalid)
	}
	if _, err := a.RunAnalysisJob(context.Background(), JobAnalysisInput{Deployment: DeploymentRef{Namespace: jobNS, Name: "web"}, Name: "x"}); !IsKind(err, ErrInvalid) {
		t.Errorf("no UID: %v, want %s", err, ErrInvalid)
	}
}

// A canceled analysis (promoted past, aborted) deletes its Job; one deleted under it is gone.
func TestRunAnalysisJobCanceled(t *testing.T) {
	c := fake.NewClientset()
	a := &Activities{Client: c, JobPoll: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := c.BatchV1().Jobs(jobNS).Get(context.Background(), "web-s3", metav1.GetOptions{}); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := a.RunAnalysisJob(ctx, jobInput("web-s3")); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("canceled: %v, want context canceled", err)
	}
	if list, _ := c.BatchV1().Jobs(jobNS).List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("jobs after cancel: %d, want 0 (deleted)", len(list.Items))
	}
	var deleted bool
	for _, act := range c.Actions() {
		deleted = deleted || (act.GetVerb() == "delete" && act.GetResource().Resource == "jobs")
	}
	if !deleted {
		t.Errorf("no delete of the job")
	}

	c = fake.NewClientset()
	a = &Activities{Client: c, JobPoll: 5 * time.Millisecond}
	go func() {
		for {
			if err := c.BatchV1().Jobs(jobNS).Delete(context.Background(), "web-s3", metav1.DeleteOptions{}); err == nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := a.RunAnalysisJob(context.Background(), jobInput("web-s3")); !IsKind(err, ErrJobGone) {
		t.Errorf("deleted under it: %v, want %s", err, ErrJobGone)
	}
}

func TestNotify(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b))
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s, want a JSON POST", r.Method, r.Header.Get("Content-Type"))
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	n := Notification{Deployment: "web", Namespace: "default", Revision: 3, Event: k8s.NotifyAborted, Reason: "RolloutAborted",
		Message: "Rollout of revision 3 aborted: error rate > 5% & <climbing>", Step: 2, Steps: 4,
		Link: "http://localhost:8233/namespaces/default/workflows/deployment%2Fdefault%2Fweb", Time: at}
	tests := []struct {
		name    string
		format  string
		status  int
		cluster string
		want    string
		wantErr string
	}{
		{name: "json", format: k8s.NotifyFormatJSON, status: http.StatusOK,
			want: `{"deployment":"web","namespace":"default","revision":3,"event":"aborted","reason":"RolloutAborted","message":"Rollout of revision 3 aborted: error rate \u003e 5% \u0026 \u003cclimbing\u003e","step":2,"steps":4,"link":"http://localhost:8233/namespaces/default/workflows/deployment%2Fdefault%2Fweb","time":"2024-01-01T00:00:00Z"}`},
		{name: "slack", format: k8s.NotifyFormatSlack, status: http.StatusNoContent,
			want: `{"text":"*default/web* revision 3: aborted (step 2 of 4): Rollout of revision 3 aborted: error rate \u0026gt; 5% \u0026amp; \u0026lt;climbing\u0026gt; \u003chttp://localhost:8233/namespaces/default/workflows/deployment%2Fdefault%2Fweb|Temporal UI\u003e"}`},
		{name: "slack, a named cluster's", format: k8s.NotifyFormatSlack, status: http.StatusOK, cluster: "eu",
			want: `{"text":"*default/web* in cluster eu revision 3: aborted (step 2 of 4): Rollout of revision 3 aborted: error rate \u0026gt; 5% \u0026amp; \u0026lt;climbing\u0026gt; \u003chttp://localhost:8233/namespaces/default/workflows/deployment%2Fdefault%2Fweb|Temporal UI\u003e"}`},
		{name: "json, a named cluster's", format: k8s.NotifyFormatJSON, status: http.StatusOK, cluster: "eu",
			want: `{"deployment":"web","namespace":"default","cluster":"eu","revision":3,"event":"aborted","reason":"RolloutAborted","message":"Rollout of revision 3 aborted: error rate \u003e 5% \u0026 \u003cclimbing\u003e","step":2,"steps":4,"link":"http://localhost:8233/namespaces/default/workflows/deployment%2Fdefault%2Fweb","time":"2024-01-01T00:00:00Z"}`},
		{name: "5xx is retried", format: k8s.NotifyFormatJSON, status: http.StatusBadGateway, wantErr: "HTTP 502"},
		{name: "4xx is not", format: k8s.NotifyFormatJSON, status: http.StatusNotFound, wantErr: ErrWebhookRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			bodies, status = nil, tt.status
			mu.Unlock()
			give := n
			give.Cluster = tt.cluster
			err := (&Activities{}).Notify(context.Background(), NotifyInput{URL: srv.URL, Format: tt.format, Notification: give})
			switch {
			case tt.wantErr == ErrWebhookRejected:
				if !IsKind(err, ErrWebhookRejected) {
					t.Fatalf("Notify: %v, want %s", err, ErrWebhookRejected)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || IsKind(err, ErrWebhookRejected) {
					t.Fatalf("Notify: %v, want a retryable error containing %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 1 || bodies[0] != tt.want {
				t.Errorf("webhook got %q,\nwant %q", bodies, tt.want)
			}
			if !json.Valid([]byte(bodies[0])) {
				t.Errorf("payload is not JSON")
			}
		})
	}
}
