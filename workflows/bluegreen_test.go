package workflows

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// fakeServices plays the active and preview Services for the fake cluster: what each selects,
// and where in the activity calls each switch happened.
type fakeServices struct {
	f        *fakeCluster
	selects  map[string]string
	switches []switchSeen
}

type switchSeen struct {
	service, hash string
	at            int
}

func (s *fakeServices) SyncBlueGreen(_ context.Context, in activities.SyncBlueGreenInput) (_ activities.SyncBlueGreenResult, err error) {
	f := s.f
	f.mu.Lock()
	defer f.done("SyncBlueGreen", true, &err)
	res := activities.SyncBlueGreenResult{Selects: map[string]string{}}
	for _, sw := range in.Switches {
		if sw.Hash != "" && s.selects[sw.Service] != sw.Hash {
			s.selects[sw.Service] = sw.Hash
			s.switches = append(s.switches, switchSeen{sw.Service, sw.Hash, len(f.order)})
			res.Switched = append(res.Switched, sw.Service)
			f.events = append(f.events, sw.Event)
		}
		res.Selects[sw.Service] = s.selects[sw.Service]
	}
	return res, nil
}

// blueGreenSetup is a 10-replica Deployment whose template moved from v1 to v2, with the
// blue-green annotation, and its Services on v1.
func blueGreenSetup(t *testing.T, annotation string) (*fakeCluster, *fakeServices, string, string) {
	f := stepped("")
	delete(f.d.Annotations, k8s.StepsAnnotation)
	f.d.Annotations[k8s.BlueGreenAnnotation] = annotation
	v1, v2 := podTemplate("nginx:v1"), podTemplate("nginx:v2")
	h1, h2 := k8s.PodTemplateHash(&v1, nil), k8s.PodTemplateHash(&v2, nil)
	return f, &fakeServices{f: f, selects: map[string]string{"web": h1, "web-preview": h1}}, h1, h2
}

