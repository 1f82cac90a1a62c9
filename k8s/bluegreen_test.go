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

func TestParseBlueGreen(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		other   map[string]string
		recreat bool
		want    func(*testing.T, *BlueGreenSpec)
		wantErr []string
	}{
		{name: "absent", give: "-", want: func(t *testing.T, s *BlueGreenSpec) {
			if s != nil {
				t.Errorf("spec = %+v, want nil", s)
			}
		}},
		{
			name: "defaults, as Argo's", give: `{"activeService":"web"}`,
			want: func(t *testing.T, s *BlueGreenSpec) {
				if !s.AutoPromotes() || s.ScaleDownDelay() != 30*time.Second || s.AbortScaleDownDelay() != 30*time.Second || s.PreviewReplicas(10) != 10 || s.PreviewService != "" {
					t.Errorf("defaults: autoPromotes %t, delay %s, abort delay %s, preview replicas %d, preview %q; want true, 30s, 30s, 10, none",
						s.AutoPromotes(), s.ScaleDownDelay(), s.AbortScaleDownDelay(), s.PreviewReplicas(10), s.PreviewService)
				}
			},
		},
		{
			name: "every field",
			give: `{"activeService":"web","previewService":"web-preview","autoPromotionSeconds":20,"scaleDownDelaySeconds":0,"abortScaleDownDelaySeconds":5,"previewReplicaCount":2,
				"prePromotionAnalysis":{"query":"up","min":1},"postPromotionAnalysis":{"web":{"url":"http://m/x","jsonPath":"$.v"},"max":0.05,"count":3,"failureLimit":1}}`,
			want: func(t *testing.T, s *BlueGreenSpec) {
				if s.ScaleDownDelay() != 0 || s.AbortScaleDownDelay() != 5*time.Second || s.PreviewReplicas(10) != 2 || s.PreviewReplicas(1) != 1 || s.AutoPromotionSeconds != 20 || !s.AutoPromotes() {
					t.Errorf("spec = %+v", s)
				}
				// The analyses take the steps' defaults.
				if a := s.PrePromotionAnalysis; a.Count != 1 || time.Duration(a.Interval) != 10*time.Second || a.OnNoData != OnNoDataPause {
					t.Errorf("prePromotionAnalysis = %+v, want count 1, interval 10s, onNoData pause", a)
				}
				if a := s.PostPromotionAnalysis; a.Provider() != ProviderWeb || a.Count != 3 || a.FailureLimit != 1 {
					t.Errorf("postPromotionAnalysis = %+v", a)
				}
			},
		},
		{name: "not json", give: `{activeService: web}`, wantErr: []string{"is not a JSON object like"}},
		{name: "unknown field", give: `{"activeService":"web","previewServce":"p"}`, wantErr: []string{`unknown field "previewServce"`}},
		{name: "trailing data", give: `{"activeService":"web"} {}`, wantErr: []string{"has data after the object"}},
		{
			name: "every problem named",
			give: `{"previewService":"Web_Preview","autoPromotionSeconds":-1,"scaleDownDelaySeconds":100000,"abortScaleDownDelaySeconds":-2,"previewReplicaCount":0,
				"prePromotionAnalysis":{"query":"up"},"postPromotionAnalysis":{"query":"","max":1}}`,
			wantErr: []string{"activeService is missing", `previewService "Web_Preview" is not a valid Service name`,
				"autoPromotionSeconds -1 is not between 0 and 86400", "scaleDownDelaySeconds 100000 is not between 0 and 86400",
				"abortScaleDownDelaySeconds -2 is not between 0 and 86400",
				"previewReplicaCount 0 is below 1", "prePromotionAnalysis: neither min nor max is set", "postPromotionAnalysis: query is empty"},
		},
		{name: "same services", give: `{"activeService":"web","previewService":"web"}`, wantErr: []string{`activeService and previewService are both "web"`}},
		{
			name: "seconds without automatic promotion", give: `{"activeService":"web","autoPromotionEnabled":false,"autoPromotionSeconds":30}`,
			wantErr: []string{"autoPromotionSeconds is set but autoPromotionEnabled is false"},
		},
		{
			name: "with steps", give: `{"activeService":"web"}`, other: map[string]string{StepsAnnotation: `[{"setWeight":20}]`},
			wantErr: []string{"temporal-rollout.io/steps is set too: a Deployment rolls out either in steps or blue-green, not both"},
		},
		{
			name: "with traffic", give: `{"activeService":"web"}`, other: map[string]string{TrafficAnnotation: `{}`},
			wantErr: []string{"temporal-rollout.io/traffic is set too"},
		},
		{name: "recreate", give: `{"activeService":"web"}`, recreat: true, wantErr: []string{"blue-green needs the RollingUpdate strategy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(3, "nginx:1.1")
			if tt.give != "-" {
				d.Annotations[BlueGreenAnnotation] = tt.give
			}
			for k, v := range tt.other {
				d.Annotations[k] = v
			}
			if tt.recreat {
				useRecreate(d)
			}
			spec, err := ParseBlueGreen(d)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseBlueGreen = %+v, want an error", spec)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBlueGreen: %v", err)
			}
			tt.want(t, spec)
		})
	}
}

