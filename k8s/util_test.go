package k8s

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// sizedRS is a bare ReplicaSet for the arithmetic helpers.
func sizedRS(name string, replicas, available int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptrTo(replicas)},
		Status:     appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: available, ReadyReplicas: available},
	}
}

func revisionRS(name, revision string) *appsv1.ReplicaSet {
	rs := sizedRS(name, 0, 0)
	if revision != "" {
		rs.Annotations[RevisionAnnotation] = revision
	}
	return rs
}

func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		name            string
		giveSurge       *intstr.IntOrString
		giveUnavailable *intstr.IntOrString
		giveDesired     int32
		wantSurge       int32
		wantUnavailable int32
		wantErr         bool
	}{
		{
			// 10 × 25% = 2.5: surge rounds up to 3, unavailable down to 2.
			name:            "25 percent of 10",
			giveSurge:       intOrPct("25%"),
			giveUnavailable: intOrPct("25%"),
			giveDesired:     10,
			wantSurge:       3,
			wantUnavailable: 2,
		},
		{
			// 10 × 39% = 3.9: surge 4, unavailable 3.
			name:            "39 percent of 10",
			giveSurge:       intOrPct("39%"),
			giveUnavailable: intOrPct("39%"),
			giveDesired:     10,
			wantSurge:       4,
			wantUnavailable: 3,
		},
		{
			// 3 × 50% = 1.5: surge 2, unavailable 1.
			name:            "50 percent of 3",
			giveSurge:       intOrPct("50%"),
			giveUnavailable: intOrPct("50%"),
			giveDesired:     3,
			wantSurge:       2,
			wantUnavailable: 1,
		},
		{
			// 10 × 1% = 0.1: surge ceil = 1, unavailable floor = 0; surge is not 0 so no bump.
			name:            "1 percent rounds surge up to 1",
			giveSurge:       intOrPct("1%"),
			giveUnavailable: intOrPct("1%"),
			giveDesired:     10,
			wantSurge:       1,
			wantUnavailable: 0,
		},
		{
			name:            "absolute values pass through",
			giveSurge:       intOrPct("3"),
			giveUnavailable: intOrPct("2"),
			giveDesired:     10,
			wantSurge:       3,
			wantUnavailable: 2,
		},
		{
			// 1 × 25% = 0.25 floors to 0 and surge is 0: unavailable becomes 1.
			name:            "both resolve to zero: unavailable 1",
			giveSurge:       intOrPct("0"),
			giveUnavailable: intOrPct("25%"),
			giveDesired:     1,
			wantSurge:       0,
			wantUnavailable: 1,
		},
		{
			name:            "zero percent of zero replicas",
			giveSurge:       intOrPct("0%"),
			giveUnavailable: intOrPct("0%"),
			giveDesired:     0,
			wantSurge:       0,
			wantUnavailable: 1,
		},
		{
			name:            "nil fenceposts count as zero",
			giveDesired:     10,
			wantSurge:       0,
			wantUnavailable: 1,
		},
		{
			name:            "nil surge",
			giveUnavailable: intOrPct("39%"),
			giveDesired:     10,
			wantSurge:       0,
			wantUnavailable: 3,
		},
		{
			name:            "nil unavailable",
			giveSurge:       intOrPct("39%"),
			giveDesired:     10,
			wantSurge:       4,
			wantUnavailable: 0,
		},
		{
			name:            "invalid surge",
			giveSurge:       ptrTo(intstr.FromString("oops")),
			giveUnavailable: intOrPct("39%"),
			giveDesired:     10,
			wantErr:         true,
		},
		{
			name:            "invalid unavailable",
			giveSurge:       intOrPct("55%"),
			giveUnavailable: ptrTo(intstr.FromString("urg")),
			giveDesired:     10,
			wantErr:         true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			surge, unavailable, err := ResolveFenceposts(tt.giveSurge, tt.giveUnavailable, tt.giveDesired)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ResolveFenceposts() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if surge != tt.wantSurge || unavailable != tt.wantUnavailable {
				t.Errorf("ResolveFenceposts() = %d/%d, want %d/%d", surge, unavailable, tt.wantSurge, tt.wantUnavailable)
			}
		})
	}
}

