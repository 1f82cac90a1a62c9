package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Issue 44, defect 1: [setWeight 100, pause], then the rollback signal to the previous
// revision. The sync asks for no canary (the template is the stable one again), and before the
// gate the first move gave the stable Service 100% with 0 available pods. Through the gate
// the canary Service keeps the outgoing pods, which carry the traffic until the stable pods
// come back, and the weight never rises on the way back.
func TestGateRollbackSignalAtFullWeight(t *testing.T) {
	f := stepped(`[{"setWeight":100},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v1 := podTemplate("nginx:v1")
	h1 := k8s.PodTemplateHash(&v1, nil)
	lagPods(f)
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	from := -1
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Traffic != nil && st.Steps.Traffic.CanaryWeight == 100, "in the pause: %+v, want the canary at 100", st.Steps)
		from = len(route.moves)
	})
	signalAt(env, 2*time.Hour, contract.SignalRollback, map[string]int64{"revision": 1})
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if from < 0 || from >= len(route.moves) {
		t.Fatalf("no traffic move after the rollback signal (moves %d, signal at %d)", len(route.moves), from)
	}
	servedMoves(t, route.moves)
	prev := route.moves[from-1].want.Route.CanaryWeight
	for i, m := range route.moves[from:] {
		if w := m.want.Route.CanaryWeight; m.want.CanaryHash != m.want.StableHash && w > prev {
			t.Errorf("move %d after the rollback: canary weight %d rose from %d", from+i, w, prev)
		}
		prev = m.want.Route.CanaryWeight
		if m.want.CanaryHash == m.want.StableHash {
			prev = 0
		}
	}
	if last := route.state; last.StableHash != h1 || last.CanaryHash != h1 || last.Route.CanaryWeight != 0 {
		t.Errorf("after the rollback: route %+v, want both Services on %s at 0", last, h1)
	}
}

// Issue 44, defect 2: [setCanaryScale 3, pause] holds the canary at 0% with 3 pods; an abort
// gave it AbortWeight(3, 10) = 24% on its first move. The way back never raises the canary.
func TestGateAbortNeverRaisesCanary(t *testing.T) {
	for _, steps := range []string{
		`[{"setCanaryScale":{"replicas":3}},{"pause":{}}]`,
		`[{"setCanaryScale":{"replicas":3}},{"setWeight":0},{"pause":{}}]`,
		`[{"setCanaryScale":{"replicas":3}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"pause":{}}]`,
	} {
		t.Run(steps, func(t *testing.T) {
			f := stepped(steps)
			f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
			lagPods(f)
			route := &fakeRoute{f: f}
			env := newEnv(t, f)
			env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
			from := -1
			at(env, time.Hour, func() {
				st := queryStatus(t, env)
				check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote, "in the pause: %+v, want waiting for promote", st.Steps)
				check(t, f.replicasByImage()["nginx:v2"] == 3, "in the pause: replicas %v, want 3 canary pods", f.replicasByImage())
				from = len(route.moves)
			})
			var aborted updateOutcome
			updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "errors"}, &aborted)
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			if !aborted.completed || aborted.err != nil {
				t.Fatalf("abort: %+v, want completed", aborted)
			}
			assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
			servedMoves(t, route.moves)
			for i, m := range route.moves[from:] {
				if w := m.want.Route.CanaryWeight; w > 0 {
					t.Errorf("move %d after the abort: canary weight %d (asked %d), want 0: it was 0 when the abort came", from+i, w, m.asked.Route.CanaryWeight)
				}
			}
		})
	}
}

// Issue 44, defect 4: 10 replicas, maxUnavailable 25% (2), [setCanaryScale 2, setWeight 50]:
// the old ReplicaSet's share at 50% is 5, but with 2 canary pods the rolling update keeps 8
// available, so it never went below 6 and the step waited forever. The old share now keeps
// what availability needs: 2 and 6, and the step passes.
func TestGateCanaryScaleThenWeight(t *testing.T) {
	f := stepped(`[{"setCanaryScale":{"replicas":2}},{"setWeight":50},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	mu := intstr.FromString("25%")
	f.d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &mu, MaxSurge: &mu}}
	lagPods(f)
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	ran := false
	at(env, 10*time.Minute, func() {
		ran = true
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 3 && st.Steps.WaitingFor == contract.WaitingForPromote, "after 10 minutes: steps %+v, want the pause (step 3) reached", st.Steps)
		got := f.replicasByImage()
		check(t, got["nginx:v2"] == 2 && got["nginx:v1"] == 6, "after 10 minutes: replicas %v, want 2 canary and 6 stable", got)
		check(t, st.Steps != nil && st.Steps.Traffic != nil && st.Steps.Traffic.CanaryWeight == 25, "after 10 minutes: traffic %+v, want the canary at its pods' share, 25", st.Steps.Traffic)
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	if !ran {
		t.Fatalf("the run continued as new before 10 minutes: replicas %v", f.replicasByImage())
	}
	servedMoves(t, route.moves)
}

// Issue 44, defect 3: a completion the run never saw. v1 → v2 in steps with traffic; the
// instant the last v1 pod is scaled away (before any sync sees the rollout complete) the
// template moves to v3. The run still took v1 for the stable template: the v3 rollout ran
// against it, and its abort restored v1, the version two back, and scaled production (v2) to
// 0. The stable template is now read from the cluster (k8s.StableTemplate): v1 has no pod
// and v2 runs every replica, so v2 completed; the abort returns to v2.
func TestGateMissedCompletionStableTemplate(t *testing.T) {
	f := stepped(`[{"setWeight":50},{"pause":{"duration":"1m"}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v2, v3 := podTemplate("nginx:v2"), podTemplate("nginx:v3")
	h2 := k8s.PodTemplateHash(&v2, nil)
	moved := false
	f.afterWrite = func(activity string) {
		if moved || activity != "ScaleDownReplicaSet" {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		by := map[string]int32{}
		for _, rs := range f.rss {
			by[rs.Spec.Template.Spec.Containers[0].Image] = *rs.Spec.Replicas
		}
		if by["nginx:v1"] == 0 && by["nginx:v2"] == 10 && f.d.Status.Conditions != nil {
			moved = true
			f.d.Spec.Template = *v3.DeepCopy()
			f.d.Generation++
			f.d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50},{"pause":{}}]`
		}
	}
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	held := false
	at(env, time.Hour, func() {
		held = true
		st := queryStatus(t, env)
		check(t, moved, "v3 was never set")
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote, "v3 in its pause: steps %+v", st.Steps)
		got := f.replicasByImage()
		check(t, got["nginx:v2"] == 5 && got["nginx:v3"] == 5 && got["nginx:v1"] == 0, "v3 at 50%%: replicas %v, want v2 5 and v3 5 (v1 0)", got)
		if tr := st.Steps.Traffic; tr == nil || tr.Stable.Hash != h2 {
			t.Errorf("v3 at 50%%: traffic %+v, want the stable Service on v2 (%s)", tr, h2)
		}
	})
	var aborted updateOutcome
	updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "errors"}, &aborted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	if !held {
		t.Fatalf("the run ended before v3's pause: replicas %v", f.replicasByImage())
	}
	if !aborted.completed || aborted.err != nil {
		t.Fatalf("abort: %+v, want completed", aborted)
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10, "nginx:v3": 0})
	servedMoves(t, route.moves)
}

