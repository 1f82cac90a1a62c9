package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// stepped is a 10-replica Deployment whose template moved from v1 to v2, with steps.
func stepped(steps string) *fakeCluster {
	d := newDeployment("nginx:v2", 10, "1")
	d.Generation = 2
	d.Annotations[k8s.StepsAnnotation] = steps
	return newFakeCluster(d, newReplicaSet(d, "nginx:v1", 1, 10, time.Hour))
}

// updateAt sends a Workflow Update at d and reports its outcome to got.
func updateAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, payload any, got *updateOutcome) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, name+"-"+d.String(), &testsuite.TestUpdateCallback{
			OnAccept: func() { got.accepted = true },
			OnReject: func(err error) { got.rejected = err },
			OnComplete: func(v any, err error) {
				got.completed, got.err = true, err
				if st, ok := v.(contract.Status); ok {
					got.status = st
				}
			},
		}, payload)
	}, d)
}

type updateOutcome struct {
	accepted, completed bool
	rejected, err       error
	status              contract.Status
}

// A stepped rollout: each setWeight caps the new ReplicaSet, the timed pause waits on a
// durable timer, the untimed one for promote, which returns the resulting state; then 100%.
func TestSteppedRollout(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{"duration":"1h"}},{"setWeight":60},{"pause":{}}]`)
	env := newEnv(t, f)
	var early, promoted updateOutcome
	at(env, 30*time.Minute, func() {
		assertReplicasNow(t, f, "in the timed pause", map[string]int32{"nginx:v1": 7, "nginx:v2": 3})
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 2 && st.Steps.WaitingFor == contract.WaitingForTimer && st.Steps.PauseUntil != nil,
			"in the timed pause: steps %+v, want step 2 waiting for the timer", st.Steps)
		c := k8s.GetCondition(f.d.Status, appsv1.DeploymentProgressing)
		check(t, c != nil && c.Reason == k8s.CanaryPausedReason && strings.Contains(c.Message, "Step 2 of 4 (pause 1h0m0s): paused until"),
			"in the timed pause: Progressing %+v, want CanaryPaused naming the step", c)
	})
	// While the timed pause runs, promote {} is fine; but test the rejection at a setWeight
	// step elsewhere. Here: wait for the untimed pause.
	updateAt(env, 90*time.Minute, contract.UpdatePromote, json.RawMessage(`{"fast":true}`), &early)
	at(env, 2*time.Hour, func() {
		assertReplicasNow(t, f, "in the untimed pause", map[string]int32{"nginx:v1": 4, "nginx:v2": 6})
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 4 && st.Steps.WaitingFor == contract.WaitingForPromote,
			"in the untimed pause: steps %+v, want step 4 waiting for promote", st.Steps)
	})
	updateAt(env, 3*time.Hour, contract.UpdatePromote, nil, &promoted)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	next := continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if early.rejected == nil || !strings.Contains(early.rejected.Error(), `unknown field "fast"`) {
		t.Errorf("promote with a malformed payload: rejected with %v, want an error naming the field", early.rejected)
	}
	if !promoted.accepted || !promoted.completed || promoted.err != nil {
		t.Errorf("promote: %+v, want accepted and completed", promoted)
	}
	if s := promoted.status.Steps; s == nil || s.Step != 5 || s.WaitingFor != "" {
		t.Errorf("promote returned steps %+v, want past the last step", s)
	}
	for _, reason := range []string{"RolloutStepsStarted", "RolloutStep", "RolloutStepReached", "RolloutPromoted", "RolloutStepsPassed"} {
		if !f.hasEvent(reason) {
			t.Errorf("no %s event", reason)
		}
	}
	if next.State.Steps != nil || next.State.StableHash == "" {
		t.Errorf("carry after completion: steps %+v, stable %q; want no steps and the new stable template", next.State.Steps, next.State.StableHash)
	}
	// Past the last step the rollout goes to 100% with no canary request; its moves are the
	// wait's (change inline-annotated-moves), flagged InlineAnnotated; a wait within a step is
	// flagged InlineCanary instead.
	var annotated, canary int
	for _, in := range f.awaits {
		switch {
		case in.InlineAnnotated && in.Request.Canary == nil && in.Inline && !in.InlineCanary:
			annotated++
		case in.InlineAnnotated:
			t.Errorf("a wait with a canary request %+v is flagged InlineAnnotated", in.Request.Canary)
		case in.InlineCanary:
			canary++
		}
	}
	if annotated == 0 || canary == 0 {
		t.Errorf("waits flagged InlineAnnotated %d, InlineCanary %d; want both", annotated, canary)
	}
}

// Abort at a pause returns to the stable revision at full speed, and the outcome says so.
func TestAbortSteppedRollout(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}},{"setWeight":60}]`)
	env := newEnv(t, f)
	var early, aborted, again updateOutcome
	updateAt(env, 0, contract.UpdateAbort, json.RawMessage(`"now"`), &early)
	updateAt(env, time.Hour, contract.UpdateAbort, map[string]string{"reason": "error rate"}, &aborted)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if early.rejected == nil {
		t.Errorf("abort with a string payload: accepted, want rejected")
	}
	if !aborted.completed || aborted.err != nil || !strings.Contains(aborted.status.AbortReason, "aborted by user: error rate") {
		t.Errorf("abort: %+v, want completed with the reason", aborted)
	}
	if !f.hasEvent("RolloutAborted") || f.callCount("RollbackDeployment") != 1 {
		t.Errorf("abort: RolloutAborted event %t, rollbacks %d; want the event and one rollback", f.hasEvent("RolloutAborted"), f.callCount("RollbackDeployment"))
	}
	if got := f.image(); got != "nginx:v1" {
		t.Errorf("template image after abort = %s, want nginx:v1 (restored, as kubectl rollout undo)", got)
	}
	_ = again
}