func TestMaxSurge(t *testing.T) {
	noReplicas := withFenceposts(webDeployment(0, "nginx:1.0"), "25%", "25%")
	noReplicas.Spec.Replicas = nil
	noRollingUpdate := withFenceposts(webDeployment(10, "nginx:1.0"), "", "")
	noRollingUpdate.Spec.Strategy.RollingUpdate = nil

	tests := []struct {
		name       string
		giveDeploy *appsv1.Deployment
		want       int32
	}{
		{name: "25 percent of 10 rounds up", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"), want: 3},
		{name: "50 percent of 3 rounds up", giveDeploy: withFenceposts(webDeployment(3, "nginx:1.0"), "50%", "0"), want: 2},
		{name: "absolute", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "2", "0"), want: 2},
		{name: "absolute above replicas is kept", giveDeploy: withFenceposts(webDeployment(2, "nginx:1.0"), "5", "0"), want: 5},
		{name: "nil replicas defaults to 1", giveDeploy: noReplicas, want: 1},
		{name: "recreate", giveDeploy: useRecreate(webDeployment(10, "nginx:1.0")), want: 0},
		{name: "no rollingUpdate block", giveDeploy: noRollingUpdate, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxSurge(tt.giveDeploy); got != tt.want {
				t.Errorf("MaxSurge() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMaxUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		giveDeploy *appsv1.Deployment
		want       int32
	}{
		{name: "25 percent of 10 rounds down", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"), want: 2},
		{name: "less than replicas", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "1", "5"), want: 5},
		{name: "equal to replicas", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "1", "10"), want: 10},
		{name: "capped at replicas", giveDeploy: withFenceposts(webDeployment(5, "nginx:1.0"), "1", "10"), want: 5},
		{name: "percent capped at replicas", giveDeploy: withFenceposts(webDeployment(5, "nginx:1.0"), "1", "100%"), want: 5},
		{name: "50 percent", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "1", "50%"), want: 5},
		// 1 × 25% floors to 0 and surge is 0: the fencepost bump gives 1.
		{name: "both zero: 1", giveDeploy: withFenceposts(webDeployment(1, "nginx:1.0"), "0", "25%"), want: 1},
		{name: "explicit zeros: 1", giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "0", "0"), want: 1},
		{name: "zero replicas", giveDeploy: withFenceposts(webDeployment(0, "nginx:1.0"), "1", "10"), want: 0},
		{name: "recreate", giveDeploy: useRecreate(webDeployment(10, "nginx:1.0")), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxUnavailable(tt.giveDeploy); got != tt.want {
				t.Errorf("MaxUnavailable() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNewRSNewReplicas(t *testing.T) {
	tests := []struct {
		name       string
		giveDeploy *appsv1.Deployment
		giveOld    int32
		giveNew    int32
		want       int32
		wantErr    bool
	}{
		{
			// 10 replicas, maxSurge 3: at most 13 pods. Old 10 + new 0 = 10, so 3 more.
			name:       "first step of a rollout",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			giveOld:    10,
			giveNew:    0,
			want:       3,
		},
		{
			// Old scaled down to 8, new at 3: 13 − 11 = 2 more, new goes to 5.
			name:       "after old scaled down",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			giveOld:    8,
			giveNew:    3,
			want:       5,
		},
		{
			// 10 + 3 = 13 already: no room.
			name:       "at max surge",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			giveOld:    10,
			giveNew:    3,
			want:       3,
		},
		{
			// 6 replicas, maxSurge 10: room for 16 − 7 = 9, but never more than 6 − 2 = 4.
			name:       "bounded by replicas",
			giveDeploy: withFenceposts(webDeployment(6, "nginx:1.0"), "10", "1"),
			giveOld:    5,
			giveNew:    2,
			want:       6,
		},
		{
			// 1 replica, maxSurge 1: total 10 ≥ 2, stay at 5.
			name:       "above the limit stays put",
			giveDeploy: withFenceposts(webDeployment(1, "nginx:1.0"), "1", "1"),
			giveOld:    5,
			giveNew:    5,
			want:       5,
		},
		{
			name:       "new deployment takes everything",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			want:       10,
		},
		{
			name:       "recreate goes straight to replicas",
			giveDeploy: useRecreate(webDeployment(3, "nginx:1.0")),
			giveOld:    1,
			giveNew:    1,
			want:       3,
		},
		{
			name: "unsupported strategy",
			giveDeploy: func() *appsv1.Deployment {
				d := useRecreate(webDeployment(3, "nginx:1.0"))
				d.Spec.Strategy.Type = "BlueGreen"
				return d
			}(),
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newRS := sizedRS("new", tt.giveNew, 0)
			all := []*appsv1.ReplicaSet{sizedRS("old", tt.giveOld, tt.giveOld), newRS}
			got, err := NewRSNewReplicas(tt.giveDeploy, all, newRS)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewRSNewReplicas() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("NewRSNewReplicas() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMaxScaledDown(t *testing.T) {
	tests := []struct {
		name          string
		giveDeploy    *appsv1.Deployment
		giveOld       int32
		giveNew       int32
		giveAvailable int32 // available pods of the new ReplicaSet
		want          int32
	}{
		{
			// 10 replicas, maxSurge 3, maxUnavailable 2, new just created at 3 with none
			// available: 13 − (10 − 2) − (3 − 0) = 2.
			name:       "new ReplicaSet just created",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			giveOld:    10,
			giveNew:    3,
			want:       2,
		},
		{
			// Same, but the 3 new pods are available: 13 − 8 − 0 = 5.
			name:          "new pods available",
			giveDeploy:    withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%"),
			giveOld:       10,
			giveNew:       3,
			giveAvailable: 3,
			want:          5,
		},
		{
			// maxSurge 0 and maxUnavailable 0 resolve to unavailable 1: 10 − 9 − 0 = 1.
			name:       "fencepost bump lets one go",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "0", "0"),
			giveOld:    10,
			want:       1,
		},
		{
			// 10 − 8 − 0 = 2.
			name:       "maxUnavailable 2 without surge",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "0", "2"),
			giveOld:    10,
			want:       2,
		},
		{
			// Old 8 and new 2 unavailable: 10 − 8 − 2 = 0. The new pods that are not up count
			// as already missing, so nothing more may go.
			name:       "unavailable new pods block scale down",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "0", "2"),
			giveOld:    8,
			giveNew:    2,
			want:       0,
		},
		{
			// Old 8, new at 5 crashlooping, maxSurge 3: 13 − 8 − 5 = 0.
			name:       "crashlooping new pods",
			giveDeploy: withFenceposts(webDeployment(10, "nginx:1.0"), "3", "2"),
			giveOld:    8,
			giveNew:    5,
			want:       0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newRS := sizedRS("new", tt.giveNew, tt.giveAvailable)
			all := []*appsv1.ReplicaSet{sizedRS("old", tt.giveOld, tt.giveOld), newRS}
			if got := MaxScaledDown(tt.giveDeploy, all, newRS); got != tt.want {
				t.Errorf("MaxScaledDown() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestIsSaturated(t *testing.T) {
	rs := func(replicas, available int32, desired string) *appsv1.ReplicaSet {
		r := sizedRS("new", replicas, available)
		if desired != "" {
			r.Annotations[DesiredReplicasAnnotation] = desired
		}
		return r
	}
	tests := []struct {
		name   string
		giveRS *appsv1.ReplicaSet
		want   bool
	}{
		{name: "saturated", giveRS: rs(3, 3, "3"), want: true},
		{name: "nil", giveRS: nil, want: false},
		{name: "not all available", giveRS: rs(3, 2, "3"), want: false},
		{name: "fewer replicas", giveRS: rs(2, 2, "3"), want: false},
		{name: "sized for another count", giveRS: rs(3, 3, "5"), want: false},
		{name: "no desired annotation", giveRS: rs(3, 3, ""), want: false},
		{name: "bad desired annotation", giveRS: rs(3, 3, "three"), want: false},
	}
	d := withFenceposts(webDeployment(3, "nginx:1.0"), "1", "1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsSaturated(d, tt.giveRS); got != tt.want {
				t.Errorf("IsSaturated() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeploymentComplete(t *testing.T) {
	deploy := func(replicas, current, updated, available int32, generation, observed int64) *appsv1.Deployment {
		d := withFenceposts(webDeployment(replicas, "nginx:1.0"), "1", "1")
		d.Generation = generation
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: observed,
			Replicas:           current,
			UpdatedReplicas:    updated,
			AvailableReplicas:  available,
		}
		return d
	}
	tests := []struct {
		name       string
		giveDeploy *appsv1.Deployment
		want       bool
	}{
		{name: "complete", giveDeploy: deploy(5, 5, 5, 5, 1, 1), want: true},
		{name: "observed a newer generation", giveDeploy: deploy(5, 5, 5, 5, 1, 2), want: true},
		{name: "not all available", giveDeploy: deploy(5, 5, 5, 4, 1, 1), want: false},
		{name: "available but not updated", giveDeploy: deploy(5, 5, 4, 5, 1, 1), want: false},
		// Old RS 1/1 available, new RS 1 not yet available: 2 pods, 1 updated, 1 available.
		{name: "old pods still running", giveDeploy: deploy(1, 2, 1, 1, 1, 1), want: false},
		{name: "single replica never comes up", giveDeploy: deploy(1, 1, 1, 0, 1, 1), want: false},
		{name: "status is for an older generation", giveDeploy: deploy(5, 5, 5, 5, 2, 1), want: false},
		{name: "scaled to zero", giveDeploy: deploy(0, 0, 0, 0, 3, 3), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DeploymentComplete(tt.giveDeploy, &tt.giveDeploy.Status); got != tt.want {
				t.Errorf("DeploymentComplete() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeploymentProgressing(t *testing.T) {
	status := func(current, updated, ready, available int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
	}
	tests := []struct {
		name     string
		giveOld  appsv1.DeploymentStatus
		giveNew  appsv1.DeploymentStatus
		wantProg bool
	}{
		{name: "more updated pods", giveOld: status(10, 4, 4, 4), giveNew: status(10, 6, 4, 4), wantProg: true},
		{name: "nothing changed", giveOld: status(10, 4, 4, 4), giveNew: status(10, 4, 4, 4), wantProg: false},
		// Old pods 10 − 4 = 6 before, 8 − 4 = 4 after.
		{name: "old pods removed", giveOld: status(10, 4, 6, 6), giveNew: status(8, 4, 6, 6), wantProg: true},
		{name: "fewer new pods", giveOld: status(10, 7, 3, 3), giveNew: status(10, 6, 3, 3), wantProg: false},
		{name: "fewer overall but more new", giveOld: status(10, 4, 7, 7), giveNew: status(8, 8, 5, 5), wantProg: true},
		{name: "more ready", giveOld: status(10, 10, 9, 8), giveNew: status(10, 10, 10, 8), wantProg: true},
		{name: "more available", giveOld: status(10, 10, 10, 9), giveNew: status(10, 10, 10, 10), wantProg: true},
		{name: "more old pods is not progress", giveOld: status(10, 4, 4, 4), giveNew: status(12, 4, 4, 4), wantProg: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := withFenceposts(webDeployment(10, "nginx:1.0"), "1", "1")
			d.Status = tt.giveOld
			if got := DeploymentProgressing(d, &tt.giveNew); got != tt.wantProg {
				t.Errorf("DeploymentProgressing() = %v, want %v", got, tt.wantProg)
			}
		})
	}
}

func TestProportionalShares(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type giveRS struct {
		name        string
		replicas    int32
		maxReplicas string // max-replicas annotation, "" for none
		age         int    // minutes after base; larger is newer
	}
	tests := []struct {
		name           string
		giveReplicas   int32
		giveSurge      string
		giveStatusReps int32 // Deployment status.replicas, the fallback for a missing annotation
		giveRSs        []giveRS
		wantSizes      map[string]int32
		wantOrder      []string
	}{
		{
			// Mid-rollout at 10 replicas, maxSurge 25% (3): new 6 + old 7 = 13, both annotated
			// max-replicas 13. Scaling to 20 with maxSurge 25% (5): allowed 25, toAdd 12.
			// Old (7, larger) first: round(7×25/13) = round(13.46) = 13, +6.
			// New: round(6×25/13) = round(11.54) = 12, +6 (≤ 12 − 6 left). Sum 12, no leftover.
			name:         "scale up mid-rollout",
			giveReplicas: 20,
			giveSurge:    "25%",
			giveRSs: []giveRS{
				{name: "new", replicas: 6, maxReplicas: "13", age: 2},
				{name: "old", replicas: 7, maxReplicas: "13", age: 1},
			},
			wantSizes: map[string]int32{"new": 12, "old": 13},
			wantOrder: []string{"old", "new"},
		},
		{
			// Same ReplicaSets, scaled to 5 with maxSurge 25% (2): allowed 7, toAdd 7 − 13 = −6.
			// Old first: round(7×7/13) = round(3.77) = 4, −3.
			// New: round(6×7/13) = round(3.23) = 3, −3 (≥ −6 + 3). Sum −6, no leftover.
			name:         "scale down mid-rollout",
			giveReplicas: 5,
			giveSurge:    "25%",
			giveRSs: []giveRS{
				{name: "new", replicas: 6, maxReplicas: "13", age: 2},
				{name: "old", replicas: 7, maxReplicas: "13", age: 1},
			},
			wantSizes: map[string]int32{"new": 3, "old": 4},
			wantOrder: []string{"old", "new"},
		},
		{
			// 5 → 10 without surge: allowed 10, toAdd 10 − 5 = 5.
			// Old 3: round(3×10/5) = 6, +3. New 2: round(2×10/5) = 4, +2. No leftover.
			name:         "scale up without surge",
			giveReplicas: 10,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "new", replicas: 2, maxReplicas: "5", age: 2},
				{name: "old", replicas: 3, maxReplicas: "5", age: 1},
			},
			wantSizes: map[string]int32{"new": 4, "old": 6},
			wantOrder: []string{"old", "new"},
		},
		{
			// 5 → 3: toAdd −2. Old 3: round(3×3/5) = round(1.8) = 2, −1.
			// New 2: round(2×3/5) = round(1.2) = 1, −1.
			name:         "scale down without surge",
			giveReplicas: 3,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "new", replicas: 2, maxReplicas: "5", age: 2},
				{name: "old", replicas: 3, maxReplicas: "5", age: 1},
			},
			wantSizes: map[string]int32{"new": 1, "old": 2},
			wantOrder: []string{"old", "new"},
		},
		{
			// 7 → 10, three ReplicaSets 2 (newest), 3, 2 (oldest): toAdd 3.
			// v2 (3, largest): round(3×10/7) = round(4.29) = 4, +1.
			// v3 (2, newer of the tie when growing): round(2×10/7) = round(2.86) = 3, +1.
			// v1: +1, capped at what is left (1). Sum 3.
			name:         "three ReplicaSets",
			giveReplicas: 10,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "v3", replicas: 2, maxReplicas: "7", age: 3},
				{name: "v2", replicas: 3, maxReplicas: "7", age: 2},
				{name: "v1", replicas: 2, maxReplicas: "7", age: 1},
			},
			wantSizes: map[string]int32{"v3": 3, "v2": 4, "v1": 3},
			wantOrder: []string{"v2", "v3", "v1"},
		},
		{
			// 3 → 4, three ReplicaSets of 1: toAdd 1. Each round(1×4/3) = round(1.33) = 1, +0.
			// The leftover 1 goes to the first: newest first on a tie when growing, v3.
			name:         "leftover goes to the newest on scale up",
			giveReplicas: 4,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "v1", replicas: 1, maxReplicas: "3", age: 1},
				{name: "v2", replicas: 1, maxReplicas: "3", age: 2},
				{name: "v3", replicas: 1, maxReplicas: "3", age: 3},
			},
			wantSizes: map[string]int32{"v3": 2, "v2": 1, "v1": 1},
			wantOrder: []string{"v3", "v2", "v1"},
		},
		{
			// 3 → 2: toAdd −1. Each round(1×2/3) = round(0.67) = 1, −0. The leftover −1 goes
			// to the first: oldest first on a tie when shrinking, v1.
			name:         "leftover goes to the oldest on scale down",
			giveReplicas: 2,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "v3", replicas: 1, maxReplicas: "3", age: 3},
				{name: "v2", replicas: 1, maxReplicas: "3", age: 2},
				{name: "v1", replicas: 1, maxReplicas: "3", age: 1},
			},
			wantSizes: map[string]int32{"v3": 1, "v2": 1, "v1": 0},
			wantOrder: []string{"v1", "v2", "v3"},
		},
		{
			// 10 → 11 with 4, 3, 3: toAdd 1. round(4.4) = 4, round(3.3) = 3: nobody gets a share,
			// and the leftover 1 goes to the largest.
			name:         "leftover goes to the largest",
			giveReplicas: 11,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "c", replicas: 3, maxReplicas: "10", age: 3},
				{name: "b", replicas: 3, maxReplicas: "10", age: 2},
				{name: "a", replicas: 4, maxReplicas: "10", age: 1},
			},
			wantSizes: map[string]int32{"a": 5, "b": 3, "c": 3},
			wantOrder: []string{"a", "c", "b"},
		},
		{
			// 6 → 0: allowed 0 (no surge at zero replicas), toAdd −6. Each ReplicaSet gives up
			// its whole size: −3, −2, −1.
			name:         "scale to zero",
			giveReplicas: 0,
			giveSurge:    "25%",
			giveRSs: []giveRS{
				{name: "v3", replicas: 3, maxReplicas: "6", age: 3},
				{name: "v2", replicas: 2, maxReplicas: "6", age: 2},
				{name: "v1", replicas: 1, maxReplicas: "6", age: 1},
			},
			wantSizes: map[string]int32{"v3": 0, "v2": 0, "v1": 0},
			wantOrder: []string{"v3", "v2", "v1"},
		},
		{
			// 10 replicas with maxSurge 3 (max 13) → 50 with maxSurge 6: allowed 56, toAdd 43.
			// v1 (8): round(8×56/13) = round(34.46) = 34, +26.
			// v2 (5): round(5×56/13) = round(21.54) = 22, +17 (= 43 − 26). Sum 43.
			name:         "size and surge both change",
			giveReplicas: 50,
			giveSurge:    "6",
			giveRSs: []giveRS{
				{name: "v2", replicas: 5, maxReplicas: "13", age: 2},
				{name: "v1", replicas: 8, maxReplicas: "13", age: 1},
			},
			wantSizes: map[string]int32{"v2": 22, "v1": 34},
			wantOrder: []string{"v1", "v2"},
		},
		{
			// No max-replicas annotation: status.replicas 10 stands in. 10 → 20 without surge,
			// toAdd 10: each round(5×20/10) = 10, +5.
			name:           "missing annotation falls back to status.replicas",
			giveReplicas:   20,
			giveSurge:      "0",
			giveStatusReps: 10,
			giveRSs: []giveRS{
				{name: "new", replicas: 5, age: 2},
				{name: "old", replicas: 5, age: 1},
			},
			wantSizes: map[string]int32{"new": 10, "old": 10},
			wantOrder: []string{"new", "old"},
		},
		{
			// No annotation and status.replicas 0: no fraction can be estimated, so every share
			// is 0 and the whole toAdd of 10 is leftover for the first (newest on a tie).
			name:         "nothing to estimate from",
			giveReplicas: 20,
			giveSurge:    "0",
			giveRSs: []giveRS{
				{name: "new", replicas: 5, age: 2},
				{name: "old", replicas: 5, age: 1},
			},
			wantSizes: map[string]int32{"new": 15, "old": 5},
			wantOrder: []string{"new", "old"},
		},
		{
			// 10 replicas, maxSurge 3, already 13 in total: toAdd 0, sizes unchanged.
			name:         "nothing to add",
			giveReplicas: 10,
			giveSurge:    "3",
			giveRSs: []giveRS{
				{name: "new", replicas: 6, maxReplicas: "13", age: 2},
				{name: "old", replicas: 7, maxReplicas: "13", age: 1},
			},
			wantSizes: map[string]int32{"new": 6, "old": 7},
			wantOrder: []string{"new", "old"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := withFenceposts(webDeployment(tt.giveReplicas, "nginx:1.0"), tt.giveSurge, "0")
			d.Status.Replicas = tt.giveStatusReps
			var all []*appsv1.ReplicaSet
			for _, g := range tt.giveRSs {
				rs := sizedRS(g.name, g.replicas, g.replicas)
				rs.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(g.age) * time.Minute))
				if g.maxReplicas != "" {
					rs.Annotations[MaxReplicasAnnotation] = g.maxReplicas
				}
				all = append(all, rs)
			}
			got := ProportionalShares(d, all)
			if !reflect.DeepEqual(got, tt.wantSizes) {
				t.Errorf("ProportionalShares() = %v, want %v", got, tt.wantSizes)
			}
			var order []string
			for _, rs := range all {
				order = append(order, rs.Name)
			}
			if !reflect.DeepEqual(order, tt.wantOrder) {
				t.Errorf("order = %v, want %v", order, tt.wantOrder)
			}
			var total int32
			for _, n := range got {
				total += n
			}
			if allowed := tt.giveReplicas + MaxSurge(d); tt.giveReplicas == 0 && total != 0 || tt.giveReplicas > 0 && total != allowed {
				t.Errorf("total = %d, want %d", total, allowed)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	tests := []struct {
		name            string
		giveAnnotations map[string]string
		want            int64
		wantErr         bool
	}{
		{name: "no annotations", giveAnnotations: nil, want: 0},
		{name: "no revision", giveAnnotations: map[string]string{"a": "b"}, want: 0},
		{name: "revision", giveAnnotations: map[string]string{RevisionAnnotation: "12"}, want: 12},
		{name: "not a number", giveAnnotations: map[string]string{RevisionAnnotation: "twelve"}, wantErr: true},
		{name: "empty", giveAnnotations: map[string]string{RevisionAnnotation: ""}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Revision(tt.giveAnnotations)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Revision() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Revision() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMaxAndLastRevision(t *testing.T) {
	tests := []struct {
		name     string
		giveRevs []string
		wantMax  int64
		wantLast int64
	}{
		{name: "none", giveRevs: nil, wantMax: 0, wantLast: 0},
		{name: "one", giveRevs: []string{"3"}, wantMax: 3, wantLast: 0},
		{name: "in order", giveRevs: []string{"1", "2", "3"}, wantMax: 3, wantLast: 2},
		{name: "out of order", giveRevs: []string{"5", "9", "2", "7"}, wantMax: 9, wantLast: 7},
		{name: "unparseable skipped", giveRevs: []string{"4", "x", "6"}, wantMax: 6, wantLast: 4},
		{name: "missing counts as 0", giveRevs: []string{"", "2"}, wantMax: 2, wantLast: 0},
		{name: "duplicate top", giveRevs: []string{"4", "4", "1"}, wantMax: 4, wantLast: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rss []*appsv1.ReplicaSet
			for i, rev := range tt.giveRevs {
				rss = append(rss, revisionRS("rs-"+strconv.Itoa(i), rev))
			}
			if got := MaxRevision(rss); got != tt.wantMax {
				t.Errorf("MaxRevision() = %d, want %d", got, tt.wantMax)
			}
			if got := LastRevision(rss); got != tt.wantLast {
				t.Errorf("LastRevision() = %d, want %d", got, tt.wantLast)
			}
		})
	}
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	// A history just under the 2000-character cap: "1000,1001,…" (5 characters each with the comma).
	var long []string
	for i := 1000; i < 1399; i++ {
		long = append(long, strconv.Itoa(i))
	}
	longHistory := strings.Join(long, ",") // 399×4 + 398 = 1994 characters

	tests := []struct {
		name            string
		giveAnnotations map[string]string // on the ReplicaSet
		giveRevision    int64
		giveExists      bool
		wantChanged     bool
		wantAnnotations map[string]string
	}{
		{
			// A new RS gets revision, the replica annotations (10 replicas, maxSurge 3) and
			// the Deployment's own annotations except the skip list.
			name:         "new ReplicaSet",
			giveRevision: 1,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "1",
				DesiredReplicasAnnotation: "10",
				MaxReplicasAnnotation:     "13",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
		{
			// An old RS reused by a rollback: revision 2 → 5, 2 goes into the history.
			name: "reused ReplicaSet records its old revision",
			giveAnnotations: map[string]string{
				RevisionAnnotation:    "2",
				ChangeCauseAnnotation: "kubectl set image",
			},
			giveRevision: 5,
			giveExists:   true,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "5",
				RevisionHistoryAnnotation: "2",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
		{
			name: "history is appended",
			giveAnnotations: map[string]string{
				RevisionAnnotation:        "5",
				RevisionHistoryAnnotation: "1,3",
				ChangeCauseAnnotation:     "kubectl set image",
			},
			giveRevision: 7,
			giveExists:   true,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "7",
				RevisionHistoryAnnotation: "1,3,5",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
		{
			// 1994 + len("2000") + 1 = 1999 ≤ 2000: appended whole.
			name: "history up to the cap",
			giveAnnotations: map[string]string{
				RevisionAnnotation:        "2000",
				RevisionHistoryAnnotation: longHistory,
				ChangeCauseAnnotation:     "kubectl set image",
			},
			giveRevision: 2001,
			giveExists:   true,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "2001",
				RevisionHistoryAnnotation: longHistory + ",2000",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
		{
			// 1994 + len("20000") + 1 = 2000 still fits; with "200000" it is 2001: the oldest
			// entry ("1000", 5 characters with its comma) is dropped to make room.
			name: "history over the cap drops the oldest",
			giveAnnotations: map[string]string{
				RevisionAnnotation:        "200000",
				RevisionHistoryAnnotation: longHistory,
				ChangeCauseAnnotation:     "kubectl set image",
			},
			giveRevision: 200001,
			giveExists:   true,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "200001",
				RevisionHistoryAnnotation: strings.Join(long[1:], ",") + ",200000",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
		{
			// The RS already has a higher revision (older ReplicaSets were deleted): keep it.
			name: "revision never goes down",
			giveAnnotations: map[string]string{
				RevisionAnnotation:    "8",
				ChangeCauseAnnotation: "kubectl set image",
			},
			giveRevision: 3,
			giveExists:   true,
			wantChanged:  false,
			wantAnnotations: map[string]string{
				RevisionAnnotation:    "8",
				ChangeCauseAnnotation: "kubectl set image",
			},
		},
		{
			name: "unparseable revision is left alone",
			giveAnnotations: map[string]string{
				RevisionAnnotation:    "eight",
				ChangeCauseAnnotation: "kubectl set image",
			},
			giveRevision: 3,
			giveExists:   true,
			wantChanged:  false,
			wantAnnotations: map[string]string{
				RevisionAnnotation:    "eight",
				ChangeCauseAnnotation: "kubectl set image",
			},
		},
		{
			// An existing RS keeps its replica annotations: they are the scaler's business.
			name: "existing ReplicaSet without revision",
			giveAnnotations: map[string]string{
				DesiredReplicasAnnotation: "4",
				MaxReplicasAnnotation:     "5",
			},
			giveRevision: 2,
			giveExists:   true,
			wantChanged:  true,
			wantAnnotations: map[string]string{
				RevisionAnnotation:        "2",
				DesiredReplicasAnnotation: "4",
				MaxReplicasAnnotation:     "5",
				ChangeCauseAnnotation:     "kubectl set image",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := withFenceposts(webDeployment(10, "nginx:1.0"), "25%", "25%")
			d.Annotations = map[string]string{
				ChangeCauseAnnotation:              "kubectl set image",
				RevisionAnnotation:                 "99",
				corev1.LastAppliedConfigAnnotation: "{}",
			}
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Annotations: tt.giveAnnotations}}
			got := setNewReplicaSetAnnotations(d, rs, tt.giveRevision, tt.giveExists)
			if got != tt.wantChanged {
				t.Errorf("setNewReplicaSetAnnotations() = %v, want %v", got, tt.wantChanged)
			}
			if !reflect.DeepEqual(rs.Annotations, tt.wantAnnotations) {
				t.Errorf("annotations = %v, want %v", rs.Annotations, tt.wantAnnotations)
			}
		})
	}
}

func TestCopyAnnotationsToReplicaSet(t *testing.T) {
	tests := []struct {
		name            string
		giveDeployAnn   map[string]string
		giveRSAnn       map[string]string
		wantChanged     bool
		wantAnnotations map[string]string
	}{
		{
			name: "skip list is never copied",
			giveDeployAnn: map[string]string{
				corev1.LastAppliedConfigAnnotation: "{}",
				RevisionAnnotation:                 "3",
				RevisionHistoryAnnotation:          "1,2",
				DesiredReplicasAnnotation:          "10",
				MaxReplicasAnnotation:              "13",
				appsv1.DeprecatedRollbackTo:        "1",
			},
			wantChanged:     false,
			wantAnnotations: map[string]string{},
		},
		{
			name:            "others are copied",
			giveDeployAnn:   map[string]string{ChangeCauseAnnotation: "deploy v2", "team": "web", RevisionAnnotation: "3"},
			wantChanged:     true,
			wantAnnotations: map[string]string{ChangeCauseAnnotation: "deploy v2", "team": "web"},
		},
		{
			name:            "same values: no change",
			giveDeployAnn:   map[string]string{"team": "web"},
			giveRSAnn:       map[string]string{"team": "web", RevisionAnnotation: "1"},
			wantChanged:     false,
			wantAnnotations: map[string]string{"team": "web", RevisionAnnotation: "1"},
		},
		{
			// Copying only adds and overwrites; the RS's own skip-list values stay.
			name:            "overwrite, keep the rest",
			giveDeployAnn:   map[string]string{"team": "api", DesiredReplicasAnnotation: "10"},
			giveRSAnn:       map[string]string{"team": "web", "extra": "x", DesiredReplicasAnnotation: "4"},
			wantChanged:     true,
			wantAnnotations: map[string]string{"team": "api", "extra": "x", DesiredReplicasAnnotation: "4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := withFenceposts(webDeployment(10, "nginx:1.0"), "1", "1")
			d.Annotations = tt.giveDeployAnn
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Annotations: tt.giveRSAnn}}
			got := copyAnnotationsToReplicaSet(d, rs)
			if got != tt.wantChanged {
				t.Errorf("copyAnnotationsToReplicaSet() = %v, want %v", got, tt.wantChanged)
			}
			if !reflect.DeepEqual(rs.Annotations, tt.wantAnnotations) {
				t.Errorf("annotations = %v, want %v", rs.Annotations, tt.wantAnnotations)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))
	cond := func(typ appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, update, transition metav1.Time) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastUpdateTime: update, LastTransitionTime: transition}
	}
	available := cond(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "ok", t0, t0)

	tests := []struct {
		name string
		give []appsv1.DeploymentCondition
		set  appsv1.DeploymentCondition
		want []appsv1.DeploymentCondition
	}{
		{
			name: "added when missing",
			give: []appsv1.DeploymentCondition{available},
			set:  cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewReplicaSetReason, "created", t1, t1),
			want: []appsv1.DeploymentCondition{
				available,
				cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewReplicaSetReason, "created", t1, t1),
			},
		},
		{
			name: "same status and reason: untouched",
			give: []appsv1.DeploymentCondition{cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "old", t0, t0), available},
			set:  cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "new", t1, t1),
			want: []appsv1.DeploymentCondition{cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "old", t0, t0), available},
		},
		{
			name: "same status, new reason: transition time kept",
			give: []appsv1.DeploymentCondition{cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", t0, t0), available},
			set:  cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, "done", t1, t1),
			want: []appsv1.DeploymentCondition{available, cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, "done", t1, t0)},
		},
		{
			name: "status changes: new transition time",
			give: []appsv1.DeploymentCondition{cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", t0, t0), available},
			set:  cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, "timed out", t1, t1),
			want: []appsv1.DeploymentCondition{available, cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, "timed out", t1, t1)},
		},
		{
			name: "added to empty status",
			set:  available,
			want: []appsv1.DeploymentCondition{available},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := appsv1.DeploymentStatus{Conditions: tt.give}
			SetCondition(&st, tt.set)
			if !reflect.DeepEqual(st.Conditions, tt.want) {
				t.Errorf("conditions = %+v, want %+v", st.Conditions, tt.want)
			}
		})
	}
}