// TestDecideBlueGreen: the new ReplicaSet goes straight to its size beside the old one, which
// keeps its pods; reached once all of it is available; a hold says why in the Progressing
// condition; without the Canary (the delay passed) upstream scales the old one to 0.
func TestDecideBlueGreen(t *testing.T) {
	tests := []struct {
		name                  string
		giveNew, giveNewAvail int32 // -1: no new ReplicaSet yet
		giveOld               int32
		preview               int32
		hold                  bool
		release               bool
		wantSteps             []string
		wantReached           bool
		wantReason            string
		wantPhase             Phase
	}{
		{
			// 10 replicas, maxSurge 25% (3): blue-green is not bounded by the surge.
			name: "new ReplicaSet created at full size", giveNew: -1, giveOld: 10,
			wantSteps:  []string{"CreateReplicaSet {new} 10", "UpdateDeploymentStatus"},
			wantReason: NewReplicaSetReason, wantPhase: PhaseProgressing,
		},
		{
			name: "previewReplicaCount", giveNew: -1, giveOld: 10, preview: 2,
			wantSteps:  []string{"CreateReplicaSet {new} 2", "UpdateDeploymentStatus"},
			wantReason: NewReplicaSetReason, wantPhase: PhaseProgressing,
		},
		{
			// Promoted after a preview of 2: the new one goes to 10, the old one stays.
			name: "promotion scales a smaller preview up", giveNew: 2, giveNewAvail: 2, giveOld: 10,
			wantSteps:  []string{"ScaleUpReplicaSet {new} 2->10", "UpdateDeploymentStatus"},
			wantReason: ReplicaSetUpdatedReason, wantPhase: PhaseProgressing,
		},
		{
			name: "not all available: not reached", giveNew: 10, giveNewAvail: 9, giveOld: 10,
			wantSteps: []string{"UpdateDeploymentStatus"}, wantPhase: PhaseProgressing,
		},
		{name: "all available: reached, nothing moves", giveNew: 10, giveNewAvail: 10, giveOld: 10, wantReached: true, wantPhase: PhaseProgressing},
		{
			// Held (paused, analysis, scale-down delay): not complete, no deadline.
			name: "held", giveNew: 10, giveNewAvail: 10, giveOld: 10, hold: true,
			wantSteps: []string{"UpdateDeploymentStatus"}, wantReached: true, wantReason: CanaryPausedReason, wantPhase: PhaseProgressing,
		},
		{
			// The delay passed: upstream's rolling update, 20 − (10 − 2) − 0 = 12 may go: old → 0.
			name: "released: the old one goes to 0 in one move", giveNew: 10, giveNewAvail: 10, giveOld: 10, release: true,
			wantSteps: []string{"ScaleDownReplicaSet {old} 10->0"}, wantPhase: PhaseProgressing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Spec.ProgressDeadlineSeconds = ptrTo(int32(600))
			d.Annotations[RevisionAnnotation] = "1"
			d.Status = settledStatus(d, 10)
			d.Generation = 2
			old := ownedRS(d, "nginx:1.0", 1, tt.giveOld, tt.giveOld, ago(time.Hour))
			rss := []*appsv1.ReplicaSet{old}
			if tt.giveNew >= 0 {
				rss = append(rss, ownedRS(d, "nginx:1.1", 2, tt.giveNew, tt.giveNewAvail, ago(time.Minute)))
				d.Annotations[RevisionAnnotation] = "2"
				d.Status.ObservedGeneration = 2
				d.Status.Replicas = tt.giveNew + tt.giveOld
				d.Status.UpdatedReplicas = tt.giveNew
				d.Status.AvailableReplicas = tt.giveNewAvail + tt.giveOld
				d.Status.ReadyReplicas = d.Status.AvailableReplicas
				SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Minute)))
			}
			hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
			c := &Canary{Hash: hash, BlueGreen: true, BlueGreenReplicas: tt.preview, Hold: tt.hold, Message: "Blue-green: preview ready, paused until promoted"}
			if tt.release {
				c = nil
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{Canary: c})
			if got, want := describePlan(plan), expand(tt.wantSteps, rsName(d, "nginx:1.1"), old.Name); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if plan.CanaryReached != tt.wantReached {
				t.Errorf("CanaryReached = %t, want %t", plan.CanaryReached, tt.wantReached)
			}
			if plan.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s", plan.Phase, tt.wantPhase)
			}
			if tt.wantReason != "" {
				if cond := GetCondition(plan.Status, appsv1.DeploymentProgressing); cond == nil || cond.Reason != tt.wantReason {
					t.Errorf("Progressing = %+v, want reason %s", cond, tt.wantReason)
				}
			}
			if tt.hold && plan.RecheckAt != nil {
				t.Errorf("RecheckAt = %v while held, want none", plan.RecheckAt)
			}
		})
	}
}

