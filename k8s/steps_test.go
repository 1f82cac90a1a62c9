package k8s

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestParseSteps(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    []string
		wantErr []string
	}{
		{name: "absent", give: ""},
		{
			name: "argo vocabulary",
			give: `[{"setWeight":30},{"pause":{"duration":"30s"}},{"setWeight":60},{"pause":{}},{"pause":{"duration":5}},{"analysis":{"query":"up","min":0.95}}]`,
			want: []string{"setWeight 30", "pause 30s", "setWeight 60", "pause until promoted", "pause 5s", "analysis of up"},
		},
		{name: "not json", give: `{setWeight: 30}`, wantErr: []string{"is not a JSON list of steps"}},
		{name: "an object, not a list", give: `{"setWeight":30}`, wantErr: []string{"is not a JSON list of steps"}},
		{name: "every bad step named", give: `[{"setWeight":"x"},{"pause":{"duration":"soon"}}]`, wantErr: []string{"step 1: json: cannot unmarshal", `step 2: duration "soon"`}},
		{name: "unknown field", give: `[{"setWeigth":30}]`, wantErr: []string{`unknown field "setWeigth"`}},
		{name: "two kinds in a step", give: `[{"setWeight":30,"pause":{}}]`, wantErr: []string{"step 1 (setWeight): a step has exactly one of setWeight, pause, analysis, setHeaderRoute or setCanaryScale, this one has 2"}},
		{name: "empty step", give: `[{}]`, wantErr: []string{"step 1 (unknown)"}},
		{name: "weight above 100", give: `[{"setWeight":130}]`, wantErr: []string{"setWeight 130 is not between 0 and 100"}},
		{name: "weight goes back", give: `[{"setWeight":60},{"setWeight":30}]`, wantErr: []string{"step 2 (setWeight): setWeight 30 is lower than the weight before it (60)"}},
		{name: "bad duration", give: `[{"pause":{"duration":"soon"}}]`, wantErr: []string{`duration "soon"`}},
		{name: "negative duration", give: `[{"pause":{"duration":"-5s"}}]`, wantErr: []string{"is negative"}},
		{
			name: "bad analysis, every problem named",
			give: `[{"analysis":{"query":" ","interval":"10ms","count":2,"failureLimit":2,"onNoData":"ignore"}}]`,
			wantErr: []string{"query is empty", "neither min nor max", "interval 10ms is below 1s",
				"failureLimit 2 is not between 0 and count−1 (1)", `onNoData "ignore"`},
		},
		{name: "min above max", give: `[{"analysis":{"query":"up","min":2,"max":1}}]`, wantErr: []string{"min 2 is above max 1"}},
		{name: "trailing data", give: `[{"setWeight":30}] []`, wantErr: []string{"has data after the list"}},
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
			var got []string
			for _, s := range steps {
				got = append(got, s.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steps = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseStepsAnalysisDefaults(t *testing.T) {
	steps, err := ParseSteps(map[string]string{StepsAnnotation: `[{"analysis":{"query":"up","max":1}}]`})
	if err != nil {
		t.Fatal(err)
	}
	a := steps[0].Analysis
	if time.Duration(a.Interval) != 10*time.Second || a.Count != 1 || a.OnNoData != OnNoDataPause || a.FailureLimit != 0 {
		t.Errorf("defaults = %+v, want interval 10s, count 1, onNoData pause, failureLimit 0", a)
	}
}

func TestParseAutoRollback(t *testing.T) {
	for give, want := range map[string]bool{"true": true, "false": false} {
		if got, err := ParseAutoRollback(map[string]string{AutoRollbackAnnotation: give}); err != nil || got != want {
			t.Errorf("ParseAutoRollback(%q) = %t, %v; want %t", give, got, err, want)
		}
	}
	if _, err := ParseAutoRollback(map[string]string{AutoRollbackAnnotation: "yes"}); err == nil || !strings.Contains(err.Error(), `"yes"`) {
		t.Errorf("ParseAutoRollback(yes) error = %v, want one naming the value", err)
	}
}

func TestWeightReplicas(t *testing.T) {
	for _, tt := range []struct{ w, n, want int32 }{{30, 10, 3}, {25, 10, 3}, {1, 10, 1}, {0, 10, 0}, {100, 10, 10}, {50, 5, 3}, {33, 100, 33}} {
		if got := WeightReplicas(tt.w, tt.n); got != tt.want {
			t.Errorf("WeightReplicas(%d, %d) = %d, want %d", tt.w, tt.n, got, tt.want)
		}
	}
}

// A stepped rollout: the new ReplicaSet is capped at its step's share, old ones keep the rest.
func TestDecideCanary(t *testing.T) {
	tests := []struct {
		name                  string
		weight                int32
		hold                  bool
		giveNew, giveNewAvail int32 // -1: no new ReplicaSet yet
		giveOld, giveOldAvail int32
		chain                 bool
		wantSteps             []string
		wantReached           bool
		wantProgressingReason string
		wantNoRecheck         bool
	}{
		{
			// 10 replicas, 25%/25% (surge 3, unavailable 2), weight 30: new capped at 3, old
			// may go to 7 but availability allows 8 first (3 new pods not yet available).
			name: "first step creates the new ReplicaSet at its share", weight: 30,
			giveNew: -1, giveOld: 10, giveOldAvail: 10, chain: true,
			wantSteps:             []string{"CreateReplicaSet {new} 3", "ScaleDownReplicaSet {old} 10->8", "UpdateDeploymentStatus"},
			wantProgressingReason: NewReplicaSetReason,
		},
		{
			// New at 3, all available: old 8 → 7 (the rest), never lower.
			name: "old ones go down to the rest only", weight: 30,
			giveNew: 3, giveNewAvail: 3, giveOld: 8, giveOldAvail: 8, chain: true,
			wantSteps:   []string{"ScaleDownReplicaSet {old} 8->7"},
			wantReached: true, wantProgressingReason: ReplicaSetUpdatedReason,
		},
		{
			name: "at the step: nothing moves", weight: 30,
			giveNew: 3, giveNewAvail: 3, giveOld: 7, giveOldAvail: 7, chain: true,
			wantReached: true,
		},
		{
			// Not reached while the new pods are not all available.
			name: "new pods not available yet", weight: 30,
			giveNew: 3, giveNewAvail: 2, giveOld: 7, giveOldAvail: 7, chain: true,
		},
		{
			// The next step, 60%: new 3 → 6 within the surge (7 + 6 = 13), then old 7 → 5:
			// 13 − 8 − (6 − 3 available) = 2 may go, above the rest (4).
			name: "next weight", weight: 60,
			giveNew: 3, giveNewAvail: 3, giveOld: 7, giveOldAvail: 7, chain: true,
			wantSteps:             []string{"ScaleUpReplicaSet {new} 3->6", "ScaleDownReplicaSet {old} 7->5", "UpdateDeploymentStatus"},
			wantProgressingReason: ReplicaSetUpdatedReason,
		},
		{
			// Held at a pause: the Progressing condition says why, and no deadline recheck.
			name: "held at a pause", weight: 30, hold: true,
			giveNew: 3, giveNewAvail: 3, giveOld: 7, giveOldAvail: 7, chain: true,
			wantSteps:   []string{"UpdateDeploymentStatus"},
			wantReached: true, wantProgressingReason: CanaryPausedReason, wantNoRecheck: true,
		},
		{
			// A step never moves replicas back: new already at 5 stays there at weight 30.
			name: "new above the weight keeps its replicas", weight: 30,
			giveNew: 5, giveNewAvail: 5, giveOld: 5, giveOldAvail: 5, chain: true,
			wantReached: true,
		},
		{
			// Unchained, as upstream: the create, then one move.
			name: "unchained", weight: 50,
			giveNew: -1, giveOld: 10, giveOldAvail: 10,
			wantSteps:             []string{"CreateReplicaSet {new} 3", "ScaleDownReplicaSet {old} 10->8", "UpdateDeploymentStatus"},
			wantProgressingReason: NewReplicaSetReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "1"
			d.Status = settledStatus(d, 10)
			d.Generation = 2
			old := ownedRS(d, "nginx:1.0", 1, tt.giveOld, tt.giveOldAvail, ago(time.Hour))
			rss := []*appsv1.ReplicaSet{old}
			if tt.giveNew >= 0 {
				n := ownedRS(d, "nginx:1.1", 2, tt.giveNew, tt.giveNewAvail, ago(time.Minute))
				rss = append(rss, n)
				d.Annotations[RevisionAnnotation] = "2"
				d.Status.ObservedGeneration = 2
				d.Status.Replicas = tt.giveNew + tt.giveOld
				d.Status.UpdatedReplicas = tt.giveNew
				d.Status.AvailableReplicas = tt.giveNewAvail + tt.giveOldAvail
				d.Status.ReadyReplicas = d.Status.AvailableReplicas
				d.Status.UnavailableReplicas = max(10-d.Status.AvailableReplicas, 0)
				SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Minute)))
			}
			hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
			canary := &Canary{Hash: hash, Weight: tt.weight, Hold: tt.hold, Message: "Canary step 2 of 4: pause until promoted"}
			plan := decideChained(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{Canary: canary}, tt.chain)
			newName := rsName(d, "nginx:1.1")
			if got, want := describePlan(plan), expand(tt.wantSteps, newName, old.Name); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if plan.CanaryReached != tt.wantReached {
				t.Errorf("CanaryReached = %t, want %t", plan.CanaryReached, tt.wantReached)
			}
			if tt.wantProgressingReason != "" {
				if c := GetCondition(plan.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != tt.wantProgressingReason {
					t.Errorf("Progressing = %+v, want reason %s", c, tt.wantProgressingReason)
				} else if tt.hold && (c.Status != corev1.ConditionUnknown || c.Message != canary.Message) {
					t.Errorf("Progressing = %+v, want Unknown with the step's message", c)
				}
			}
			if tt.wantNoRecheck && plan.RecheckAt != nil {
				t.Errorf("RecheckAt = %v while held, want none (no progress deadline)", plan.RecheckAt)
			}
			if plan.Phase != PhaseProgressing {
				t.Errorf("Phase = %s, want %s", plan.Phase, PhaseProgressing)
			}
		})
	}
}