func TestRemoveCondition(t *testing.T) {
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReplicaSetUpdatedReason}
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: MinimumReplicasAvailable}
	tests := []struct {
		name       string
		give       []appsv1.DeploymentCondition
		giveRemove appsv1.DeploymentConditionType
		want       []appsv1.DeploymentCondition
	}{
		{name: "present", give: []appsv1.DeploymentCondition{progressing, available}, giveRemove: appsv1.DeploymentProgressing, want: []appsv1.DeploymentCondition{available}},
		{name: "absent", give: []appsv1.DeploymentCondition{available}, giveRemove: appsv1.DeploymentReplicaFailure, want: []appsv1.DeploymentCondition{available}},
		{name: "only one", give: []appsv1.DeploymentCondition{progressing}, giveRemove: appsv1.DeploymentProgressing, want: nil},
		{name: "empty", giveRemove: appsv1.DeploymentProgressing, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := appsv1.DeploymentStatus{Conditions: tt.give}
			RemoveCondition(&st, tt.giveRemove)
			if !reflect.DeepEqual(st.Conditions, tt.want) {
				t.Errorf("conditions = %+v, want %+v", st.Conditions, tt.want)
			}
			if GetCondition(st, tt.giveRemove) != nil {
				t.Errorf("GetCondition(%s) = non-nil after removal, want nil", tt.giveRemove)
			}
		})
	}
}