// TestDecideBlueGreenScaling: a change of replicas in the middle of a blue-green rollout scales
// the stable ReplicaSet (the active Service's, or the warm one after promotion) to replicas
// and the new one to its blue-green size, as Argo Rollouts' scaleBlueGreen; a ReplicaSet that
// neither Service selects keeps its replicas. Every active one gets the new desired-replicas
// annotation, so the next sync is the rollout's again, with nothing to scale. Without
// StableHash (a run recorded before the blue-green-scale change), upstream's proportional
// scaling, which took the stable stack down on a scale-up.
func TestDecideBlueGreenScaling(t *testing.T) {
	tests := []struct {
		name       string
		to         int32 // the Deployment's new replicas (was 10)
		giveNew    int32 // the new ReplicaSet's size before the change (all available)
		preview    int32 // Canary.BlueGreenReplicas
		abandoned  int32 // > 0: a third ReplicaSet, an earlier preview never promoted, at this size
		legacy     bool  // no StableHash
		wantSteps  []string
		wantStable int32 // the stable ReplicaSet's size after the plan
	}{
		{
			name: "scaled up while paused before promotion", to: 14, giveNew: 10,
			wantSteps:  []string{"ScaleUpReplicaSet {old} 10->14", "ScaleUpReplicaSet {new} 10->14", "UpdateDeploymentStatus"},
			wantStable: 14,
		},
		{
			name: "scaled down while paused before promotion", to: 6, giveNew: 10,
			wantSteps:  []string{"ScaleDownReplicaSet {old} 10->6", "ScaleDownReplicaSet {new} 10->6", "UpdateDeploymentStatus"},
			wantStable: 6,
		},
		{
			// previewReplicaCount 2: the preview keeps 2 (only its annotation changes).
			name: "previewReplicaCount keeps the preview's size", to: 14, giveNew: 2, preview: 2,
			wantSteps:  []string{"ScaleUpReplicaSet {old} 10->14", "UpdateReplicaSet {new} 2->2", "UpdateDeploymentStatus"},
			wantStable: 14,
		},
		{
			name: "previewReplicaCount above the new replicas", to: 1, giveNew: 2, preview: 2,
			wantSteps:  []string{"ScaleDownReplicaSet {old} 10->1", "ScaleDownReplicaSet {new} 2->1", "UpdateDeploymentStatus"},
			wantStable: 1,
		},
		{
			// 13 = 10 + maxSurge 3 is gone: the earlier preview keeps its 10 pods, the two that
			// the Services select follow replicas.
			name: "an earlier preview keeps its replicas", to: 12, giveNew: 10, abandoned: 10,
			wantSteps:  []string{"ScaleUpReplicaSet {old} 10->12", "UpdateReplicaSet {abandoned} 10->10", "ScaleUpReplicaSet {new} 10->12", "UpdateDeploymentStatus"},
			wantStable: 12,
		},
		{
			name: "legacy: proportional scaling shrinks the stable stack", to: 14, giveNew: 10, legacy: true,
			wantSteps:  []string{"ScaleDownReplicaSet {old} 10->4", "ScaleUpReplicaSet {new} 10->14", "UpdateDeploymentStatus"},
			wantStable: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := thirdRevision("nginx:1.1")
			old := ownedRS(d, "nginx:1.0", 1, 10, 10, ago(time.Hour))
			rss := []*appsv1.ReplicaSet{old}
			var abandonedName string
			if tt.abandoned > 0 {
				a := ownedRS(d, "nginx:1.05", 2, tt.abandoned, tt.abandoned, ago(30*time.Minute))
				abandonedName = a.Name
				rss = append(rss, a)
			}
			rss = append(rss, ownedRS(d, "nginx:1.1", 3, tt.giveNew, tt.giveNew, ago(time.Minute)))
			d.Spec.Replicas = ptrTo(tt.to)
			c := &Canary{Hash: PodTemplateHash(&d.Spec.Template, nil), BlueGreen: true, BlueGreenReplicas: tt.preview, Hold: true, Message: "Blue-green: preview ready, paused until promoted"}
			if !tt.legacy {
				c.StableHash = old.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{Canary: c})
			want := expand(tt.wantSteps, rsName(d, "nginx:1.1"), old.Name)
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "{abandoned}", abandonedName)
			}
			if got := describePlan(plan); !reflect.DeepEqual(got, want) {
				t.Fatalf("steps = %q, want %q", got, want)
			}
			// Apply the plan, all pods available, and sync again.
			next := make([]*appsv1.ReplicaSet, 0, len(rss))
			for _, rs := range rss {
				for _, s := range plan.Steps {
					if s.ReplicaSet != nil && s.ReplicaSet.Name == rs.Name {
						rs = s.ReplicaSet.DeepCopy()
						n := rsReplicas(rs)
						rs.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: n, AvailableReplicas: n}
					}
				}
				if rs.Name == old.Name && rsReplicas(rs) != tt.wantStable {
					t.Errorf("stable ReplicaSet at %d, want %d", rsReplicas(rs), tt.wantStable)
				}
				if got := rs.Annotations[DesiredReplicasAnnotation]; got != fmt.Sprint(tt.to) {
					t.Errorf("%s: desired-replicas %s, want %d", rs.Name, got, tt.to)
				}
				next = append(next, rs)
			}
			if tt.legacy {
				return
			}
			for _, s := range decide(t, Snapshot{Deployment: d, ReplicaSets: next}, Request{Canary: c}).Steps {
				if s.ReplicaSet == nil {
					continue
				}
				// The earlier preview goes to 0 now that the new one serves fully
				// (TestDecideBlueGreenEarlierPreview); nothing else moves.
				if s.ReplicaSet.Name != abandonedName || rsReplicas(s.ReplicaSet) != 0 {
					t.Errorf("the sync after the scaling writes %s, want no ReplicaSet write but the earlier preview's to 0", describe(s))
				}
			}
		})
	}
}

