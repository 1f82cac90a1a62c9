package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// fakeFreeze plays the fleet freeze workflow for the FleetFreeze activity.
type fakeFreeze struct {
	mu    sync.Mutex
	state activities.FleetFreezeResult
	err   error
	asked int
}

var freezeUntil = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func (z *fakeFreeze) register(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(a.FleetFreeze, mock.Anything).Return(func(context.Context) (activities.FleetFreezeResult, error) {
		z.mu.Lock()
		defer z.mu.Unlock()
		z.asked++
		return z.state, z.err
	})
}

func (z *fakeFreeze) set(frozen bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.state = activities.FleetFreezeResult{}
	if frozen {
		z.state = activities.FleetFreezeResult{Frozen: true, Until: freezeUntil, Reason: "black friday", By: "ops"}
	}
}

// A freeze that comes during a timed pause holds the rollout at its weight once the pause
// ends, past it, with a Warning event and Freeze in the status; promote is refused naming the
// freeze. Held for hours, the run continues as new (a sync a minute, maxSyncsPerRun) and the
// next run holds on from the carry; the thaw lets it go on to 100%.
func TestFleetFreezeHoldsSteps(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{"duration":"1h"}},{"setWeight":60},{"pause":{"duration":"1h"}}]`)
	z := &fakeFreeze{}
	env := newEnv(t, f)
	z.register(env)
	at(env, 30*time.Minute, func() { z.set(true) })
	at(env, 2*time.Hour, func() {
		assertReplicasNow(t, f, "held by the freeze", map[string]int32{"nginx:v1": 7, "nginx:v2": 3})
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 2 && st.Steps.WaitingFor == contract.WaitingForFreeze && st.Steps.Weight == 30,
			"held: steps %+v, want step 2 waiting for the freeze at weight 30", st.Steps)
		check(t, st.Steps != nil && st.Steps.Freeze != nil && st.Steps.Freeze.Reason == "black friday" && st.Steps.Freeze.Until.Equal(freezeUntil),
			"held: freeze %+v, want the fleet freeze", st.Steps)
		check(t, st.Steps != nil && st.Steps.Message == "Held before step 3 of 4 (setWeight 60): fleet freeze until 2100-01-01T00:00:00Z (black friday)",
			"held: message %q", st.Steps.Message)
	})
	var promote, full updateOutcome
	updateAt(env, 2*time.Hour+time.Minute, contract.UpdatePromote, nil, &promote)
	updateAt(env, 2*time.Hour+2*time.Minute, contract.UpdatePromote, contract.PromoteRequest{Full: true}, &full)
	// The freeze is extended: the held rollout says so once, with the new end.
	at(env, 2*time.Hour+5*time.Minute, func() {
		z.mu.Lock()
		z.state.Until = freezeUntil.Add(time.Hour)
		z.mu.Unlock()
	})
	at(env, 2*time.Hour+10*time.Minute, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && strings.HasSuffix(st.Steps.Message, "fleet freeze until 2100-01-01T01:00:00Z (black friday)"), "after the extension: steps %+v", st.Steps)
	})
	env.ExecuteWorkflow(contract.WorkflowType, input())

	next := continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 7, "nginx:v2": 3})
	for _, u := range []updateOutcome{promote, full} {
		if u.rejected == nil || !strings.Contains(u.rejected.Error(), "promote refused: the fleet is frozen until 2100-01-01T00:00:00Z (black friday)") {
			t.Errorf("promote while held: rejected with %v, want refused naming the freeze", u.rejected)
		}
	}
	if s := next.State.Steps; s == nil || s.Step != 1 || s.WaitingFor != contract.WaitingForFreeze || s.Freeze == nil {
		t.Fatalf("carry while held: steps %+v, want held at step 2 (0-based 1) for the freeze", s)
	}
	if n := f.countEvents("RolloutFrozen"); n != 2 || f.hasEvent("RolloutThawed") {
		t.Errorf("events: %d RolloutFrozen, RolloutThawed %t; want 2 (the hold, the extension) and no RolloutThawed", n, f.hasEvent("RolloutThawed"))
	}
	// Asked once per step passed and every freezeRecheck while held (from 1h30m).
	if z.asked < 100 {
		t.Errorf("asked the freeze %d times, want one every %s while held (from 1h30m to the run's end)", z.asked, freezeRecheck)
	}

	// The next run holds on, until the thaw.
	env = newEnv(t, f)
	z.register(env)
	at(env, 30*time.Minute, func() {
		assertReplicasNow(t, f, "held in the next run", map[string]int32{"nginx:v1": 7, "nginx:v2": 3})
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForFreeze, "held in the next run: steps %+v", st.Steps)
		z.set(false)
	})
	env.ExecuteWorkflow(contract.WorkflowType, next)
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if !f.hasEvent("RolloutThawed") || !f.hasEvent("RolloutStepsPassed") {
		t.Errorf("events: RolloutThawed %t, RolloutStepsPassed %t; want both", f.hasEvent("RolloutThawed"), f.hasEvent("RolloutStepsPassed"))
	}
}

// A promote while the fleet is frozen but the rollout is not yet held (an untimed pause) is
// refused once the main loop asks; abort still works.
func TestFleetFreezePromoteRefusedAbortWorks(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{}},{"setWeight":60}]`)
	z := &fakeFreeze{}
	env := newEnv(t, f)
	z.register(env)
	at(env, 30*time.Minute, func() { z.set(true) })
	var promote, abort updateOutcome
	updateAt(env, time.Hour, contract.UpdatePromote, nil, &promote)
	at(env, 90*time.Minute, func() {
		st := queryStatus(t, env)
		check(t, st.Steps != nil && st.Steps.Step == 2 && st.Steps.WaitingFor == contract.WaitingForPromote, "after the refused promote: steps %+v, want still at the pause", st.Steps)
		assertReplicasNow(t, f, "after the refused promote", map[string]int32{"nginx:v1": 7, "nginx:v2": 3})
	})
	updateAt(env, 2*time.Hour, contract.UpdateAbort, map[string]string{"reason": "bad canary"}, &abort)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	if !promote.accepted || promote.err == nil || !strings.Contains(promote.err.Error(), "promote refused: the fleet is frozen until 2100-01-01T00:00:00Z (black friday)") {
		t.Errorf("promote during the freeze: %+v, want accepted, then refused naming the freeze", promote)
	}
	if !abort.completed || abort.err != nil {
		t.Errorf("abort during the freeze: %+v, want completed", abort)
	}
	assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
	if f.hasEvent("RolloutPromoted") || !f.hasEvent("RolloutAborted") {
		t.Errorf("events: RolloutPromoted %t, RolloutAborted %t; want only the abort", f.hasEvent("RolloutPromoted"), f.hasEvent("RolloutAborted"))
	}
}

