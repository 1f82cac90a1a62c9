package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

const webSteps = `[{"setWeight":30},{"analysis":{"web":{"url":"http://metrics.local/api","jsonPath":"$.data.errorRate"},"max":0.05,"count":2,"interval":"1m"}},{"setWeight":60}]`

// webhook records the notifications the workflow sends; fail makes every delivery fail.
type webhook struct {
	mu   sync.Mutex
	got  []activities.NotifyInput
	fail bool
	// attempts counts every delivery attempt, failed ones too; byEvent by event.
	attempts int
	byEvent  map[string]int
}

func (w *webhook) register(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(a.Notify, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.NotifyInput) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.attempts++
		if w.byEvent == nil {
			w.byEvent = map[string]int{}
		}
		w.byEvent[in.Notification.Event]++
		if w.fail {
			return errors.New("notify: HTTP 503")
		}
		w.got = append(w.got, in)
		return nil
	})
}

func (w *webhook) events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range w.got {
		out = append(out, n.Notification.Event)
	}
	return out
}

// measurements mocks MeasureAnalysis with the verdicts given, in order, 70s each: never at the
// same instant as the fake AwaitChange's minute, whose order against it the test environment
// does not fix (the golden command sequences need one order).
func measurements(env *testsuite.TestWorkflowEnvironment, verdicts ...string) *[]activities.MeasureInput {
	var mu sync.Mutex
	var ins []activities.MeasureInput
	env.OnActivity(a.MeasureAnalysis, mock.Anything, mock.Anything).After(70 * time.Second).Return(func(_ context.Context, in activities.MeasureInput) (activities.Measurement, error) {
		mu.Lock()
		defer mu.Unlock()
		ins = append(ins, in)
		v := verdicts[min(len(ins), len(verdicts))-1]
		val := 0.01
		if v == activities.VerdictFailed {
			val = 0.3
		}
		return activities.Measurement{Provider: k8s.ProviderWeb, Value: &val, Verdict: v, Message: "measurement: " + v}, nil
	})
	return &ins
}