// A hold that ends turns the condition to CanaryResumed, so the deadline counts from then; a
// hold past the progress deadline never times out.
func TestDecideCanaryHoldAndDeadline(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Spec.ProgressDeadlineSeconds = ptrTo(int32(60))
	d.Annotations[RevisionAnnotation] = "2"
	d.Generation = 2
	old := ownedRS(d, "nginx:1.0", 1, 7, 7, ago(time.Hour))
	nw := ownedRS(d, "nginx:1.1", 2, 3, 3, ago(time.Hour))
	d.Status = settledStatus(d, 10)
	d.Status.UpdatedReplicas = 3
	held := NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, CanaryPausedReason, "waiting", ago(30*time.Minute))
	SetCondition(&d.Status, held)
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	snap := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, nw}}

	plan := decide(t, snap, Request{Canary: &Canary{Hash: hash, Weight: 30, Hold: true, Message: "waiting"}})
	if plan.Phase != PhaseProgressing {
		t.Errorf("held 30 minutes past a 60s deadline: phase %s, want Progressing", plan.Phase)
	}
	plan = decide(t, snap, Request{Canary: &Canary{Hash: hash, Weight: 60}})
	c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != CanaryResumedReason && c.Reason != ReplicaSetUpdatedReason {
		t.Fatalf("after the hold: Progressing %+v, want CanaryResumed or ReplicaSetUpdated", c)
	}
	if !c.LastUpdateTime.Time.Equal(planNow) {
		t.Errorf("after the hold: lastUpdateTime %v, want now (%v): the deadline counts from the resume", c.LastUpdateTime, planNow)
	}
	if plan.RecheckAt == nil || !plan.RecheckAt.Time.Equal(planNow.Add(61*time.Second)) {
		t.Errorf("RecheckAt = %v, want now + 61s", plan.RecheckAt)
	}
}