// When the freeze cannot be asked, the rollout is not held: it never sticks on an unreachable
// freeze workflow.
func TestFleetFreezeErrorDoesNotHold(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{"duration":"1h"}},{"setWeight":60}]`)
	z := &fakeFreeze{err: errors.New("query freeze/fleet: connection refused")}
	env := newEnv(t, f)
	z.register(env)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if f.hasEvent("RolloutFrozen") || z.asked == 0 {
		t.Errorf("RolloutFrozen %t, asked %d; want asked and not held", f.hasEvent("RolloutFrozen"), z.asked)
	}
}

// A freeze whose until has passed (the freeze workflow not yet expired it) holds nothing.
func TestFleetFreezeExpiredDoesNotHold(t *testing.T) {
	f := stepped(`[{"setWeight":30},{"pause":{"duration":"1h"}},{"setWeight":60}]`)
	z := &fakeFreeze{state: activities.FleetFreezeResult{Frozen: true, Until: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Reason: "old"}}
	env := newEnv(t, f)
	z.register(env)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if f.hasEvent("RolloutFrozen") {
		t.Errorf("held by a freeze that ended in 2000")
	}
}

func (f *fakeCluster) countEvents(reason string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// A blue-green rollout's automatic promotion (autoPromotionSeconds) holds during the freeze,
// the preview ready and the active Service on the old pods, with promote refused; after the
// thaw it promotes.
func TestFleetFreezeHoldsBlueGreenAutoPromotion(t *testing.T) {
	f, svcs, h1, h2 := blueGreenSetup(t, `{"activeService":"web","previewService":"web-preview","autoPromotionSeconds":600,"scaleDownDelaySeconds":60}`)
	z := &fakeFreeze{}
	z.set(true)
	env := newEnv(t, f)
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
	z.register(env)
	at(env, time.Hour, func() {
		assertReplicasNow(t, f, "held", map[string]int32{"nginx:v1": 10, "nginx:v2": 10})
		bg := queryStatus(t, env).BlueGreen
		check(t, bg != nil && bg.Phase == contract.BlueGreenPaused && bg.WaitingFor == contract.WaitingForFreeze && bg.Freeze != nil && !bg.Promoted,
			"held: blueGreen %+v, want Paused waiting for the freeze", bg)
		check(t, bg != nil && bg.ActiveSelects == h1 && bg.PreviewSelects == h2, "held: services %+v, want active on %s", bg, h1)
		check(t, bg != nil && bg.Message == "Blue-green: automatic promotion held: fleet freeze until 2100-01-01T00:00:00Z (black friday)", "held: message %q", bg.Message)
	})
	var promote updateOutcome
	updateAt(env, time.Hour+time.Minute, contract.UpdatePromote, nil, &promote)
	at(env, 2*time.Hour, func() { z.set(false) })
	env.ExecuteWorkflow(contract.WorkflowType, input())

	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if svcs.selects["web"] != h2 {
		t.Errorf("active Service on %s, want %s", svcs.selects["web"], h2)
	}
	if promote.rejected == nil || !strings.Contains(promote.rejected.Error(), "promote refused: the fleet is frozen") {
		t.Errorf("promote while held: rejected with %v, want refused naming the freeze", promote.rejected)
	}
	for _, reason := range []string{"RolloutFrozen", "RolloutThawed", "RolloutPromoted", "ActiveSwitched"} {
		if !f.hasEvent(reason) {
			t.Errorf("no %s event", reason)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e.Reason == "RolloutPromoted" && !strings.HasPrefix(e.Message, "Promoted automatically after the fleet freeze") {
			t.Errorf("promoted: %q, want after the fleet freeze", e.Message)
		}
	}
}

// TestFleetFreezeDoesNotHoldAReleaseRollback (issue 46 item 7): a release rolls a stepped
// Deployment back to v2 (the restored template's hash in
// temporal-rollout.io/release-restored-hash) while the fleet is frozen: the rollout runs its
// steps and reaches 100% without holding. Before the change
// fleet-freeze-skips-release-rollback it held at 30% (the release's rollback then ran out of
// rolloutTimeout and the release ended Halted); the same template without the annotation
// holds as any rollout.
func TestFleetFreezeDoesNotHoldAReleaseRollback(t *testing.T) {
	tests := []struct {
		name      string
		annotate  bool
		give      workflow.Version
		wantHeld  bool
		wantFinal map[string]int32
	}{
		{"a release's rollback", true, 1, false, map[string]int32{"nginx:v1": 0, "nginx:v2": 10}},
		{"run from before the change", true, workflow.DefaultVersion, true, map[string]int32{"nginx:v1": 7, "nginx:v2": 3}},
		{"not a rollback", false, 1, true, map[string]int32{"nginx:v1": 7, "nginx:v2": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := stepped(`[{"setWeight":30},{"pause":{"duration":"10m"}},{"setWeight":60}]`)
			if tt.annotate {
				f.d.Annotations[k8s.ReleaseRestoredHashAnnotation] = k8s.PodTemplateHash(&f.d.Spec.Template, f.d.Status.CollisionCount)
			}
			z := &fakeFreeze{}
			z.set(true)
			env := newEnv(t, f)
			z.register(env)
			env.OnGetVersion(changeReleaseRollbackUnfrozen, workflow.DefaultVersion, 1).Return(tt.give)
			held := false
			at(env, 2*time.Hour, func() {
				st := queryStatus(t, env)
				held = st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForFreeze
			})
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			if held != tt.wantHeld {
				t.Errorf("held by the freeze at 2h: %t, want %t", held, tt.wantHeld)
			}
			assertReplicas(t, f, tt.wantFinal)
		})
	}
}