// A blue-green rollout: both stacks full, the preview on the new pods and the active Service
// on the old ones until promote; then the active Service switches, the old ReplicaSet stays
// full for the scale-down delay on a durable timer, then goes to 0.
func TestBlueGreenRollout(t *testing.T) {
	f, svcs, h1, h2 := blueGreenSetup(t, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"scaleDownDelaySeconds":600}`)
	env := newEnv(t, f)
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
	var promoted, again updateOutcome
	at(env, time.Hour, func() {
		assertReplicasNow(t, f, "paused", map[string]int32{"nginx:v1": 10, "nginx:v2": 10})
		st := queryStatus(t, env)
		bg := st.BlueGreen
		check(t, bg != nil && bg.Phase == contract.BlueGreenPaused && bg.WaitingFor == contract.WaitingForPromote && bg.Hash == h2 && bg.StableHash == h1,
			"paused: blueGreen %+v, want Paused waiting for promote", bg)
		check(t, bg != nil && bg.ActiveSelects == h1 && bg.PreviewSelects == h2, "paused: services %+v, want active on %s, preview on %s", bg, h1, h2)
		c := k8s.GetCondition(f.d.Status, appsv1.DeploymentProgressing)
		check(t, c != nil && c.Reason == k8s.CanaryPausedReason && strings.Contains(c.Message, "paused until promoted"), "paused: Progressing %+v", c)
	})
	updateAt(env, 2*time.Hour, contract.UpdatePromote, nil, &promoted)
	at(env, 2*time.Hour+5*time.Minute, func() {
		assertReplicasNow(t, f, "in the scale-down delay", map[string]int32{"nginx:v1": 10, "nginx:v2": 10})
		st := queryStatus(t, env)
		check(t, st.BlueGreen != nil && st.BlueGreen.Phase == contract.BlueGreenScaleDownDelay && st.BlueGreen.ActiveSelects == h2,
			"in the delay: blueGreen %+v, want ScaleDownDelay with the active Service on %s", st.BlueGreen, h2)
	})
	updateAt(env, 2*time.Hour+6*time.Minute, contract.UpdatePromote, nil, &again)
	env.ExecuteWorkflow(contract.WorkflowType, input())

	next := continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if !promoted.completed || promoted.err != nil || promoted.status.BlueGreen == nil || !promoted.status.BlueGreen.Promoted {
		t.Errorf("promote: %+v, want completed and promoted", promoted)
	}
	if again.rejected == nil || !strings.Contains(again.rejected.Error(), "already promoted") {
		t.Errorf("promote in the delay: rejected with %v, want already promoted", again.rejected)
	}
	// The active Service switched once, to v2, after the preview and before v1 scaled down.
	var active []switchSeen
	for _, sw := range svcs.switches {
		if sw.service == "web" {
			active = append(active, sw)
		}
	}
	if len(active) != 1 || active[0].hash != h2 || svcs.selects["web-preview"] != h2 {
		t.Fatalf("switches %+v, want the active Service switched once to %s and the preview on it", svcs.switches, h2)
	}
	for i, act := range f.order {
		if act == "ScaleDownReplicaSet" && i < active[0].at {
			t.Errorf("v1 scaled down (call %d) before the active Service switched (call %d)", i, active[0].at)
		}
	}
	for _, reason := range []string{"BlueGreenStarted", "PreviewSwitched", "RolloutPromoted", "ActiveSwitched", "OldReplicaSetScaledDown"} {
		if !f.hasEvent(reason) {
			t.Errorf("no %s event", reason)
		}
	}
	if next.State.BlueGreen != nil || next.State.BlueGreenServices == nil || next.State.BlueGreenServices.ActiveSelects != h2 || next.State.StableHash != h2 {
		t.Errorf("carry after completion: %+v %+v stable %s; want no rollout, the Services on %s", next.State.BlueGreen, next.State.BlueGreenServices, next.State.StableHash, h2)
	}
}

// A rollback during the scale-down delay switches the active Service back to the warm old
// ReplicaSet before the new one scales down; the old one is never scaled. The rollback keeps
// the Deployment's own blue-green annotation whether the old ReplicaSet was created with it or
// before it (k8s.keptOnRollback): the strategy is the Deployment's, not its template's.
func TestBlueGreenRollbackToWarm(t *testing.T) {
	for _, carries := range []bool{true, false} {
		t.Run(fmt.Sprintf("old ReplicaSet carries the annotation %t", carries), func(t *testing.T) {
			ann := `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":3600}`
			f, svcs, h1, h2 := blueGreenSetup(t, ann)
			if carries {
				f.rss[0].Annotations[k8s.BlueGreenAnnotation] = ann
			}
			env := newEnv(t, f)
			env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
			at(env, 30*time.Minute, func() {
				st := queryStatus(t, env)
				check(t, st.BlueGreen != nil && st.BlueGreen.Phase == contract.BlueGreenScaleDownDelay && svcs.selects["web"] == h2,
					"auto-promoted: blueGreen %+v, want in the delay with the active Service on %s", st.BlueGreen, h2)
			})
			signalAt(env, 40*time.Minute, contract.SignalRollback, map[string]int64{"revision": 0})
			env.ExecuteWorkflow(contract.WorkflowType, input())

			next := continuedAsNew(t, env)
			assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
			if svcs.selects["web"] != h1 || svcs.selects["web-preview"] != h1 {
				t.Fatalf("after the rollback: services %v, want both on %s", svcs.selects, h1)
			}
			last := svcs.switches[len(svcs.switches)-1]
			for i, act := range f.order {
				if act == "ScaleDownReplicaSet" && i < last.at {
					t.Errorf("v2 scaled down (call %d) before the Services switched back (call %d)", i, last.at)
				}
				if act == "ScaleUpReplicaSet" && i > last.at {
					t.Errorf("a scale-up (call %d) after the rollback: the warm ReplicaSet needed none", i)
				}
			}
			if got := f.annotation(k8s.BlueGreenAnnotation); got != ann {
				t.Errorf("annotation after the rollback %q, want the Deployment's own %q", got, ann)
			}
			if sv := next.State.BlueGreenServices; sv == nil || sv.ActiveSelects != h1 {
				t.Errorf("carried services %+v, want the active Service on %s", sv, h1)
			}
		})
	}
}