// A web analysis that fails aborts the rollout, returning to the stable revision; the status
// query shows the provider and the last measurement while it measures.
func TestWebAnalysisFailsAborts(t *testing.T) {
	f := stepped(webSteps)
	env := newEnv(t, f)
	ins := measurements(env, activities.VerdictFailed)
	at(env, 90*time.Second, func() {
		st := queryStatus(t, env)
		s := st.Steps
		check(t, s != nil && s.WaitingFor == contract.WaitingForAnalysis && s.Analysis != nil && s.Analysis.Provider == k8s.ProviderWeb,
			"measuring: steps %+v, want step 2 waiting for a web analysis", s)
		check(t, s != nil && strings.Contains(s.Current, "web analysis of GET http://metrics.local/api $.data.errorRate"), "current step %q", s.Current)
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if len(*ins) != 1 || (*ins)[0].Web == nil || (*ins)[0].Web.URL != "http://metrics.local/api" || (*ins)[0].Query != "" || (*ins)[0].Step != 2 {
		t.Errorf("MeasureAnalysis inputs %+v, want one web measurement of step 2", *ins)
	}
	if !f.hasEvent("AnalysisFailed") || !f.hasEvent("RolloutAborted") {
		t.Errorf("events: AnalysisFailed %t, RolloutAborted %t; want both", f.hasEvent("AnalysisFailed"), f.hasEvent("RolloutAborted"))
	}
}

// A web analysis that passes moves on to the next step, and the rollout completes.
func TestWebAnalysisPasses(t *testing.T) {
	f := stepped(webSteps)
	env := newEnv(t, f)
	ins := measurements(env, activities.VerdictSuccessful)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if len(*ins) != 2 || (*ins)[1].Measurement != 2 {
		t.Errorf("MeasureAnalysis inputs %+v, want 2 measurements", *ins)
	}
	if !f.hasEvent("AnalysisSuccessful") {
		t.Errorf("no AnalysisSuccessful event")
	}
}

// A job analysis runs RunAnalysisJob once, with a name stable for the step and run; its
// Failed verdict aborts.
func TestJobAnalysis(t *testing.T) {
	tests := []struct {
		name        string
		give        string
		wantImages  map[string]int32
		wantAborted bool
	}{
		{name: "complete", give: activities.VerdictSuccessful, wantImages: map[string]int32{"nginx:v1": 0, "nginx:v2": 10}},
		{name: "failed", give: activities.VerdictFailed, wantImages: map[string]int32{"nginx:v1": 10, "nginx:v2": 0}, wantAborted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := stepped(`[{"setWeight":30},{"analysis":{"job":{"template":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}},"timeout":"5m"}}}]`)
			env := newEnv(t, f)
			var ins []activities.JobAnalysisInput
			env.OnActivity(a.RunAnalysisJob, mock.Anything, mock.Anything).After(190 * time.Second).Return(func(_ context.Context, in activities.JobAnalysisInput) (activities.Measurement, error) {
				ins = append(ins, in)
				return activities.Measurement{Provider: k8s.ProviderJob, Job: in.Name, Verdict: tt.give, Message: "job " + in.Name + ": " + tt.give}, nil
			})
			at(env, 2*time.Minute, func() {
				st := queryStatus(t, env)
				s := st.Steps
				check(t, s != nil && s.Analysis != nil && s.Analysis.Provider == k8s.ProviderJob && strings.HasPrefix(s.Analysis.Job, testName+"-"),
					"running the job: steps %+v, want a job analysis naming its job", s)
			})
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			assertReplicas(t, f, tt.wantImages)
			if len(ins) != 1 || ins[0].Step != 2 || ins[0].Deployment.UID != testUID || time.Duration(ins[0].Job.Timeout) != 5*time.Minute ||
				!strings.HasPrefix(ins[0].Name, testName+"-") || !strings.Contains(ins[0].Name, "-s2-") {
				t.Errorf("RunAnalysisJob inputs %+v, want one for step 2 named after the deployment and step", ins)
			}
			if f.hasEvent("RolloutAborted") != tt.wantAborted {
				t.Errorf("aborted %t, want %t", f.hasEvent("RolloutAborted"), tt.wantAborted)
			}
		})
	}
}

// A Deployment with the notify annotation gets the step, analysis and abort events, each
// linking to the workflow in the Temporal UI.
func TestNotifyOnAbort(t *testing.T) {
	f := stepped(webSteps)
	f.d.Annotations[k8s.NotifyAnnotation] = `{"url":"https://hooks.example/rollouts"}`
	f.uiURL = "http://localhost:8233"
	env := newEnv(t, f)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: contract.WorkflowID(testNS, testName)})
	hook := &webhook{}
	hook.register(env)
	measurements(env, activities.VerdictFailed)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	// Each notification is its own activity: those scheduled in one workflow task (the failed
	// analysis and the abort) may be delivered in either order.
	want := []string{k8s.NotifyAborted, k8s.NotifyAnalysisFailed, k8s.NotifyStepReached, k8s.NotifyStepReached}
	got := hook.events()
	slices.Sort(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("notifications %v, want %v in any order", got, want)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	byEvent := map[string]activities.NotifyInput{}
	for _, in := range hook.got {
		byEvent[in.Notification.Event] = in
	}
	aborted := byEvent[k8s.NotifyAborted]
	n := aborted.Notification
	if aborted.URL != "https://hooks.example/rollouts" || aborted.Format != k8s.NotifyFormatJSON || n.Deployment != testName || n.Namespace != testNS ||
		n.Reason != "RolloutAborted" || !strings.Contains(n.Message, "analysis failed at step 2") ||
		!strings.HasPrefix(n.Link, "http://localhost:8233/namespaces/") || !strings.HasSuffix(n.Link, "/workflows/deployment%2Fdefault%2Fweb") {
		t.Errorf("aborted notification %+v", aborted)
	}
	if s := byEvent[k8s.NotifyAnalysisFailed].Notification; s.Step != 2 || s.Steps != 3 {
		t.Errorf("analysisFailed notification at step %d of %d, want 2 of 3", s.Step, s.Steps)
	}
}