// Issue 44, defect 5: a traffic error (the route deleted, another rule on our Services) made
// every sync return before the plan's writes, so an abort never scaled the canary back. On the
// way back the Services now select every pod (ReleaseTraffic, a TrafficFallback event) and the
// plan restores the ReplicaSets.
func TestGateTrafficErrorDoesNotBlockAbort(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	route := &fakeRoute{f: f}
	broken := false
	var released []activities.ReleaseTrafficInput
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SyncTrafficInput) (activities.SyncTrafficResult, error) {
		if broken {
			return activities.SyncTrafficResult{}, temporal.NewNonRetryableApplicationError("get httproute default/web: not found", activities.ErrTraffic, nil)
		}
		return route.SyncTraffic(ctx, in)
	})
	env.OnActivity(a.ReleaseTraffic, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReleaseTrafficInput) (activities.ReleaseTrafficResult, error) {
		released = append(released, in)
		return activities.ReleaseTrafficResult{Released: in.Services}, nil
	})
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote, "in the pause: steps %+v", st.Steps)
		broken = true
	})
	var aborted updateOutcome
	updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "errors"}, &aborted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	if !aborted.completed || aborted.err != nil {
		t.Fatalf("abort: %+v, want completed", aborted)
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if len(released) == 0 || strings.Join(released[0].Services, ",") != "web-stable,web-canary" {
		t.Fatalf("ReleaseTraffic calls %+v, want the two Services to select every pod", released)
	}
	if ev := released[0].Events; len(ev) != 1 || ev[0].Reason != "TrafficFallback" {
		t.Errorf("fallback events %+v, want one TrafficFallback", ev)
	}
}

// An abort at setWeight 100 of a rollout held at rest (its wait ended Rest): the abort wakes
// it, the route returns to the stable pods as they come back, and the rollout completes on
// the stable template with its status no longer held (the soak's aborts scenario).
func TestGateAbortAtFullWeightFromRest(t *testing.T) {
	for _, rest := range []bool{false, true} {
		t.Run(fmt.Sprintf("rest=%t", rest), func(t *testing.T) {
			f := stepped(`[{"setWeight":100},{"pause":{}}]`)
			f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
			f.rest = rest
			v1 := podTemplate("nginx:v1")
			h1 := k8s.PodTemplateHash(&v1, nil)
			lagPods(f)
			route := &fakeRoute{f: f}
			env := newEnv(t, f)
			env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
			var aborted updateOutcome
			updateAt(env, time.Hour, contract.UpdateAbort, map[string]string{"reason": "soak"}, &aborted)
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			if !aborted.completed || aborted.err != nil {
				t.Fatalf("abort: %+v, want completed", aborted)
			}
			assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
			if c := k8s.GetCondition(f.d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason == k8s.CanaryPausedReason {
				t.Errorf("after the abort: Progressing %+v, want no longer held", c)
			}
			if last := route.state; last.StableHash != h1 || last.CanaryHash != h1 || last.Route.CanaryWeight != 0 {
				t.Errorf("after the abort: route %+v, want both Services on %s at 0", last, h1)
			}
			if rest && f.restAwaits == 0 {
				t.Errorf("no wait ended at rest before the abort")
			}
		})
	}
}