// TestDecideBlueGreenEarlierPreview: a third template arrives while the second was never
// promoted. The earlier preview keeps its pods until the new ReplicaSet serves fully (the
// preview Service may still select it), then goes to 0; the stable one keeps its replicas.
// Without StableHash (a run recorded before blue-green-scale) it keeps them all along.
func TestDecideBlueGreenEarlierPreview(t *testing.T) {
	tests := []struct {
		name      string
		newAvail  int32
		legacy    bool
		wantSteps []string
	}{
		{name: "the new one serves fully: the earlier preview goes to 0", newAvail: 10,
			wantSteps: []string{"ScaleDownReplicaSet {earlier} 10->0", "UpdateDeploymentStatus"}},
		{name: "not yet: the earlier preview keeps its pods", newAvail: 9,
			wantSteps: []string{"UpdateDeploymentStatus"}},
		{name: "legacy: kept", newAvail: 10, legacy: true,
			wantSteps: []string{"UpdateDeploymentStatus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := thirdRevision("nginx:1.2")
			stable := ownedRS(d, "nginx:1.0", 1, 10, 10, ago(time.Hour))
			earlier := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(30*time.Minute))
			rss := []*appsv1.ReplicaSet{stable, earlier, ownedRS(d, "nginx:1.2", 3, 10, tt.newAvail, ago(time.Minute))}
			c := &Canary{Hash: PodTemplateHash(&d.Spec.Template, nil), BlueGreen: true, Hold: true, Message: "Blue-green: preview ready, paused until promoted"}
			if !tt.legacy {
				c.StableHash = stable.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{Canary: c})
			want := expand(tt.wantSteps, rsName(d, "nginx:1.2"), stable.Name)
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "{earlier}", earlier.Name)
			}
			if got := describePlan(plan); !reflect.DeepEqual(got, want) {
				t.Errorf("steps = %q, want %q", got, want)
			}
			if plan.CanaryReached != (tt.newAvail == 10) {
				t.Errorf("CanaryReached = %t, want %t", plan.CanaryReached, tt.newAvail == 10)
			}
		})
	}
}