// A canary for another template decides nothing: the workflow weighs the new template first.
func TestDecideCanaryStale(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Status = settledStatus(d, 10)
	old := ownedRS(d, "nginx:1.0", 1, 10, 10, ago(time.Hour))
	plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old}}, Request{Canary: &Canary{Hash: "other", Weight: 0}})
	if !plan.CanaryStale || len(plan.Steps) != 0 {
		t.Errorf("plan = %+v, want CanaryStale and no steps", plan)
	}
}

// Freeze (an invalid steps annotation) leaves the Deployment as it is: no new ReplicaSet.
func TestDecideCanaryFreeze(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Annotations[RevisionAnnotation] = "1"
	d.Status = settledStatus(d, 10)
	d.Generation = 2
	old := ownedRS(d, "nginx:1.0", 1, 10, 10, ago(time.Hour))
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old}}, Request{Canary: &Canary{Hash: hash, Hold: true, Freeze: true, Message: "invalid steps"}})
	for _, s := range plan.Steps {
		if s.Kind != StepUpdateStatus {
			t.Errorf("frozen: step %s, want only a status write", describe(s))
		}
	}
	if c := GetCondition(plan.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != CanaryPausedReason || c.Message != "invalid steps" {
		t.Errorf("Progressing = %+v, want CanaryPaused naming the problem", c)
	}
}