// Promote is rejected while the preview scales (unless full) and once promoted.
func TestBlueGreenCanPromote(t *testing.T) {
	tests := []struct {
		name    string
		phase   string
		full    bool
		wantErr string
	}{
		{name: "paused", phase: contract.BlueGreenPaused},
		{name: "pre-promotion analysis", phase: contract.BlueGreenPrePromotionAnalysis},
		{name: "post-promotion analysis", phase: contract.BlueGreenPostPromotionAnalysis},
		{name: "preview scaling", phase: contract.BlueGreenPreview, wantErr: "is not ready"},
		{name: "preview scaling, full", phase: contract.BlueGreenPreview, full: true},
		{name: "promoting", phase: contract.BlueGreenPromoting, wantErr: "already promoted"},
		{name: "scale-down delay", phase: contract.BlueGreenScaleDownDelay, wantErr: "already promoted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &deploymentRun{in: input()}
			r.BlueGreen = &blueGreenState{Phase: tt.phase}
			err := r.canPromote(contract.PromoteRequest{Full: tt.full})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("canPromote = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// A run continued in the scale-down delay (Continue-As-New) waits only what is left of it,
// from the carried state, and then scales the old ReplicaSet down.
func TestBlueGreenDelayAcrossContinueAsNew(t *testing.T) {
	ann := `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":1800}`
	f, svcs, h1, h2 := blueGreenSetup(t, ann)
	f.d.Annotations[k8s.RevisionAnnotation] = "2"
	f.rss = append(f.rss, newReplicaSet(f.d, "nginx:v2", 2, 10, time.Minute))
	svcs.selects["web"], svcs.selects["web-preview"] = h2, h2
	spec, err := k8s.ParseBlueGreen(f.d)
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, f)
	env.SetStartTime(baseTime)
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
	var scaledAt time.Time
	f.afterWrite = func(activity string) {
		if activity == "ScaleDownReplicaSet" && scaledAt.IsZero() {
			scaledAt = env.Now()
		}
	}
	until := baseTime.Add(20 * time.Minute)
	at(env, 10*time.Minute, func() {
		assertReplicasNow(t, f, "in the delay", map[string]int32{"nginx:v1": 10, "nginx:v2": 10})
		st := queryStatus(t, env)
		check(t, st.BlueGreen != nil && st.BlueGreen.Phase == contract.BlueGreenScaleDownDelay && st.BlueGreen.Until != nil && st.BlueGreen.Until.Equal(until),
			"in the delay: blueGreen %+v, want the carried end %s", st.BlueGreen, until)
	})
	env.ExecuteWorkflow(contract.WorkflowType, Input{Input: contract.Input{Namespace: testNS, Name: testName}, State: &State{
		StableHash: h1, Status: contract.Status{Namespace: testNS, Name: testName, Phase: "Progressing", CurrentRevision: 1},
		BlueGreen: &blueGreenState{Hash: h2, Revision: 2, Phase: contract.BlueGreenScaleDownDelay, PhaseWait: PhaseWait{WaitingFor: contract.WaitingForTimer},
			Promoted: true, Until: &until, Spec: spec},
		BlueGreenServices: &contract.BlueGreenServices{Active: "web", ActiveSelects: h2, Preview: "web-preview", PreviewSelects: h2},
	}})
	continuedAsNew(t, env)
	assertReplicas(t, f, map[string]int32{"nginx:v1": 0, "nginx:v2": 10})
	if scaledAt.Before(until) || scaledAt.After(until.Add(time.Minute)) {
		t.Errorf("old ReplicaSet scaled down at %s, want at the carried end of the delay %s", scaledAt, until)
	}
	if !f.hasEvent("OldReplicaSetScaledDown") {
		t.Error("no OldReplicaSetScaledDown event")
	}
}

// A blue-green Deployment with the notify annotation gets its phases as notifications: each
// phase a stepReached, the wait for promote a paused (with the rollout's revision), then
// promoted; completion is carried to the next run, as for steps.
func TestBlueGreenNotify(t *testing.T) {
	f, svcs, _, _ := blueGreenSetup(t, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"scaleDownDelaySeconds":600}`)
	f.d.Annotations[k8s.NotifyAnnotation] = `{"url":"https://hooks.example/x"}`
	env := newEnv(t, f)
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
	hook := &webhook{}
	hook.register(env)
	var promoted updateOutcome
	updateAt(env, 2*time.Hour, contract.UpdatePromote, nil, &promoted)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	next := continuedAsNew(t, env)
	if !promoted.completed || promoted.err != nil {
		t.Fatalf("promote: %+v, want completed", promoted)
	}
	var got []string
	for _, in := range hook.got {
		n := in.Notification
		got = append(got, n.Event)
		if n.Revision != 2 {
			t.Errorf("%s notification %+v, want revision 2", n.Event, n)
		}
		if n.Event == k8s.NotifyPaused && (n.Reason != "BlueGreenPhase" || !strings.Contains(n.Message, "paused until promoted")) {
			t.Errorf("paused notification %+v, want the Paused phase's", n)
		}
	}
	// Preview, Paused, (promote) Promoting, ScaleDownDelay, ScalingDown. Each is sent from a
	// goroutine: those of one workflow task (promoted and Promoting) arrive in either order.
	sort.Strings(got)
	if want := "paused,promoted,stepReached,stepReached,stepReached,stepReached"; strings.Join(got, ",") != want {
		t.Errorf("notifications %v, want %s in any order", got, want)
	}
	if c := next.State.Notifications; len(c) != 1 || c[0].Notification.Event != k8s.NotifyCompleted {
		t.Errorf("carried %+v, want completed", c)
	}
}

// An abort keeps the aborted ReplicaSet's pods for abortScaleDownDelaySeconds once the
// template is back on the stable one (the Services select the stable pods at once), on a
// durable timer, then scales it down; 0 scales it down at once.
func TestBlueGreenAbortDelay(t *testing.T) {
	for _, tt := range []struct {
		name  string
		delay string // abortScaleDownDelaySeconds, "" for the default (30)
		hold  time.Duration
	}{
		{name: "10 minutes", delay: `,"abortScaleDownDelaySeconds":600`, hold: 10 * time.Minute},
		{name: "default", hold: 30 * time.Second},
		{name: "none", delay: `,"abortScaleDownDelaySeconds":0`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, svcs, h1, _ := blueGreenSetup(t, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false`+tt.delay+`}`)
			env := newEnv(t, f)
			env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
			var aborted updateOutcome
			updateAt(env, time.Hour, contract.UpdateAbort, map[string]string{"reason": "preview looks wrong"}, &aborted)
			var downAt time.Duration
			var sawHold bool
			for i := time.Duration(1); i <= 30; i++ {
				when := time.Hour + i*30*time.Second
				at(env, when, func() {
					if downAt == 0 && f.replicasByImage()["nginx:v2"] == 0 {
						downAt = when - time.Hour
					}
					if st := queryStatus(t, env); st.AbortScaleDownAt != nil {
						sawHold = true
					}
				})
			}
			env.ExecuteWorkflow(contract.WorkflowType, input())
			continuedAsNew(t, env)
			if !aborted.completed || aborted.err != nil {
				t.Fatalf("abort: %+v, want completed", aborted)
			}
			assertReplicas(t, f, map[string]int32{"nginx:v1": 10, "nginx:v2": 0})
			if svcs.selects["web"] != h1 || svcs.selects["web-preview"] != h1 {
				t.Errorf("services %v, want both on %s", svcs.selects, h1)
			}
			// Sampled every 30 s after the abort: never before the hold ends, and within the fake
			// cluster's pace (1m30s without a hold) after it.
			if downAt <= tt.hold || downAt > tt.hold+2*time.Minute {
				t.Errorf("the aborted ReplicaSet was at 0 %s after the abort, want after %s and within 2m of it", downAt, tt.hold)
			}
			if sawHold != (tt.hold > 0) {
				t.Errorf("status abortScaleDownAt seen %t, want %t", sawHold, tt.hold > 0)
			}
			if tt.hold > 0 && !f.hasEvent("BlueGreenPhase") {
				t.Errorf("no BlueGreenPhase event")
			}
		})
	}
}