// Promote and abort are rejected when there is nothing to promote or abort.
func TestUpdatesRejected(t *testing.T) {
	// A Deployment at rest on its stable template.
	f := steady()
	f.d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":30},{"pause":{}}]`
	env := newEnv(t, f)
	var promote, abort updateOutcome
	updateAt(env, time.Second, contract.UpdatePromote, nil, &promote)
	updateAt(env, 2*time.Second, contract.UpdateAbort, nil, &abort)
	endByDeletion(env, f, time.Minute)
	tmpl := podTemplate("nginx:v1")
	env.ExecuteWorkflow(contract.WorkflowType, Input{Input: contract.Input{Namespace: testNS, Name: testName}, State: &State{Idle: true, StableHash: k8s.PodTemplateHash(&tmpl, nil)}})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if promote.rejected == nil || !strings.Contains(promote.rejected.Error(), "no stepped rollout is in progress") {
		t.Errorf("promote at rest: rejected with %v, want 'no stepped rollout is in progress'", promote.rejected)
	}
	if abort.rejected == nil || !strings.Contains(abort.rejected.Error(), "nothing to abort") {
		t.Errorf("abort at rest: rejected with %v, want 'nothing to abort'", abort.rejected)
	}
}

// An invalid steps annotation gets a Warning event naming the problem, and the Deployment is
// left as it is (no new ReplicaSet) until it is fixed.
func TestInvalidStepsAnnotation(t *testing.T) {
	f := stepped(`[{"setWeight":130}]`)
	env := newEnv(t, f)
	at(env, 10*time.Minute, func() {
		check(t, f.numReplicaSets() == 1, "invalid steps: %d ReplicaSets, want 1 (left as it is)", f.numReplicaSets())
		st := queryStatus(t, env)
		check(t, strings.Contains(st.AnnotationError, "setWeight 130 is not between 0 and 100"), "status annotationError %q", st.AnnotationError)
		f.mu.Lock()
		f.d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50}]`
		f.mu.Unlock()
		env.SignalWorkflow(contract.SignalTrigger, nil)
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	if !f.hasEvent("InvalidRolloutAnnotation") {
		t.Errorf("no InvalidRolloutAnnotation event")
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
}

func assertReplicasNow(t *testing.T, f *fakeCluster, when string, want map[string]int32) {
	t.Helper()
	got := f.replicasByImage()
	for k, v := range want {
		check(t, got[k] == v, "%s: replicas by image %v, want %v", when, got, want)
	}
}

// 1 replica at setWeight 20 covered every replica and ended the steps as Complete, refusing
// promote. Now the canary pod runs beside the stable one (maxSurge 25% of 1 is 1), the pause
// holds, not Complete, until promote; then 100%.
func TestSteppedRolloutOneReplica(t *testing.T) {
	d := newDeployment("nginx:v2", 1, "1")
	d.Generation = 2
	d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":20},{"pause":{}}]`
	f := newFakeCluster(d, newReplicaSet(d, "nginx:v1", 1, 1, time.Hour))
	env := newEnv(t, f)
	var promoted updateOutcome
	at(env, time.Hour, func() {
		assertReplicasNow(t, f, "in the pause", map[string]int32{"nginx:v1": 1, "nginx:v2": 1})
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 2 && st.Steps.WaitingFor == contract.WaitingForPromote,
			"in the pause: steps %+v, want step 2 waiting for promote", st.Steps)
		check(t, st.Phase != string(k8s.PhaseComplete), "in the pause: phase %s, want not Complete", st.Phase)
	})
	updateAt(env, 2*time.Hour, contract.UpdatePromote, nil, &promoted)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 1})
	if !promoted.accepted || !promoted.completed || promoted.err != nil {
		t.Errorf("promote: %+v, want accepted and completed", promoted)
	}
}