// ParseSteps runs in workflow code (its messages are recorded): the same annotation gives the
// same steps and the same error, every time.
func TestParseStepsIsDeterministic(t *testing.T) {
	bad := map[string]string{StepsAnnotation: `[{"analysis":{"query":"","min":2,"max":1,"interval":"1ms","count":2,"failureLimit":5,"onNoData":"x"}},{"setWeight":-1},{"pause":{"duration":"x"}}]`}
	_, first := ParseSteps(bad)
	if first == nil {
		t.Fatal("want an error")
	}
	for range 200 {
		if _, err := ParseSteps(bad); err == nil || err.Error() != first.Error() {
			t.Fatalf("error %q, then %q", first, err)
		}
	}
}

// A stepped rollout paused at its step (kubectl rollout pause) keeps its sizes; without a step
// upstream's paused scale gives the surge room to the largest ReplicaSet.
func TestDecideCanaryPaused(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Annotations[RevisionAnnotation] = "2"
	d.Generation = 2
	d.Spec.Paused = true
	old := ownedRS(d, "nginx:1.0", 1, 7, 7, ago(time.Hour))
	nw := ownedRS(d, "nginx:1.1", 2, 3, 3, ago(time.Minute))
	d.Status = settledStatus(d, 10)
	d.Status.UpdatedReplicas = 3
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	snap := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, nw}}
	plan := decide(t, snap, Request{Canary: &Canary{Hash: hash, Weight: 30, Hold: true, Message: "held"}})
	for _, s := range plan.Steps {
		if s.Kind == StepScaleUp || s.Kind == StepScaleDown {
			t.Errorf("paused stepped rollout: %s, want no scaling", describe(s))
		}
	}
	plan = decide(t, snap, Request{})
	if got := describePlan(plan); len(got) == 0 || !strings.Contains(got[0], "7->10") {
		t.Errorf("paused without a step: %q, want upstream's scale of the largest to 10", got)
	}
}