// thirdRevision is a 10-replica Deployment at revision 3 with image, its status that of a
// rollout that completed at 10.
func thirdRevision(image string) *appsv1.Deployment {
	d := webDeployment(10, image)
	d.Annotations[RevisionAnnotation] = "3"
	d.Status = settledStatus(d, 10)
	d.Generation = 3
	return d
}

func TestServesFully(t *testing.T) {
	d := webDeployment(3, "nginx:1.1")
	full := ownedRS(d, "nginx:1.0", 1, 3, 3, ago(time.Hour))
	partial := ownedRS(d, "nginx:1.1", 2, 3, 2, ago(time.Minute))
	empty := ownedRS(d, "nginx:1.2", 3, 0, 0, ago(time.Minute))
	rss := []*appsv1.ReplicaSet{full, partial, empty}
	hash := func(rs *appsv1.ReplicaSet) string { return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] }
	scaleTo := func(rs *appsv1.ReplicaSet, kind StepKind, n int32) Plan {
		c := rs.DeepCopy()
		c.Spec.Replicas = &n
		return Plan{Steps: []Step{{Kind: kind, ReplicaSet: c}}}
	}
	tests := []struct {
		name string
		give string
		plan Plan
		want bool
	}{
		{name: "all pods available", give: hash(full), want: true},
		{name: "2 of 3 available", give: hash(partial), want: false},
		{name: "no pods", give: hash(empty), want: false},
		{name: "no such ReplicaSet", give: "abc", want: false},
		{name: "no hash", give: "", want: false},
		// A preview of 3 promoted to 5 in this sync: 3 of 5 once the plan ran.
		{name: "the plan scales it up", give: hash(full), plan: scaleTo(full, StepScaleUp, 5), want: false},
		{name: "the plan scales another", give: hash(full), plan: scaleTo(partial, StepScaleUp, 5), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ServesFully(rss, tt.plan, tt.give); got != tt.want {
				t.Errorf("ServesFully(%s) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

func TestBlueGreenTargets(t *testing.T) {
	tests := []struct {
		name              string
		stable, current   string
		rolling, promoted bool
		wantActive        string
		wantPreview       string
	}{
		{name: "at rest", stable: "a", current: "a", wantActive: "a", wantPreview: "a"},
		{name: "before promotion", stable: "a", current: "b", rolling: true, wantActive: "a", wantPreview: "b"},
		{name: "promoted", stable: "a", current: "b", rolling: true, promoted: true, wantActive: "b", wantPreview: "b"},
		{name: "rolled back to the stable template", stable: "a", current: "a", wantActive: "a", wantPreview: "a"},
		{name: "first rollout (no stable)", stable: "", current: "b", rolling: true, wantActive: "b", wantPreview: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active, preview := BlueGreenTargets(tt.stable, tt.current, tt.rolling, tt.promoted)
			if active != tt.wantActive || preview != tt.wantPreview {
				t.Errorf("BlueGreenTargets = %s, %s, want %s, %s", active, preview, tt.wantActive, tt.wantPreview)
			}
		})
	}
}

func TestRolloutAnnotationsSeesBlueGreen(t *testing.T) {
	a := RolloutAnnotations(map[string]string{BlueGreenAnnotation: `{"activeService":"web"}`})
	b := RolloutAnnotations(map[string]string{BlueGreenAnnotation: `{"activeService":"web2"}`})
	if a == b || a == RolloutAnnotations(nil) {
		t.Errorf("RolloutAnnotations does not change with the blue-green annotation: %q, %q", a, b)
	}
}

// ParseBlueGreen runs in workflow code (workflowcheck.config.yaml exempts it): the same
// annotation gives the same result, its error naming the problems in the same order.
func TestParseBlueGreenIsDeterministic(t *testing.T) {
	d := webDeployment(3, "nginx:1.1")
	d.Annotations[BlueGreenAnnotation] = `{"previewService":"X","scaleDownDelaySeconds":-1,"previewReplicaCount":0,
		"prePromotionAnalysis":{"web":{"url":"ftp://x","headers":{"B":"1","A":"2","C":"3"}},"min":2,"max":1},
		"postPromotionAnalysis":{"query":"","count":2,"failureLimit":5}}`
	d.Annotations[StepsAnnotation] = `[{"setWeight":10}]`
	_, first := ParseBlueGreen(d)
	if first == nil {
		t.Fatal("want an error")
	}
	for range 200 {
		if _, err := ParseBlueGreen(d); err == nil || err.Error() != first.Error() {
			t.Fatalf("error %q, then %q", first, err)
		}
	}
}