// The events list filters; completion is sent by the next run (a notification not delivered
// when the run continues as new is carried), and a webhook that keeps failing does not hold
// the rollout up.
func TestNotifyCompleted(t *testing.T) {
	tests := []struct {
		name string
		fail bool
	}{
		{name: "delivered"},
		{name: "webhook failing", fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := stepped(`[{"setWeight":50},{"pause":{}}]`)
			f.d.Annotations[k8s.NotifyAnnotation] = `{"url":"https://hooks.example/x","format":"slack","events":["paused","promoted","completed"]}`
			env := newEnv(t, f)
			hook := &webhook{fail: tt.fail}
			hook.register(env)
			var promoted updateOutcome
			updateAt(env, time.Hour, contract.UpdatePromote, nil, &promoted)
			env.ExecuteWorkflow(contract.WorkflowType, input())
			next := continuedAsNew(t, env)
			assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
			if !promoted.completed || promoted.err != nil {
				t.Errorf("promote: %+v, want completed", promoted)
			}
			c := next.State
			wantCarried := "completed"
			if tt.fail {
				// paused gave up after its attempts (an hour before promote); promoted is
				// still being retried when the rollout completes, two minutes later.
				if got, want := hook.byEvent[k8s.NotifyPaused], int(notifyOptions.RetryPolicy.MaximumAttempts); got != want {
					t.Errorf("paused delivery attempts %d, want %d", got, want)
				}
				wantCarried = "promoted,completed"
			} else if got := hook.events(); strings.Join(got, ",") != "paused,promoted" {
				t.Errorf("notifications %v, want paused,promoted (stepReached not asked for)", got)
			}
			var carried []string
			for _, n := range c.Notifications {
				carried = append(carried, n.Notification.Event)
				if n.Format != k8s.NotifyFormatSlack {
					t.Errorf("carried %+v, want format slack", n)
				}
			}
			if strings.Join(carried, ",") != wantCarried || c.Notify == nil {
				t.Fatalf("carried notifications %v (config %+v), want %s", carried, c.Notify, wantCarried)
			}
			if n := c.Notifications[len(c.Notifications)-1].Notification; n.Revision != 2 || !strings.Contains(n.Message, "Rollout of revision 2 complete") {
				t.Errorf("completed notification %+v, want revision 2", n)
			}

			// The next run delivers it.
			env2 := newEnv(t, f)
			hook2 := &webhook{}
			hook2.register(env2)
			endByDeletion(env2, f, time.Minute)
			env2.ExecuteWorkflow(contract.WorkflowType, next)
			// Both are sent at once; they arrive in either order.
			got, want := hook2.events(), strings.Split(wantCarried, ",")
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("next run's notifications %v, want %s", got, wantCarried)
			}
		})
	}
}

// Without the annotation no Notify activity runs.
func TestNoNotifyWithoutAnnotation(t *testing.T) {
	f := stepped(webSteps)
	env := newEnv(t, f)
	hook := &webhook{}
	hook.register(env)
	measurements(env, activities.VerdictFailed)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	if hook.attempts != 0 {
		t.Errorf("notify attempts %d, want 0", hook.attempts)
	}
}

// An invalid notify annotation is warned about and sends nothing; it does not hold the rollout.
func TestInvalidNotifyAnnotation(t *testing.T) {
	f := stepped(`[{"setWeight":50}]`)
	f.d.Annotations[k8s.NotifyAnnotation] = `{"url":"hooks","events":["done"]}`
	env := newEnv(t, f)
	hook := &webhook{}
	hook.register(env)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	var warned string
	for _, ev := range f.events {
		if ev.Reason == "InvalidNotifyAnnotation" {
			warned = ev.Message
		}
	}
	if !strings.Contains(warned, `url "hooks" is not an absolute http(s) URL`) || !strings.Contains(warned, `event "done"`) {
		t.Errorf("InvalidNotifyAnnotation event %q, want every problem named", warned)
	}
	if hook.attempts != 0 {
		t.Errorf("notify attempts %d, want 0", hook.attempts)
	}
}

// Every notification of a stepped rollout names its revision, the first step's too: the
// Deployment's annotation still names the previous one when that step begins.
func TestNotifyRevision(t *testing.T) {
	f := stepped(`[{"setWeight":50},{"pause":{}}]`)
	f.d.Annotations[k8s.NotifyAnnotation] = `{"url":"https://hooks.example/x"}`
	env := newEnv(t, f)
	hook := &webhook{}
	hook.register(env)
	var promoted updateOutcome
	updateAt(env, time.Hour, contract.UpdatePromote, nil, &promoted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	var got []string
	for _, in := range hook.got {
		n := in.Notification
		got = append(got, fmt.Sprintf("%s:%d", n.Event, n.Revision))
	}
	sort.Strings(got)
	if want := "paused:2,promoted:2,stepReached:2"; strings.Join(got, ",") != want {
		t.Errorf("notifications %v, want %s in any order", got, want)
	}
}