func TestGetConditionReturnsCopy(t *testing.T) {
	st := appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Reason: "A"}}}
	c := GetCondition(st, appsv1.DeploymentAvailable)
	if c == nil {
		t.Fatalf("GetCondition() = nil, want a condition")
	}
	c.Reason = "B"
	if got := st.Conditions[0].Reason; got != "A" {
		t.Errorf("stored reason = %q after editing the copy, want %q", got, "A")
	}
}

func withResources(t *corev1.PodTemplateSpec, cpu string) *corev1.PodTemplateSpec {
	t.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return t
}

func TestEqualIgnoreHash(t *testing.T) {
	tmpl := func(labels map[string]string, image string) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		}
	}
	tests := []struct {
		name  string
		giveA *corev1.PodTemplateSpec
		giveB *corev1.PodTemplateSpec
		want  bool
	}{
		{
			name:  "only the hash label differs",
			giveA: tmpl(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}, "nginx:1"),
			giveB: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			want:  true,
		},
		{
			name:  "different hashes",
			giveA: tmpl(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}, "nginx:1"),
			giveB: tmpl(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "def"}, "nginx:1"),
			want:  true,
		},
		{
			name:  "other label differs",
			giveA: tmpl(map[string]string{"app": "web", "tier": "a"}, "nginx:1"),
			giveB: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			want:  false,
		},
		{
			name:  "image differs",
			giveA: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			giveB: tmpl(map[string]string{"app": "web"}, "nginx:2"),
			want:  false,
		},
		{
			name:  "a label only one side has",
			giveA: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			giveB: tmpl(map[string]string{"app": "web", "tier": "a", appsv1.DefaultDeploymentUniqueLabelKey: "x"}, "nginx:1"),
			want:  false,
		},
		{
			name:  "same count, other key",
			giveA: tmpl(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "x"}, "nginx:1"),
			giveB: tmpl(map[string]string{"tier": "web", appsv1.DefaultDeploymentUniqueLabelKey: "x"}, "nginx:1"),
			want:  false,
		},
		{
			name:  "an annotation differs",
			giveA: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "1"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1"}}}},
			giveB: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			want:  false,
		},
		{
			name:  "a container's resources differ, written the same",
			giveA: withResources(tmpl(map[string]string{"app": "web"}, "nginx:1"), "1000m"),
			giveB: withResources(tmpl(map[string]string{"app": "web"}, "nginx:1"), "1"),
			want:  true,
		},
		{
			name:  "a container's resources differ",
			giveA: withResources(tmpl(map[string]string{"app": "web"}, "nginx:1"), "500m"),
			giveB: withResources(tmpl(map[string]string{"app": "web"}, "nginx:1"), "1"),
			want:  false,
		},
		{
			name:  "another container",
			giveA: tmpl(map[string]string{"app": "web"}, "nginx:1"),
			giveB: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1"}, {Name: "side", Image: "busybox"}}}},
			want:  false,
		},
		{
			// Semantic equality: a nil and an empty label map are the same template.
			name:  "hash was the only label",
			giveA: tmpl(map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "abc"}, "nginx:1"),
			giveB: tmpl(nil, "nginx:1"),
			want:  true,
		},
	}
	// upstream is the rule EqualIgnoreHash must agree with: deep copies without the label,
	// compared with equality.Semantic.
	upstream := func(a, b *corev1.PodTemplateSpec) bool {
		ac, bc := a.DeepCopy(), b.DeepCopy()
		delete(ac.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		delete(bc.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		return equality.Semantic.DeepEqual(ac, bc)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.giveA.DeepCopy()
			if got := EqualIgnoreHash(tt.giveA, tt.giveB); got != tt.want {
				t.Errorf("EqualIgnoreHash() = %v, want %v", got, tt.want)
			}
			if up := upstream(tt.giveA, tt.giveB); up != tt.want {
				t.Errorf("upstream's rule says %v, the case wants %v", up, tt.want)
			}
			if got, up := EqualIgnoreHash(tt.giveB, tt.giveA), upstream(tt.giveB, tt.giveA); got != up {
				t.Errorf("EqualIgnoreHash(b, a) = %v, upstream's rule says %v", got, up)
			}
			if !reflect.DeepEqual(tt.giveA, before) {
				t.Errorf("EqualIgnoreHash() changed its argument to %+v, want %+v", tt.giveA, before)
			}
		})
	}
}