func TestStepShares(t *testing.T) {
	tests := []struct {
		name                     string
		giveWeight, giveReplicas int32
		giveMaxSurge             int32
		wantNew, wantOld         int32
	}{
		{name: "ceil, rest on the old ones", giveWeight: 30, giveReplicas: 10, giveMaxSurge: 3, wantNew: 3, wantOld: 7},
		{name: "ceil of 2.1", giveWeight: 70, giveReplicas: 3, giveMaxSurge: 0, wantNew: 2, wantOld: 1},
		{name: "99% keeps a surge stable pod", giveWeight: 99, giveReplicas: 10, giveMaxSurge: 1, wantNew: 10, wantOld: 1},
		{name: "99% without surge gives one back", giveWeight: 99, giveReplicas: 10, giveMaxSurge: 0, wantNew: 9, wantOld: 1},
		{name: "1 replica with surge: one each", giveWeight: 20, giveReplicas: 1, giveMaxSurge: 1, wantNew: 1, wantOld: 1},
		{name: "1 replica without surge: ceil", giveWeight: 20, giveReplicas: 1, giveMaxSurge: 0, wantNew: 1, wantOld: 0},
		{name: "100%", giveWeight: 100, giveReplicas: 4, giveMaxSurge: 1, wantNew: 4, wantOld: 0},
		{name: "0%", giveWeight: 0, giveReplicas: 4, giveMaxSurge: 1, wantNew: 0, wantOld: 4},
		{name: "no replicas", giveWeight: 50, giveReplicas: 0, giveMaxSurge: 1, wantNew: 0, wantOld: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotNew, gotOld := StepShares(tt.giveWeight, tt.giveReplicas, tt.giveMaxSurge)
			if gotNew != tt.wantNew || gotOld != tt.wantOld {
				t.Errorf("StepShares(%d, %d, %d) = %d, %d; want %d, %d", tt.giveWeight, tt.giveReplicas, tt.giveMaxSurge, gotNew, gotOld, tt.wantNew, tt.wantOld)
			}
		})
	}
}

// A step in force is never Complete, however the counts read: 1 replica at 20% (maxSurge 0,
// so the canary takes the one pod) or any at 100%, all available, waits for the next step.
// Without a step, the same counts are Complete.
func TestDecideCanaryCountsCompleteWhileStepHolds(t *testing.T) {
	tests := []struct {
		name         string
		giveReplicas int32
		giveCanary   *Canary // Hash filled in
		wantPhase    Phase
	}{
		{name: "1 replica at 20%, held", giveReplicas: 1, giveCanary: &Canary{Weight: 20, Hold: true, Message: "paused"}, wantPhase: PhaseProgressing},
		{name: "4 replicas at 100%, reaching", giveReplicas: 4, giveCanary: &Canary{Weight: 100}, wantPhase: PhaseProgressing},
		{name: "4 replicas at 100%, analysis holds", giveReplicas: 4, giveCanary: &Canary{Weight: 100, Hold: true, Message: "measuring"}, wantPhase: PhaseProgressing},
		{name: "every step passed", giveReplicas: 4, wantPhase: PhaseComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := withFenceposts(webDeployment(tt.giveReplicas, "nginx:1.1"), "0", "1")
			d.Generation = 2
			d.Annotations[RevisionAnnotation] = "2"
			d.Status = settledStatus(d, tt.giveReplicas)
			d.Status.ObservedGeneration = 2
			SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Minute)))
			old := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(time.Hour))
			nw := ownedRS(d, "nginx:1.1", 2, tt.giveReplicas, tt.giveReplicas, ago(time.Minute))
			req := Request{}
			if tt.giveCanary != nil {
				c := *tt.giveCanary
				c.Hash = PodTemplateHash(&d.Spec.Template, nil)
				req.Canary = &c
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, nw}}, req)
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			c := GetCondition(plan.Status, appsv1.DeploymentProgressing)
			if gotComplete := c != nil && c.Reason == NewRSAvailableReason; gotComplete != (tt.wantPhase == PhaseComplete) {
				t.Errorf("Progressing = %+v, want NewReplicaSetAvailable only once complete", c)
			}
		})
	}
}

