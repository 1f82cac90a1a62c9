package release

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// Freezes that hold within a wave, rollouts held by the fleet freeze, lost change results and
// rollbacks that keep later changes (issue 39: 4-7).

func oneWaveOfThree(t *testing.T, mutate func(*Spec)) Spec {
	t.Helper()
	s, err := Parse([]byte(`
name: web-1-27
change: {images: {app: "nginx:1.27"}}
targets: [{name: all, namespace: shop, names: [a, b, c]}]
waves: [{name: only, targets: [all], maxConcurrent: 1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	s.Author = "deployer@ci"
	if mutate != nil {
		mutate(&s)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func targetStates(st Status) []string {
	var out []string
	for _, tg := range st.Targets {
		out = append(out, tg.Name+" "+tg.State)
	}
	return out
}

// TestFleetFreezeStopsTheWave: the fleet is frozen (for 1h) after the first of a wave's three
// Deployments changed; the other two change only after the thaw. Before, the freeze was asked
// only when the wave started, and all three changed at once.
func TestFleetFreezeStopsTheWave(t *testing.T) {
	spec := oneWaveOfThree(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
	// The wave's gate asks (not frozen); before b: frozen; after the thaw, not.
	f.frozen = []FleetFreeze{{}, {Frozen: true, Until: f.start.Add(5 * time.Hour), Reason: "black friday", By: "ops"}}
	var held Status
	env.RegisterDelayedCallback(func() { held = query(t, env) }, 30*time.Minute)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v, want Succeeded", r)
	}
	equalLines(t, "log", f.lines("apply", "done", "thawed"), []string{
		"0s apply /shop/a nginx:1.27",
		"0s done /shop/a",
		"1h0m0s thawed",
		"1h0m0s apply /shop/b nginx:1.27",
		"1h0m0s done /shop/b",
		"1h0m0s apply /shop/c nginx:1.27",
		"1h0m0s done /shop/c",
	})
	equalLines(t, "targets at 30m", targetStates(held), []string{"a Done", "b Pending", "c Pending"})
	if held.Phase != PhaseWaiting || held.WaitingFor != WaitingForFleetFreeze || held.FreezeReason != "black friday" ||
		held.Waves[0].State != WaveRolling || !strings.Contains(held.Message, "wave 1 (only), 1 of 3 Deployments started, waits for the fleet freeze to end") {
		t.Errorf("status at 30m: phase %s waiting %s reason %q wave %s message %q, want Waiting for FleetFreeze (black friday), the wave Rolling, 1 of 3 started",
			held.Phase, held.WaitingFor, held.FreezeReason, held.Waves[0].State, held.Message)
	}
}

// TestFreezeWindowStopsTheWave: a release started at 21:50 UTC, each rollout taking 20m, and a
// nightly window from 22:00 for 8h: a changes at once, b and c only after the window (06:00
// plus a's 20m... b at 06:00, c once b is done). Before, all three changed before 23:00.
func TestFreezeWindowStopsTheWave(t *testing.T) {
	spec := oneWaveOfThree(t, func(s *Spec) {
		s.Freeze = []FreezeWindow{{Cron: "0 22 * * *", Duration: k8s.Duration(8 * time.Hour), TimeZone: "UTC", Reason: "nightly freeze"}}
	})
	env := newEnv(t, spec)
	env.SetStartTime(time.Date(2026, 11, 26, 21, 50, 0, 0, time.UTC))
	f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
	env.OnActivity("AwaitRolloutDone", mock.Anything, mock.Anything).Return(activities.AwaitDoneResult{Complete: true}, nil).After(20 * time.Minute)
	var held Status
	env.RegisterDelayedCallback(func() { held = query(t, env) }, time.Hour)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v, want Succeeded", r)
	}
	equalLines(t, "log", f.lines("apply"), []string{
		"0s apply /shop/a nginx:1.27",
		"8h10m0s apply /shop/b nginx:1.27",
		"8h30m0s apply /shop/c nginx:1.27",
	})
	if held.WaitingFor != WaitingForFreeze || held.FreezeReason != "nightly freeze" || held.FrozenUntil == nil ||
		!held.FrozenUntil.Equal(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("status at 22:50: waiting %s reason %q until %v, want Freeze (nightly freeze) until 06:00", held.WaitingFor, held.FreezeReason, held.FrozenUntil)
	}
}

// TestRolloutHeldByFleetFreezeKeepsItsTime: a's stepped rollout is held by the fleet freeze
// after 10m, for 2h, then completes 15m after the thaw. rolloutTimeout is 30m: the held time
// does not count, the status says it is held, and the release succeeds with no rollback.
// Before, the wait ran out of rolloutTimeout during the freeze and rolled a back.
func TestRolloutHeldByFleetFreezeKeepsItsTime(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.RolloutTimeout = k8s.Duration(30 * time.Minute) })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	const msg = "Held before step 2 of 4 (pause 5s): fleet freeze until 2026-12-01T08:00:00Z (black friday)"
	var calls []string
	env.OnActivity("AwaitRolloutDone", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.AwaitDoneInput) (activities.AwaitDoneResult, error) {
		info := activity.GetInfo(ctx)
		calls = append(calls, fmt.Sprintf("%s reportHold=%t held=%t timeout=%s", in.Name, in.ReportHold, in.Held, info.Deadline.Sub(info.StartedTime).Round(time.Minute)))
		if !in.ReportHold {
			// The old wait: a held rollout never completes, so it runs out of time.
			return activities.AwaitDoneResult{}, temporal.NewNonRetryableApplicationError("rolloutTimeout passed", "Timeout", nil)
		}
		return activities.AwaitDoneResult{Held: true, HoldMessage: msg}, nil
	}).After(10 * time.Minute).Once()
	env.OnActivity("AwaitRolloutDone", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.AwaitDoneInput) (activities.AwaitDoneResult, error) {
		info := activity.GetInfo(ctx)
		calls = append(calls, fmt.Sprintf("%s reportHold=%t held=%t timeout>=365d=%t", in.Name, in.ReportHold, in.Held, info.Deadline.Sub(info.StartedTime) >= 365*24*time.Hour))
		return activities.AwaitDoneResult{}, nil
	}).After(2 * time.Hour).Once()
	env.OnActivity("AwaitRolloutDone", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.AwaitDoneInput) (activities.AwaitDoneResult, error) {
		info := activity.GetInfo(ctx)
		calls = append(calls, fmt.Sprintf("%s reportHold=%t held=%t timeout=%s", in.Name, in.ReportHold, in.Held, info.Deadline.Sub(info.StartedTime).Round(time.Minute)))
		return activities.AwaitDoneResult{Complete: true}, nil
	}).After(15 * time.Minute)
	var held, after Status
	env.RegisterDelayedCallback(func() { held = query(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() { after = query(t, env) }, 2*time.Hour+15*time.Minute)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v, want Succeeded", r)
	}
	if got := f.lines("restore"); len(got) != 0 {
		t.Errorf("restores %v, want none", got)
	}
	equalLines(t, "waits", calls[:3], []string{
		"a reportHold=true held=false timeout=30m0s",
		"a reportHold=true held=true timeout>=365d=true",
		"a reportHold=true held=false timeout=20m0s",
	})
	if held.Phase != PhaseWaiting || held.WaitingFor != WaitingForFleetFreeze || held.Targets[0].State != TargetUpdating ||
		held.Targets[0].Reason != "held by the fleet freeze (rolloutTimeout stopped): "+msg ||
		held.Message != "wave 1 (first): 1 rollouts held by the fleet freeze, their rolloutTimeout stopped: "+msg {
		t.Errorf("status at 1h: phase %s waiting %s target %s %q message %q, want Waiting for FleetFreeze with a Updating and held", held.Phase, held.WaitingFor, held.Targets[0].State, held.Targets[0].Reason, held.Message)
	}
	if after.Phase != PhaseRolling || after.WaitingFor != WaitingForRollouts || after.Targets[0].Reason != "" {
		t.Errorf("status after the thaw: phase %s waiting %s reason %q, want Rolling for Rollouts", after.Phase, after.WaitingFor, after.Targets[0].Reason)
	}
}

// TestLostChangeIsReadBack: c's change lands but every answer is lost until clusterTimeout.
// Read back, the landed change counts: c is rolled back with b and a. When reading back fails
// too, the release cannot know, and ends Halted naming c. Before, c counted as not changed:
// the release ended RolledBack with c left on the new image.
func TestLostChangeIsReadBack(t *testing.T) {
	tests := []struct {
		name          string
		readBackFails bool
		wantPhase     string
		wantReason    string
		wantRestores  []string
		wantImage     string
		wantC         string
	}{
		{
			name: "the change landed: rolled back", wantPhase: PhaseRolledBack,
			wantReason:   "wave second: eu:shop/c: change: connection to the apiserver lost; read back: the change landed, so it is rolled back with the rest",
			wantRestores: []string{"restore eu/shop/c nginx:1.26", "restore eu/shop/b nginx:1.26", "restore /shop/a nginx:1.26"},
			wantImage:    "nginx:1.26", wantC: TargetRolledBack,
		},
		{
			name: "reading back fails: halted", readBackFails: true, wantPhase: PhaseHalted,
			wantReason:   "eu:shop/c may have the change (its result was lost and reading it back failed): check it",
			wantRestores: []string{"restore eu/shop/b nginx:1.26", "restore /shop/a nginx:1.26"},
			wantImage:    "nginx:1.27", wantC: TargetFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, func(s *Spec) { s.Waves[1].MaxConcurrent = 1; s.ClusterTimeout = k8s.Duration(2 * time.Minute) })
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			f.lostResult["c"], f.readBackFails = true, tt.readBackFails
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			r := result(t, env)
			if r.Phase != tt.wantPhase || !strings.Contains(r.Reason, tt.wantReason) {
				t.Fatalf("result = %+v, want %s with %q", r, tt.wantPhase, tt.wantReason)
			}
			var restores []string
			for _, l := range f.lines("restore") {
				_, rest, _ := strings.Cut(l, " ")
				restores = append(restores, rest)
			}
			equalLines(t, "restores", restores, tt.wantRestores)
			if got := f.deps["eu/shop/c"].image; got != tt.wantImage {
				t.Errorf("c's image %s, want %s", got, tt.wantImage)
			}
			st := query(t, env)
			if c := st.Targets[2]; c.State != tt.wantC || c.RevisionBefore != 3 && tt.wantC == TargetRolledBack {
				t.Errorf("c: %s r%d %q, want %s", c.State, c.RevisionBefore, c.Reason, tt.wantC)
			}
		})
	}
}

// TestRollbackKeepsAHotfix: during wave 1's bake a's image is set by hand to a hotfix; wave 2
// fails. c and b are rolled back; a is left on the hotfix, RollbackSkipped with what changed,
// and the release ends Halted naming it. Before, the rollback overwrote the hotfix.
func TestRollbackKeepsAHotfix(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[1].MaxConcurrent = 1 })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.failRollout["c"] = "nginx:1.27"
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.deps["/shop/a"].image = "nginx:1.27-hotfix"
	}, 5*time.Minute)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	const drift = "container app: image nginx:1.27 → nginx:1.27-hotfix"
	if r.Phase != PhaseHalted || !strings.Contains(r.Reason, "wave second: eu:shop/c: rollout failed") ||
		!strings.Contains(r.Reason, "; not rolled back, changed since the release: shop/a (changed since the release wrote it: "+drift+")") {
		t.Fatalf("result = %+v, want Halted naming a's hotfix", r)
	}
	equalLines(t, "restores", f.lines("restore"), []string{
		"10m0s restore eu/shop/c nginx:1.26",
		"10m0s restore eu/shop/b nginx:1.26",
		"10m0s restore skipped /shop/a nginx:1.27-hotfix",
	})
	if got := f.deps["/shop/a"].image; got != "nginx:1.27-hotfix" {
		t.Errorf("a's image %s, want the hotfix kept", got)
	}
	st := query(t, env)
	equalLines(t, "targets", targetStates(st), []string{"a RollbackSkipped", "b RolledBack", "c RolledBack"})
	if a := st.Targets[0]; a.Reason != "changed since the release wrote it: "+drift {
		t.Errorf("a's reason %q", a.Reason)
	}
	if st.Phase != PhaseHalted {
		t.Errorf("phase %s, want Halted", st.Phase)
	}
	if got := f.lines("event a ReleaseRollbackSkipped", "event a ReleaseRolledBack"); len(got) != 1 || !strings.HasSuffix(got[0], "ReleaseRollbackSkipped") {
		t.Errorf("events on a %v, want one ReleaseRollbackSkipped", got)
	}
}

// TestRollbackAfterContinueAsNewKeepsAHotfix: wave 1's a is changed, the run continues as new
// (its state names a's template before the release by hash only, compact), wave 2's c fails.
// The rollback restores a from its old ReplicaSet (FromHash) while its template is still the
// release's (ExpectTemplateHash: the restore point's Hash, which the state keeps), and leaves
// a hotfixed a as it is.
func TestRollbackAfterContinueAsNewKeepsAHotfix(t *testing.T) {
	for _, tt := range []struct {
		name       string
		aImage     string
		wantPhase  string
		wantStates []string
		wantLines  []string
	}{
		{name: "still the release's: restored from the ReplicaSet", aImage: "nginx:1.27", wantPhase: PhaseRolledBack,
			wantStates: []string{"a RolledBack", "b RolledBack", "c RolledBack"},
			wantLines:  []string{"restore /shop/a nginx:1.26", "restore eu/shop/b nginx:1.26", "restore eu/shop/c nginx:1.26"}},
		{name: "hotfixed: kept", aImage: "nginx:1.27-hotfix", wantPhase: PhaseHalted,
			wantStates: []string{"a RollbackSkipped", "b RolledBack", "c RolledBack"},
			wantLines:  []string{"restore eu/shop/b nginx:1.26", "restore eu/shop/c nginx:1.26", "restore skipped /shop/a nginx:1.27-hotfix"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, nil)
			env := newEnv(t, spec)
			newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			env.SetCurrentHistoryLength(continueAfterEvents + 1)
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			var can *workflow.ContinueAsNewError
			if err := env.GetWorkflowError(); !errors.As(err, &can) {
				t.Fatalf("error = %v, want continue-as-new", err)
			}
			var next Spec
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if p := next.Resume.Points[0]; !p.Changed || p.Before != nil || p.BeforeHash != "h-nginx:1.26" || p.Hash != "h-nginx:1.27" {
				t.Fatalf("handed over point %+v, want changed, no template, beforeHash h-nginx:1.26, hash h-nginx:1.27", p)
			}

			env2 := newEnv(t, next)
			env2.SetContinuedExecutionRunID("run-1")
			f2 := newFleet(env2, "/shop/a", "eu/shop/b", "eu/shop/c")
			f2.deps["/shop/a"].image = tt.aImage
			f2.failRollout["c"] = "nginx:1.27"
			env2.ExecuteWorkflow(ReleaseWorkflow, next)
			r := result(t, env2)
			if r.Phase != tt.wantPhase {
				t.Fatalf("result = %+v, want %s", r, tt.wantPhase)
			}
			if tt.wantPhase == PhaseHalted && !strings.Contains(r.Reason, "; not rolled back, changed since the release: shop/a (changed since the release wrote it: container app: image nginx:1.27 → nginx:1.27-hotfix)") {
				t.Errorf("reason %q, want a's hotfix named", r.Reason)
			}
			got := f2.lines("restore")
			sort.Strings(got)
			for i := range got {
				got[i] = got[i][strings.Index(got[i], " ")+1:]
			}
			equalLines(t, "restores", got, tt.wantLines)
			if f2.fromHash != 1 {
				t.Errorf("%d restores from a ReplicaSet's hash, want 1 (a)", f2.fromHash)
			}
			if got := f2.deps["/shop/a"].image; got != map[string]string{PhaseRolledBack: "nginx:1.26", PhaseHalted: "nginx:1.27-hotfix"}[tt.wantPhase] {
				t.Errorf("a's image %s", got)
			}
			equalLines(t, "targets", targetStates(query(t, env2)), tt.wantStates)
		})
	}
}

// TestUnreadableFleetFreezeHolds (issue 46 item 9): the fleet freeze cannot be read twice
// before the wave: the release holds a minute each time, the reason in its status, and then
// changes every Deployment; nothing fails. Before the
// change release-freeze-unreadable-holds the first failure failed the release.
func TestUnreadableFleetFreezeHolds(t *testing.T) {
	t.Run("holds", func(t *testing.T) {
		spec := oneWaveOfThree(t, nil)
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		f.freezeErrs = 2
		var held Status
		env.RegisterDelayedCallback(func() { held = query(t, env) }, 90*time.Second)
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		if r := result(t, env); r.Phase != PhaseSucceeded {
			t.Fatalf("result = %+v", r)
		}
		if want := "wave 1 (only) holds: the fleet freeze could not be read: query freeze/fleet: connection refused; asking again in 1m0s"; held.WaitingFor != WaitingForFleetFreeze || held.Message != want {
			t.Errorf("at 1m30s: waiting for %q, %q\nwant %q, %q", held.WaitingFor, held.Message, WaitingForFleetFreeze, want)
		}
		equalLines(t, "applies", f.lines("apply"), []string{"2m0s apply /shop/a nginx:1.27", "2m0s apply /shop/b nginx:1.27", "2m0s apply /shop/c nginx:1.27"})
	})
	t.Run("run from before the change", func(t *testing.T) {
		spec := oneWaveOfThree(t, nil)
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		f.freezeErrs = 2
		env.OnGetVersion(changeFreezeUnreadableHolds, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		if r := result(t, env); r.Phase != PhaseFailed {
			t.Fatalf("result = %+v, want Failed (the old branch)", r)
		}
		equalLines(t, "applies", f.lines("apply"), nil)
	})
}