func TestFindNewAndOldReplicaSets(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := withFenceposts(webDeployment(3, "nginx:2"), "1", "1")
	rs := func(name, image string, minute int) *appsv1.ReplicaSet {
		r := sizedRS(name, 1, 1)
		r.UID = types.UID("uid-" + name)
		r.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))
		r.Spec.Template = *d.Spec.Template.DeepCopy()
		r.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name
		r.Spec.Template.Spec.Containers[0].Image = image
		return r
	}
	tests := []struct {
		name     string
		giveRSs  []*appsv1.ReplicaSet
		wantNew  string
		wantOlds []string
	}{
		{
			name:     "one match",
			giveRSs:  []*appsv1.ReplicaSet{rs("v1", "nginx:1", 1), rs("v2", "nginx:2", 2)},
			wantNew:  "v2",
			wantOlds: []string{"v1"},
		},
		{
			// Two ReplicaSets with the current template: the oldest is the new one.
			name:     "duplicates pick the oldest",
			giveRSs:  []*appsv1.ReplicaSet{rs("dup-b", "nginx:2", 5), rs("v1", "nginx:1", 1), rs("dup-a", "nginx:2", 3)},
			wantNew:  "dup-a",
			wantOlds: []string{"dup-b", "v1"},
		},
		{
			name:     "no match",
			giveRSs:  []*appsv1.ReplicaSet{rs("v1", "nginx:1", 1)},
			wantNew:  "",
			wantOlds: []string{"v1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotNew string
			if n := FindNewReplicaSet(d, tt.giveRSs); n != nil {
				gotNew = n.Name
			}
			if gotNew != tt.wantNew {
				t.Errorf("FindNewReplicaSet() = %q, want %q", gotNew, tt.wantNew)
			}
			var gotOlds []string
			for _, o := range FindOldReplicaSets(d, tt.giveRSs) {
				gotOlds = append(gotOlds, o.Name)
			}
			if !reflect.DeepEqual(gotOlds, tt.wantOlds) {
				t.Errorf("FindOldReplicaSets() = %v, want %v", gotOlds, tt.wantOlds)
			}
		})
	}
}

// BenchmarkEqualIgnoreHash: the new ReplicaSet (equal but for the hash) and an old one (another
// image), as Decide asks of a rollout's ReplicaSets.
func BenchmarkEqualIgnoreHash(b *testing.B) {
	d := webDeployment(10, "nginx:2")
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	same := d.Spec.Template.DeepCopy()
	same.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	old := same.DeepCopy()
	old.Spec.Containers[0].Image = "nginx:1"
	for _, c := range []struct {
		name string
		rs   *corev1.PodTemplateSpec
	}{{"new", same}, {"old", old}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				EqualIgnoreHash(c.rs, &d.Spec.Template)
			}
		})
	}
}