// A new template during the scale-down delay (v1 → v2 promoted, the active Service on v2, then
// kubectl set image v3) starts the next rollout from v2, which serves production: the active
// Service stays on v2 and v2 keeps its pods; v3 goes to the preview. Before, the rollout
// started from v1: the active Service went back to v1 and v2 was scaled to 0.
func TestBlueGreenNewTemplateInScaleDownDelay(t *testing.T) {
	ann := `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":3600,"autoPromotionSeconds":600}`
	f, svcs, h1, h2 := blueGreenSetup(t, ann)
	v3 := podTemplate("nginx:v3")
	h3 := k8s.PodTemplateHash(&v3, nil)
	env := newEnv(t, f)
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(svcs.SyncBlueGreen)
	at(env, 30*time.Minute, func() {
		st := queryStatus(t, env)
		check(t, st.BlueGreen != nil && st.BlueGreen.Phase == contract.BlueGreenScaleDownDelay && svcs.selects["web"] == h2,
			"auto-promoted: blueGreen %+v, want in the delay with the active Service on %s", st.BlueGreen, h2)
	})
	at(env, 40*time.Minute, func() {
		f.setImage("nginx:v3")
		env.SignalWorkflow(contract.SignalTrigger, nil)
	})
	at(env, 40*time.Minute+time.Second, func() {
		st := queryStatus(t, env)
		check(t, st.BlueGreen != nil && st.BlueGreen.StableHash == h2, "after v3: blueGreen %+v, want the rollout of %s from %s", st.BlueGreen, h3, h2)
		check(t, svcs.selects["web"] == h2, "after v3: services %v, want active on %s (v2)", svcs.selects, h2)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rs := range f.rss {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h2 && *rs.Spec.Replicas != 10 {
				t.Errorf("after v3: v2 at %d replicas, want 10 (it serves production)", *rs.Spec.Replicas)
			}
		}
	})
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if svcs.selects["web"] != h3 {
		t.Errorf("at the end: services %v, want active on %s (v3, auto-promoted)", svcs.selects, h3)
	}
	for _, sw := range svcs.switches {
		if sw.service == "web" && sw.hash == h1 && sw.at > 0 {
			t.Errorf("switches %+v: the active Service went back to v1 (%s)", svcs.switches, h1)
		}
	}
}

