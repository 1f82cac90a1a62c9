package workflows

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

const testTraffic = `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`

// trafficMove is one SyncTraffic call as the fake cluster saw it: the weight asked for, the
// pods then available on each template, and its place among the activity calls.
type trafficMove struct {
	// want: the route written (through the gate); asked: what the workflow asked.
	want, asked k8s.TrafficState
	// from: the route before the call.
	from                  k8s.TrafficState
	hold                  string
	canaryAvail, stableAv int32
	// after: the available pods once the sync's plan has run, as the workflow weighed them.
	after map[string]int32
	abort bool
	at    int
}

// fakeRoute plays the HTTPRoute and the Services for the fake cluster.
type fakeRoute struct {
	f     *fakeCluster
	state k8s.TrafficState
	moves []trafficMove
	// fence: the wait fence on the route (SyncTrafficInput.Fence); fences: each call's.
	fence  int64
	fences []int64
}

func (r *fakeRoute) SyncTraffic(_ context.Context, in activities.SyncTrafficInput) (_ activities.SyncTrafficResult, err error) {
	f := r.f
	f.mu.Lock()
	defer f.done("SyncTraffic", true, &err)
	// The gate, as the activity runs it: on the fake cluster's ReplicaSets as they are now.
	avail := k8s.AvailablePods(f.rss)
	sizes := map[string]int32{}
	for _, rs := range f.rss {
		h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		sizes[h] += *rs.Spec.Replicas
		if v, ok := in.SizesAfter[h]; ok {
			sizes[h] = min(sizes[h], v)
		}
	}
	g := k8s.GateTraffic(in.Spec, k8s.GateInput{Cur: r.state, Want: in.Want, Available: avail, Sizes: sizes, Returning: in.Abort, Handover: in.Handover})
	written := g.Want
	after := map[string]int32{}
	for h := range avail {
		after[h] = k8s.Serving(h, avail, sizes)
	}
	r.moves = append(r.moves, trafficMove{want: written, asked: in.Want, from: r.state, canaryAvail: avail[written.CanaryHash], stableAv: avail[written.StableHash],
		after: after, abort: in.Abort, at: len(f.order), hold: g.Hold})
	r.fences = append(r.fences, in.Fence)
	if in.FenceCheck && in.Fence != r.fence {
		return activities.SyncTrafficResult{Fence: r.fence}, temporal.NewNonRetryableApplicationError("fenced", activities.ErrFenced, nil)
	}
	r.fence = max(r.fence, in.Fence)
	res := activities.SyncTrafficResult{Before: r.state, After: written, Hold: g.Hold, Fence: r.fence}
	r.state = written
	stable := k8s.Backend{Service: in.Spec.StableService, Hash: written.StableHash, Weight: 100 - written.Route.CanaryWeight, Available: avail[written.StableHash]}
	canary := k8s.Backend{Service: in.Spec.CanaryService, Hash: written.CanaryHash, Weight: written.Route.CanaryWeight, Available: avail[written.CanaryHash]}
	res.Stable, res.Canary = stable, canary
	res.Check = k8s.CheckServing(in.Spec, written, avail, sizes)
	f.events = append(f.events, in.Events...)
	return res, nil
}