// A run continued as new in a timed pause records the step's events before its first sync:
// the carried UID names the Deployment (issue 23, defect 4). Before, the UID was not carried,
// and RolloutStepReached went unrecorded when the timer fired before the new run's first sync.
func TestContinuedRunRecordsStepEvents(t *testing.T) {
	const steps = `[{"setWeight":30},{"pause":{"duration":"10m"}}]`
	f := stepped(steps)
	f.d.Annotations[k8s.RevisionAnnotation] = "2"
	f.rss[0].Spec.Replicas = int32p(7)
	f.rss = append(f.rss, newReplicaSet(f.d, "nginx:v2", 2, 3, time.Minute))
	list, err := k8s.ParseSteps(f.d.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := podTemplate("nginx:v1"), podTemplate("nginx:v2")
	env := newEnv(t, f)
	env.SetStartTime(baseTime)
	until := baseTime.Add(5 * time.Minute)
	in := input()
	in.State = &State{
		Idle: true, UID: testUID, StableHash: k8s.PodTemplateHash(&v1, nil), StepList: list,
		Steps: &stepsState{Hash: k8s.PodTemplateHash(&v2, nil), Revision: 2, Step: 1, PhaseWait: PhaseWait{WaitingFor: contract.WaitingForTimer}, PauseUntil: &until},
	}
	env.ExecuteWorkflow(contract.WorkflowType, in)
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	var reached bool
	for _, ev := range f.events {
		reached = reached || (ev.Reason == "RolloutStepReached" && strings.Contains(ev.Message, "Step 2 of 2"))
	}
	if !reached {
		t.Errorf("events %+v: want RolloutStepReached for step 2 of 2, recorded when the carried timer fired", f.events)
	}
	if f.callCount("Observe") == 0 {
		t.Errorf("no sync after the timer")
	}
}

// A rollout held at rest waits with no activity (no AwaitChange, no heartbeats) until a signal
// or an update moves it; a rollout moving, or held while the cluster is not at rest, waits in
// AwaitChange as before (issue 47).
func TestHeldAtRestWaitsWithoutActivity(t *testing.T) {
	for _, rest := range []bool{true, false} {
		t.Run(map[bool]string{true: "at rest", false: "not at rest"}[rest], func(t *testing.T) {
			f := stepped(`[{"setWeight":30},{"pause":{}}]`)
			f.rest = rest
			env := newEnv(t, f)
			var n30, n2h, n3h, restAt2h, checks2h, checks3h int
			var promoted updateOutcome
			ran := false
			at(env, 30*time.Minute, func() {
				st := queryStatus(t, env)
				check(t, st.Steps != nil && st.Steps.Step == 2 && st.Steps.WaitingFor == contract.WaitingForPromote,
					"at 30m: steps %+v, want step 2 waiting for promote", st.Steps)
				n30 = f.callCount("AwaitChange")
			})
			at(env, 100*time.Minute, func() {
				n2h, restAt2h, checks2h = f.callCount("AwaitChange"), f.restAwaits, f.callCount("RestCheck")
				env.SignalWorkflow(contract.SignalTrigger, nil) // the watcher: a pod of the held rollout died
			})
			at(env, 110*time.Minute, func() {
				n3h, checks3h = f.callCount("AwaitChange"), f.callCount("RestCheck")
				ran = true
			})
			updateAt(env, 150*time.Minute, contract.UpdatePromote, nil, &promoted)
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			if !ran {
				t.Fatal("the run ended before 110m")
			}
			assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
			if !promoted.completed || promoted.err != nil {
				t.Errorf("promote: %+v, want completed", promoted)
			}
			if rest {
				// Held from the first minutes: the look from the sync's workflow task found it
				// at rest (rest-checked-locally), and no AwaitChange activity ran for the next
				// 70 minutes; the trigger made one sync, whose look found it at rest again,
				// and started no activity either.
				if n2h != n30 || restAt2h < 1 || n3h != n2h || checks3h != checks2h+1 {
					t.Errorf("AwaitChange activities: %d at 30m, %d at 100m (%d looks at rest), %d at 110m; looks %d at 100m, %d at 110m; want no activity from 30m on and one look after the trigger", n30, n2h, restAt2h, n3h, checks2h, checks3h)
				}
			} else if n2h-n30 < 60 {
				t.Errorf("without the watcher: %d AwaitChange activities between 30m and 100m, want one a minute (the fake's wait)", n2h-n30)
			}
		})
	}
}