// An old ReplicaSet scaled down by hand during a 30% step: the new one stays at its share (3,
// not 10 − 4 = 6), and the old one is filled back to the rest, within maxSurge.
func TestDecideCanaryOldScaledByHand(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Generation = 2
	d.Annotations[RevisionAnnotation] = "2"
	d.Status = settledStatus(d, 10)
	d.Status.ObservedGeneration = 2
	old := ownedRS(d, "nginx:1.0", 1, 4, 4, ago(time.Hour))
	nw := ownedRS(d, "nginx:1.1", 2, 3, 3, ago(time.Minute))
	c := &Canary{Hash: PodTemplateHash(&d.Spec.Template, nil), Weight: 30}
	plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, nw}}, Request{Canary: c})
	want := []string{"ScaleUpReplicaSet " + old.Name + " 4->7", "UpdateDeploymentStatus"}
	if got := describePlan(plan); !reflect.DeepEqual(got, want) {
		t.Errorf("steps = %q, want %q", got, want)
	}
}

// TestDecideCanaryScaling: a change of replicas while a step holds. Upstream's proportional
// scaling shares replicas + maxSurge first (within the surge), then the step's shares apply at
// the new size: 10 replicas at 30% (new 3, old 7) scaled to 20 is old 19 and new 6 (25 = 20 +
// maxSurge 5), then old 14; scaled to 4, old 3 and new 2 (5 = 4 + 1), then old 2. The step is
// reached again once the new share is available, and no write takes the total above the
// larger of the 10 pods before and replicas + maxSurge.
func TestDecideCanaryScaling(t *testing.T) {
	tests := []struct {
		to    int32
		syncs [][]string
	}{
		{to: 20, syncs: [][]string{
			{"ScaleUpReplicaSet {old} 7->19", "ScaleUpReplicaSet {new} 3->6", "UpdateDeploymentStatus"},
			{"ScaleDownReplicaSet {old} 19->14", "UpdateDeploymentStatus"},
			{"UpdateDeploymentStatus"},
		}},
		{to: 4, syncs: [][]string{
			{"ScaleDownReplicaSet {old} 7->3", "ScaleDownReplicaSet {new} 3->2", "UpdateDeploymentStatus"},
			{"ScaleDownReplicaSet {old} 3->2", "UpdateDeploymentStatus"},
			{"UpdateDeploymentStatus"},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.to), func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			d.Status = settledStatus(d, 10)
			d.Generation = 3
			old := ownedRS(d, "nginx:1.0", 1, 7, 7, ago(time.Hour))
			rss := []*appsv1.ReplicaSet{old, ownedRS(d, "nginx:1.1", 2, 3, 3, ago(time.Minute))}
			d.Spec.Replicas = ptrTo(tt.to)
			c := &Canary{Hash: PodTemplateHash(&d.Spec.Template, nil), Weight: 30, Hold: true, Message: "paused"}
			limit := max(10, tt.to+MaxSurge(d))
			for i, want := range tt.syncs {
				plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{Canary: c})
				if got, want := describePlan(plan), expand(want, rsName(d, "nginx:1.1"), old.Name); !reflect.DeepEqual(got, want) {
					t.Fatalf("sync %d: steps = %q, want %q", i, got, want)
				}
				if want := i > 0; plan.CanaryReached != want {
					t.Errorf("sync %d: CanaryReached = %t, want %t", i, plan.CanaryReached, want)
				}
				// Apply the writes in order, every pod available at once.
				for _, s := range plan.Steps {
					if s.ReplicaSet == nil {
						continue
					}
					var total int32
					for j, rs := range rss {
						if rs.Name == s.ReplicaSet.Name {
							n := s.ReplicaSet.DeepCopy()
							size := rsReplicas(n)
							n.Status = appsv1.ReplicaSetStatus{Replicas: size, ReadyReplicas: size, AvailableReplicas: size}
							rss[j] = n
						}
						total += rsReplicas(rss[j])
					}
					if total > limit {
						t.Errorf("sync %d: %d pods after %s, above %d", i, total, describe(s), limit)
					}
				}
			}
		})
	}
}