// A setWeight step raises the route's canary weight only once the canary pods are available
// (they come up between syncs here), the status shows the weights and the header route, and
// an abort moves the traffic back to the stable Service as its pods come back, never leaving a
// weight on a side without pods.
func TestTrafficRouting(t *testing.T) {
	f := stepped(`[{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v1, v2 := podTemplate("nginx:v1"), podTemplate("nginx:v2")
	h1, h2 := k8s.PodTemplateHash(&v1, nil), k8s.PodTemplateHash(&v2, nil)
	// New canary pods are not available until the next wait: the ReplicaSet controller and
	// the kubelet take a while.
	lagging := map[string]int32{}
	f.afterWrite = func(activity string) {
		if activity != "ScaleUpReplicaSet" && activity != "CreateReplicaSet" {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			if h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h == h2 {
				if prev, ok := lagging[h]; ok || activity == "CreateReplicaSet" {
					rs.Status.AvailableReplicas = min(prev, rs.Status.AvailableReplicas)
				}
			}
		}
	}
	f.beforeAwait = func() {
		for _, rs := range f.rss {
			settle(rs)
			lagging[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = rs.Status.AvailableReplicas
		}
	}
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	var aborted updateOutcome
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		tr := st.Steps.Traffic
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote, "in the pause: steps %+v, want waiting for promote", st.Steps)
		check(t, tr != nil && tr.CanaryWeight == 30 && tr.StableWeight == 70 && tr.Check == "holds" && len(tr.HeaderRoutes) == 1 && tr.HeaderRoutes[0].Name == "testers",
			"in the pause: traffic %+v, want 70/30, the testers header route, and the invariant holding", tr)
		check(t, tr != nil && tr.Canary.Hash == h2 && tr.Stable.Hash == h1, "in the pause: traffic %+v, want canary on %s and stable on %s", tr, h2, h1)
	})
	updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "errors"}, &aborted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if !aborted.completed || aborted.err != nil {
		t.Fatalf("abort: %+v, want completed", aborted)
	}

	// Every move kept the canary within its share of available pods, as the cluster had them.
	raisedAt, sawHeld := -1, false
	for i, m := range route.moves {
		w := m.want.Route.CanaryWeight
		if m.want.CanaryHash != m.want.StableHash && int64(w)*int64(m.canaryAvail+m.stableAv) > 100*int64(m.canaryAvail) {
			t.Errorf("move %d: canary weight %d on %d of %d available pods", i, w, m.canaryAvail, m.canaryAvail+m.stableAv)
		}
		// The canary Service on the new template at 0 while it has no available pod (later
		// syncs with nothing to move run no SyncTraffic: traffic-unchanged).
		if w == 0 && m.want.CanaryHash == h2 && raisedAt < 0 && m.canaryAvail == 0 {
			sawHeld = true
		}
		if w > 0 && m.canaryAvail == 0 {
			t.Errorf("move %d: canary weight %d with no canary pod available", i, w)
		}
		if w == 30 && raisedAt < 0 {
			raisedAt = i
		}
	}
	if raisedAt < 0 || !sawHeld {
		t.Errorf("moves %+v: want the weight held at 0 while the canary pods were not available, then 30", route.moves)
	}
	// Abort: every move has available pods behind each weight, before and after its sync's
	// writes, and the canary's weight goes as its pods go.
	servedMoves(t, route.moves[raisedAt:])
	if last := route.state; last.StableHash != h1 || last.CanaryHash != h1 || last.Route.CanaryWeight != 0 || len(last.Route.HeaderRoutes) > 0 {
		t.Errorf("after abort: route %+v, want both Services on %s, weight 0, no header route", last, h1)
	}
	if !f.hasEvent("TrafficShifted") {
		t.Errorf("no TrafficShifted event")
	}
	for _, ev := range f.events {
		if ev.Reason == "TrafficInvariant" {
			t.Errorf("event %+v: the invariant broke", ev)
		}
	}
}

// Without the traffic annotation, setHeaderRoute is an invalid step: the rollout is held.
func TestTrafficStepNeedsAnnotation(t *testing.T) {
	f := stepped(`[{"setCanaryScale":{"replicas":1}},{"setWeight":30}]`)
	env := newEnv(t, f)
	at(env, 10*time.Minute, func() {
		st := queryStatus(t, env)
		check(t, strings.Contains(st.AnnotationError, "needs the temporal-rollout.io/traffic annotation"), "annotationError %q", st.AnnotationError)
		check(t, f.numReplicaSets() == 1, "%d ReplicaSets, want 1 (left as it is)", f.numReplicaSets())
	})
	endByDeletion(env, f, time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if !f.hasEvent("InvalidRolloutAnnotation") {
		t.Errorf("no InvalidRolloutAnnotation event")
	}
}

// A full promote scales the stable ReplicaSet down while the canary grows, and the stable's
// going pods keep serving until its status drops them (the ReplicaSet controller deletes them
// after the write). The canary's weight is weighed against those pods too: a stable
// ReplicaSet at 2 with 3 pods up beside 7 canary pods keeps the canary at 70, not 77 (a
// breach TestTrafficDataPlane caught on the real stack).
func TestTrafficStableGoingPods(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v1 := podTemplate("nginx:v1")
	h1 := k8s.PodTemplateHash(&v1, nil)
	// up: the stable pods still serving after a scale-down, until one wait has passed.
	up, lagged, lags := int32(-1), false, 0
	f.afterWrite = func(activity string) {
		if activity != "ScaleDownReplicaSet" {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h1 && up > rs.Status.AvailableReplicas {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = up, up
				lagged = true
				lags++
			}
		}
	}
	f.beforeAwait = func() {
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h1 && lagged {
				lagged = false
				continue
			}
			settle(rs)
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h1 {
				up = rs.Status.AvailableReplicas
			}
		}
	}
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	var promoted updateOutcome
	updateAt(env, time.Hour, contract.UpdatePromote, contract.PromoteRequest{Full: true}, &promoted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if !promoted.completed || promoted.err != nil {
		t.Fatalf("promote: %+v, want completed", promoted)
	}
	if lags == 0 {
		t.Fatalf("no scale-down of the stable ReplicaSet left pods up")
	}
	for i, m := range route.moves {
		w := m.want.Route.CanaryWeight
		// 100: the handover (the stable's last pods go in the sync; TrafficHandover).
		if m.want.CanaryHash == m.want.StableHash || w == 100 {
			continue
		}
		if int64(w)*int64(m.canaryAvail+m.stableAv) > 100*int64(m.canaryAvail) {
			t.Errorf("move %d: canary weight %d on %d of %d pods up (%d stable)", i, w, m.canaryAvail, m.canaryAvail+m.stableAv, m.stableAv)
		}
	}
}

// servedMoves checks that every traffic move had available pods behind each weight: before the
// sync's writes (the fake cluster's pods) and after them (what the workflow weighed).
func servedMoves(t *testing.T, moves []trafficMove) {
	t.Helper()
	for i, m := range moves {
		if m.want.CanaryHash == m.want.StableHash {
			// Both Services on one template: all traffic goes to its pods, which must serve
			// unless no pod serves anywhere.
			any := false
			for _, n := range m.after {
				any = any || n > 0
			}
			if any && (m.stableAv <= 0 || m.after[m.want.StableHash] <= 0) {
				t.Errorf("move %d (%+v): both Services on %s with %d pods available before the writes, %d after", i, m.want, m.want.StableHash, m.stableAv, m.after[m.want.StableHash])
			}
			continue
		}
		w := m.want.Route.CanaryWeight
		for _, side := range []struct {
			name          string
			weight        int32
			before, after int32
		}{
			{"canary", w, m.canaryAvail, m.after[m.want.CanaryHash]},
			{"stable", 100 - w, m.stableAv, m.after[m.want.StableHash]},
		} {
			if side.weight > 0 && (side.before <= 0 || (m.after != nil && side.after <= 0)) {
				t.Errorf("move %d (%+v): %s has weight %d with %d pods available before the writes, %d after",
					i, m.want, side.name, side.weight, side.before, side.after)
			}
		}
	}
}

// lagPods makes new pods of every ReplicaSet unavailable until the next wait (the ReplicaSet
// controller and the kubelet take a while); pods going are gone at once.
func lagPods(f *fakeCluster) {
	lagging := map[string]int32{}
	f.afterWrite = func(activity string) {
		if activity != "ScaleUpReplicaSet" && activity != "CreateReplicaSet" && activity != "ScaleDownReplicaSet" {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			if prev, ok := lagging[h]; ok || activity == "CreateReplicaSet" {
				rs.Status.AvailableReplicas = min(prev, rs.Status.AvailableReplicas, *rs.Spec.Replicas)
				rs.Status.ReadyReplicas = rs.Status.AvailableReplicas
			}
		}
	}
	f.beforeAwait = func() {
		for _, rs := range f.rss {
			settle(rs)
			lagging[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = rs.Status.AvailableReplicas
		}
	}
}

// An abort at setWeight 100 (the stable ReplicaSet at 0, every pod the canary's) moves the
// traffic back as the stable pods come back: the canary keeps what the stable pods cannot take
// yet, and no move leaves a weight on a side with no available pod. Before, the route went
// 100/0 to the stable Service at once, with no pod behind it.
func TestTrafficAbortFollowsStablePods(t *testing.T) {
	f := stepped(`[{"setWeight":100},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v1, v2 := podTemplate("nginx:v1"), podTemplate("nginx:v2")
	h1, h2 := k8s.PodTemplateHash(&v1, nil), k8s.PodTemplateHash(&v2, nil)
	lagPods(f)
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	abortAt := -1
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote, "in the pause: steps %+v, want waiting for promote", st.Steps)
		check(t, st.Steps.Traffic != nil && st.Steps.Traffic.CanaryWeight == 100, "in the pause: traffic %+v, want the canary at 100", st.Steps.Traffic)
		abortAt = len(route.moves)
	})
	var aborted updateOutcome
	updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "errors"}, &aborted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if !aborted.completed || aborted.err != nil {
		t.Fatalf("abort: %+v, want completed", aborted)
	}
	if abortAt < 0 || abortAt >= len(route.moves) {
		t.Fatalf("no traffic move after the abort (moves %d, abort at %d)", len(route.moves), abortAt)
	}
	servedMoves(t, route.moves)
	// The weight came back in steps: at least one move split the traffic between the two.
	split := false
	for _, m := range route.moves[abortAt:] {
		if w := m.want.Route.CanaryWeight; m.abort && w > 0 && w < 100 {
			split = true
		}
	}
	if !split {
		t.Errorf("abort moves %+v: want the traffic back in steps (a move between 0 and 100)", route.moves[abortAt:])
	}
	if last := route.state; last.StableHash != h1 || last.CanaryHash != h1 || last.Route.CanaryWeight != 0 {
		t.Errorf("after abort: route %+v, want both Services on %s (not %s), weight 0", last, h1, h2)
	}
}