// TestBlueGreenNewTemplateAfterALostSwitch: the workflow task in which the active Service
// switched to the promoted template was lost (a worker killed before it completed), so the run
// that replays it never learnt of the switch, and a new template comes before the next sync
// (the e2e soak's bluegreen scenario, with a worker SIGKILLed beside it). The rollout of the new
// template starts from the promoted one, as the cluster has it (blue-green-promoted-live):
// production never goes back to the template before it.
func TestBlueGreenNewTemplateAfterALostSwitch(t *testing.T) {
	ann := `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":3600,"autoPromotionSeconds":600}`
	f, svcs, h1, h2 := blueGreenSetup(t, ann)
	v3 := podTemplate("nginx:v3")
	h3 := k8s.PodTemplateHash(&v3, nil)
	env := newEnv(t, f)
	lost := false
	env.OnActivity(a.SyncBlueGreen, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SyncBlueGreenInput) (activities.SyncBlueGreenResult, error) {
		res, err := svcs.SyncBlueGreen(ctx, in)
		if err == nil && !lost && slices.Contains(res.Switched, "web") && res.Selects["web"] == h2 {
			// The switch is made on the cluster; the task that learnt it is lost, and v3
			// comes before the task runs again.
			lost = true
			res.Selects["web"] = h1
			f.setImage("nginx:v3")
		}
		return res, err
	})
	endByDeletion(env, f, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowType, input())
	if !lost {
		t.Fatal("the active Service never switched to v2")
	}
	if svcs.selects["web"] != h3 {
		t.Errorf("at the end: services %v, want active on %s (v3, auto-promoted)", svcs.selects, h3)
	}
	for _, sw := range svcs.switches {
		if sw.service == "web" && sw.hash == h1 && sw.at > 0 {
			t.Errorf("switches %+v: the active Service went back to v1 (%s) after v2 served production", svcs.switches, h1)
		}
	}
}