// setCanaryScale passes once the canary has its pods available, and a header route goes only
// to a canary with available pods: [setCanaryScale 2, setHeaderRoute, pause 10m] starts the
// pause's timer only after both. Before, both steps passed at once: the timer ran and the
// header rule was written before the canary ReplicaSet had a pod.
func TestTrafficStepsWaitForCanaryPods(t *testing.T) {
	f := stepped(`[{"setCanaryScale":{"replicas":2}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"pause":{"duration":"10m"}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	lagPods(f)
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	var started time.Time
	at(env, 30*time.Second, func() {
		st := queryStatus(t, env)
		started = env.Now().Add(-30 * time.Second)
		check(t, st.Steps != nil && st.Steps.Step == 1 && st.Steps.WaitingFor == contract.WaitingForWeight,
			"before the canary's pods are available: steps %+v, want step 1 waiting for them", st.Steps)
		check(t, st.Steps == nil || st.Steps.PauseUntil == nil, "before the canary's pods: the pause's timer started (%v)", st.Steps.PauseUntil)
	})
	var pausedAt time.Time
	at(env, 5*time.Minute, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForTimer && st.Steps.PauseUntil != nil,
			"once the canary's pods are available: steps %+v, want the pause's timer", st.Steps)
		if st.Steps != nil && st.Steps.PauseUntil != nil {
			pausedAt = st.Steps.PauseUntil.Add(-10 * time.Minute)
		}
		tr := st.Steps.Traffic
		check(t, tr != nil && len(tr.HeaderRoutes) == 1 && tr.Canary.Available == 2, "in the pause: traffic %+v, want the header route on 2 canary pods", tr)
	})
	endByDeletion(env, f, time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if pausedAt.IsZero() || pausedAt.Before(started.Add(time.Minute)) {
		t.Errorf("the pause's timer started at %v (workflow start %v); want after the canary's pods came up (a wait later)", pausedAt, started)
	}
	headers := 0
	for i, m := range route.moves {
		if len(m.want.Route.HeaderRoutes) == 0 {
			continue
		}
		headers++
		if m.canaryAvail <= 0 || (m.after != nil && m.after[m.want.CanaryHash] <= 0) {
			t.Errorf("move %d: header routes %v to a canary with %d available pods (%d after)", i, m.want.Route.HeaderRoutes, m.canaryAvail, m.after[m.want.CanaryHash])
		}
	}
	if headers == 0 {
		t.Errorf("no move wrote the header route")
	}
}

// A setWeight step passes only once the route carries its weight: 10 replicas, maxSurge 2,
// maxUnavailable 1, [setWeight 20, pause 3s, setWeight 50, pause {}], the stable's pods going
// only after a wait once scaled down (they serve until then, k8s.PodsUp). Every wait of the
// indefinite pause starts with the route at 50. Before, the step passed when the ReplicaSets
// were at their sizes, with the route still weighing the stable's going pods (41 on the real
// stack), and the pause held it there.
func TestTrafficStepPassesAtItsWeight(t *testing.T) {
	f := stepped(`[{"setWeight":20},{"pause":{"duration":"3s"}},{"setWeight":50},{"pause":{}}]`)
	surge, unavailable := intstr.FromInt32(2), intstr.FromInt32(1)
	f.d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v1 := podTemplate("nginx:v1")
	h1 := k8s.PodTemplateHash(&v1, nil)
	up := int32(-1)
	f.afterWrite = func(activity string) {
		if activity != "ScaleDownReplicaSet" {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h1 && up > rs.Status.AvailableReplicas {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = up, up
			}
		}
	}
	route := &fakeRoute{f: f}
	var atAwait []int32
	f.beforeAwait = func() {
		atAwait = append(atAwait, route.state.Route.CanaryWeight)
		for _, rs := range f.rss {
			settle(rs)
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h1 {
				up = rs.Status.AvailableReplicas
			}
		}
	}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 4 && st.Steps.WaitingFor == contract.WaitingForPromote, "steps %+v, want waiting for promote at step 4", st.Steps)
		check(t, st.Steps.Traffic != nil && st.Steps.Traffic.CanaryWeight == 50, "in the pause: traffic %+v, want the canary at 50", st.Steps.Traffic)
	})
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	held := 0
	for i, in := range f.awaits {
		if c := in.Request.Canary; c != nil && c.Hold && strings.Contains(c.Message, "paused until promoted") {
			held++
			if atAwait[i] != 50 {
				t.Errorf("wait %d of the indefinite pause began with the route at %d, want 50", i, atAwait[i])
			}
		}
	}
	if held == 0 {
		t.Fatalf("no wait in the indefinite pause")
	}
}

// A Deployment that loses its traffic annotation mid-rollout gets its Services' selectors back
// as the user wrote them (activities.ReleaseTraffic), once, and the status forgets the route.
// Before, the Services stayed on the pod-template-hashes the routing last set.
func TestTrafficAnnotationRemovedReleasesServices(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	route := &fakeRoute{f: f}
	var released []activities.ReleaseTrafficInput
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	env.OnActivity(a.ReleaseTraffic, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReleaseTrafficInput) (activities.ReleaseTrafficResult, error) {
		released = append(released, in)
		return activities.ReleaseTrafficResult{Released: in.Services}, nil
	})
	at(env, time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Traffic != nil && st.Steps.Traffic.CanaryWeight == 30, "in the pause: steps %+v, want routed at 30", st.Steps)
		f.mu.Lock()
		delete(f.d.Annotations, k8s.TrafficAnnotation)
		f.d.Generation++
		f.mu.Unlock()
		env.SignalWorkflow(contract.SignalTrigger, nil)
	})
	at(env, 2*time.Hour, func() {
		st := queryStatus(t, env)
		check(t, st.Steps == nil || st.Steps.Traffic == nil, "after the annotation went: traffic %+v, want none", st.Steps)
	})
	endByDeletion(env, f, 3*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if len(released) != 1 || strings.Join(released[0].Services, ",") != "web-stable,web-canary" {
		t.Fatalf("ReleaseTraffic calls %+v, want one for web-stable and web-canary", released)
	}
	if !f.hasEvent("TrafficReleased") && len(released[0].Events) == 0 {
		t.Errorf("no TrafficReleased event")
	}
}

// A rollout held at a pause keeps following its pods: its wait weighs the route with the
// workflow's traffic input (AwaitInput.Traffic, as the real wait does) and wakes the workflow
// when a canary pod dies; the sync then lowers the canary's weight to what its pods serve.
// While the pods stay as they are, the wait wakes it for nothing.
func TestTrafficHeldFollowsPods(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	f.weighTraffic = true
	v2 := podTemplate("nginx:v2")
	h2 := k8s.PodTemplateHash(&v2, nil)
	route := &fakeRoute{f: f}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	var wakes30m, wakesHeld int
	var weightHeld int32
	ran := false
	at(env, 30*time.Minute, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		wakes30m = f.trafficWakes
	})
	at(env, time.Hour, func() {
		f.mu.Lock()
		wakesHeld, weightHeld = f.trafficWakes, route.state.Route.CanaryWeight
		// Two of the canary's three pods die.
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h2 {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 1, 1
			}
		}
		f.mu.Unlock()
	})
	var weightAfter int32
	at(env, time.Hour+10*time.Minute, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		weightAfter, ran = route.state.Route.CanaryWeight, true
	})
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if !ran {
		t.Fatal("the run ended before 1h10m")
	}
	if weightHeld != 30 || wakesHeld != wakes30m {
		t.Errorf("held at the pause: canary weight %d, %d waits woke for the route between 30m and 1h; want 30 and none", weightHeld, wakesHeld-wakes30m)
	}
	if f.trafficWakes <= wakesHeld {
		t.Errorf("no wait woke for the route after the canary pods died")
	}
	// 1 canary pod and 7 stable ones: the canary serves 1 of 8.
	if weightAfter >= 30 || weightAfter <= 0 {
		t.Errorf("after two canary pods died: canary weight %d, want it lowered to what its one pod serves", weightAfter)
	}
	servedMoves(t, route.moves)
}

// TestTrafficWaitMovesRecorded (change inline-traffic-moves): a routed rollout's wait is given
// what it needs to move the route itself (AwaitInput.InlineTraffic), and the route it leaves
// is the workflow's: the sync after it records it and, the route being as it wants, runs no
// SyncTraffic of its own; the step passes at its weight and the status shows it.
func TestTrafficWaitMovesRecorded(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	route := &fakeRoute{f: f}
	var waitMoves []int // indexes in route.moves of the moves the wait made
	f.inlineRoute = func(in activities.AwaitInput) *activities.SyncTrafficResult {
		// The pods come up while the wait runs; it weighs the route as the real wait does and
		// moves it through the gate (the fake's SyncTraffic).
		f.mu.Lock()
		for _, rs := range f.rss {
			settle(rs)
		}
		snap := f.snapshot()
		f.mu.Unlock()
		plan, err := k8s.Decide(snap, in.Request, time.Now())
		if err != nil {
			return nil
		}
		if move, _ := in.Traffic.Moves(snap.ReplicaSets, plan); !move {
			return nil
		}
		dec := k8s.DecideTraffic(in.Traffic.Ask, snap.ReplicaSets, plan, func(string) bool { return true })
		want := k8s.TrafficState{StableHash: dec.Stable, CanaryHash: dec.Canary, Route: k8s.RouteState{CanaryWeight: dec.Weight, HeaderRoutes: in.Traffic.Cur.Route.HeaderRoutes}}
		res, err := route.SyncTraffic(context.Background(), activities.SyncTrafficInput{Spec: in.InlineTraffic.Spec, Want: want, Available: dec.Available,
			AvailableAfter: dec.After, Handover: dec.Handover, Abort: dec.Abort || in.Traffic.Returning, SizesAfter: k8s.SizesAfter(snap.ReplicaSets, plan)})
		if err != nil {
			return nil
		}
		waitMoves = append(waitMoves, len(route.moves)-1)
		return &res
	}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	var st contract.Status
	at(env, time.Hour, func() { st = queryStatus(t, env) })
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	var inline *activities.InlineTraffic
	for _, in := range f.awaits {
		if in.InlineTraffic != nil {
			inline = in.InlineTraffic
		}
	}
	if inline == nil || inline.Spec.HTTPRoute.Name != "web" || inline.Spec.CanaryService != "web-canary" || inline.Route != "web rule 0" {
		t.Fatalf("no wait was given the route to move (InlineTraffic %+v)", inline)
	}
	if len(waitMoves) == 0 {
		t.Fatal("the wait moved no route")
	}
	// The move to the step's weight was the wait's: the workflow's sync after it reads the
	// route again (its SyncTraffic) and finds it there.
	for i, m := range route.moves {
		if m.want.Route.CanaryWeight == 30 && m.from.Route.CanaryWeight != 30 && !slices.Contains(waitMoves, i) {
			t.Errorf("route move %d to 30 was the workflow's; the wait's moves are %v", i, waitMoves)
		}
	}
	tr := st.Steps.Traffic
	if st.Steps == nil || st.Steps.WaitingFor != contract.WaitingForPromote || tr == nil || tr.CanaryWeight != 30 || tr.StableWeight != 70 || tr.Check != "holds" {
		t.Errorf("at the pause: steps %+v, traffic %+v; want waiting for promote at 70/30, the invariant holding", st.Steps, tr)
	}
	servedMoves(t, route.moves)
}

// TestTrafficFenceRaisedOnGivingUpAWait (change inline-traffic-moves): a wait that may move the
// route, given up while it runs (here for a trigger naming no version, as a starting worker
// sends), may go on until its next heartbeat; the sync that follows raises the route's fence
// and writes it before any move, even with nothing to move, and the waits after it carry the
// new epoch. None is given the route before the fence is written.
func TestTrafficFenceRaisedOnGivingUpAWait(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	route := &fakeRoute{f: f}
	f.inlineRoute = func(activities.AwaitInput) *activities.SyncTrafficResult { return nil }
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	// Every AwaitChange activity's input as it starts, and the SyncTraffic calls made by then.
	type started struct {
		in    activities.AwaitInput
		syncs int
	}
	var waits []started
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != "AwaitChange" || info.IsLocalActivity {
			return
		}
		var in activities.AwaitInput
		if err := args.Get(&in); err != nil {
			t.Errorf("decode AwaitInput: %v", err)
		}
		f.mu.Lock()
		waits = append(waits, started{in: in, syncs: len(route.fences)})
		f.mu.Unlock()
	})
	var waitsBefore, callsBefore int
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		waitsBefore, callsBefore = len(waits), len(route.fences)
		f.mu.Unlock()
		env.SignalWorkflow(contract.SignalTrigger, nil)
	}, 30*time.Second)
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	if waitsBefore == 0 || waits[waitsBefore-1].in.InlineTraffic == nil || waits[waitsBefore-1].in.InlineTraffic.Fence != 0 {
		t.Fatalf("at 30s: %d waits started, the last %+v; want one given the route under fence 0", waitsBefore, waits)
	}
	if len(route.fences) <= callsBefore || route.fences[callsBefore] != 1 {
		t.Fatalf("SyncTraffic fences %v (%d before the trigger); want the sync after it to write fence 1", route.fences, callsBefore)
	}
	if route.fence != 1 {
		t.Errorf("route fence %d, want 1", route.fence)
	}
	for _, w := range waits[waitsBefore:] {
		if it := w.in.InlineTraffic; it != nil && (it.Fence != 1 || w.syncs <= callsBefore) {
			t.Errorf("a wait after the trigger was given the route under fence %d after %d SyncTraffic calls; want fence 1, once it was written (call %d)", it.Fence, w.syncs, callsBefore+1)
		}
	}
}

// TestTrafficWaitRouteUnknownRechecked (change inline-traffic-moves): a wait whose route move
// failed part-way (AwaitResult.RouteUnknown) leaves the route neither as the state says nor as
// asked; the sync after it reads the route again through the gate and puts it back, although
// the state says nothing is to move. Here the canary's pods never become available, so the
// route must stay at 0, and the failed move left it at 10.
func TestTrafficWaitRouteUnknownRechecked(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}}]`)
	f.d.Annotations[k8s.TrafficAnnotation] = testTraffic
	v2 := podTemplate("nginx:v2")
	h2 := k8s.PodTemplateHash(&v2, nil)
	f.afterWrite = func(string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h2 {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0
			}
		}
	}
	route := &fakeRoute{f: f}
	failed := false
	f.inlineRoute = func(activities.AwaitInput) *activities.SyncTrafficResult {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !failed && route.state.CanaryHash == h2 {
			failed = true
			route.state.Route.CanaryWeight = 10
			f.routeUnknown = true
		}
		return nil
	}
	env := newEnv(t, f)
	env.OnActivity(a.SyncTraffic, mock.Anything, mock.Anything).Return(route.SyncTraffic)
	endByDeletion(env, f, 30*time.Minute)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	if !failed {
		t.Fatal("no wait was given the route")
	}
	corrected := false
	for _, m := range route.moves {
		if m.from.Route.CanaryWeight == 10 && m.want.Route.CanaryWeight == 0 {
			corrected = true
		}
	}
	if !corrected || route.state.Route.CanaryWeight != 0 {
		t.Errorf("route at %d after the failed move, moves %+v; want the sync after it to put it back to 0", route.state.Route.CanaryWeight, route.moves)
	}
}
