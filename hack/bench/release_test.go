package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/release"
)

func TestReleaseFlag(t *testing.T) {
	tests := []struct {
		give    []string
		want    int
		budgets []Budget
		wantErr bool
	}{
		{give: nil, want: 0, budgets: []Budget{{20, 30}, {200, 300}}},
		{give: []string{"--release"}, want: 1000, budgets: []Budget{{20, 30}, {200, 300}}},
		{give: []string{"--release=96"}, want: 96, budgets: []Budget{{20, 30}, {200, 300}}},
		// With a blank, and flags after it still parse.
		{give: []string{"--release", "400", "--budgets", "200/300"}, want: 400, budgets: []Budget{{200, 300}}},
		{give: []string{"--budgets", "200/300", "--release"}, want: 1000, budgets: []Budget{{200, 300}}},
		{give: []string{"--release", "100"}, wantErr: true},  // not a multiple of 8
		{give: []string{"--release", "1008"}, wantErr: true}, // over release.MaxTargets
		{give: []string{"--release=0"}, wantErr: true},
		{give: []string{"--release=x"}, wantErr: true},
		{give: []string{"--release", "96", "extra"}, wantErr: true},
	}
	for _, tt := range tests {
		c, err := parseFlags(tt.give)
		if (err != nil) != tt.wantErr {
			t.Errorf("%q: error %v, want error %v", tt.give, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if c.Release != tt.want {
			t.Errorf("%q: release %d, want %d", tt.give, c.Release, tt.want)
		}
		if !reflect.DeepEqual(c.Budgets, tt.budgets) {
			t.Errorf("%q: budgets %v, want %v", tt.give, c.Budgets, tt.budgets)
		}
	}
}

// TestReleaseSpec: 1,000 Deployments are 4 waves of 250, each wave one group of 125 per
// cluster, all at once; the spec validates.
func TestReleaseSpec(t *testing.T) {
	s, err := releaseSpec("bench", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Waves) != 4 || len(s.Targets) != 8 {
		t.Fatalf("%d waves, %d target groups; want 4 and 8", len(s.Waves), len(s.Targets))
	}
	for i, w := range s.Waves {
		want := release.Wave{Name: waveName(i), Targets: []string{waveName(i) + "-a", waveName(i) + "-b"}, MaxConcurrent: 250}
		if !reflect.DeepEqual(w, want) {
			t.Errorf("wave %d: got %+v, want %+v", i, w, want)
		}
	}
	if g := s.Targets[3]; !reflect.DeepEqual(g, release.TargetGroup{Name: "w2-b", Cluster: "b", Namespace: "bench", Selector: "bench-wave=w2"}) {
		t.Errorf("targets[3]: got %+v", g)
	}
	// Deployment 124 of a cluster is in wave 1, 125 in wave 2.
	for _, tt := range []struct {
		give int
		want string
	}{{0, "w1"}, {124, "w1"}, {125, "w2"}, {499, "w4"}} {
		if got := releaseDeployment(tt.give, 125).Labels[waveLabel]; got != tt.want {
			t.Errorf("deployment %d: wave %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestReleaseLayout(t *testing.T) {
	tests := []struct {
		give    int
		want    int
		wantErr bool
	}{
		{give: 8, want: 1},
		{give: 96, want: 12},
		{give: 1000, want: 125},
		{give: 4, wantErr: true},
		{give: 100, wantErr: true},
		{give: 1008, wantErr: true},
	}
	for _, tt := range tests {
		got, err := releaseLayout(tt.give)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("releaseLayout(%d) = %d, %v; want %d (error %v)", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestWaveTimes: waves seen Rolling and Done at the queries, one passing between two queries
// (w2), and the last ending after the last query (closed at the workflow's end).
func TestWaveTimes(t *testing.T) {
	out := []WaveTime{{Name: "w1", StartSeconds: -1, DoneSeconds: -1}, {Name: "w2", StartSeconds: -1, DoneSeconds: -1},
		{Name: "w3", StartSeconds: -1, DoneSeconds: -1}, {Name: "w4", StartSeconds: -1, DoneSeconds: -1}}
	st := func(states ...string) []release.WaveStatus {
		var ws []release.WaveStatus
		for _, s := range states {
			ws = append(ws, release.WaveStatus{State: s})
		}
		return ws
	}
	observeWaves(out, st(release.WavePending, release.WavePending, release.WavePending, release.WavePending), 0.1)
	observeWaves(out, st(release.WaveRolling, release.WavePending, release.WavePending, release.WavePending), 0.6)
	observeWaves(out, st(release.WaveRolling, release.WavePending, release.WavePending, release.WavePending), 1.1)
	observeWaves(out, st(release.WaveDone, release.WavePending, release.WavePending, release.WavePending), 3.0)
	observeWaves(out, st(release.WaveDone, release.WaveDone, release.WaveRolling, release.WavePending), 5.5)
	observeWaves(out, st(release.WaveDone, release.WaveDone, release.WaveDone, release.WaveRolling), 8.0)
	finishWaves(out, 9.5)
	want := []WaveTime{{Name: "w1", StartSeconds: 0.6, DoneSeconds: 3.0}, {Name: "w2", StartSeconds: 3.0, DoneSeconds: 5.5},
		{Name: "w3", StartSeconds: 5.5, DoneSeconds: 8.0}, {Name: "w4", StartSeconds: 8.0, DoneSeconds: 9.5}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got %+v, want %+v", out, want)
	}
	if got := out[1].Seconds(); got != 2.5 {
		t.Errorf("w2 took %v, want 2.5", got)
	}
}

func TestHistorySize(t *testing.T) {
	tests := []struct {
		give []int
		want HistorySize
	}{
		{give: nil, want: HistorySize{}},
		{give: []int{432}, want: HistorySize{Runs: 1, Events: 432, LargestRun: 432}},
		{give: []int{5012, 5100, 1800}, want: HistorySize{Runs: 3, Events: 11912, LargestRun: 5100}},
	}
	for _, tt := range tests {
		if got := sizeOf(tt.give); got != tt.want {
			t.Errorf("sizeOf(%v) = %+v, want %+v", tt.give, got, tt.want)
		}
	}
}

func TestReleaseText(t *testing.T) {
	r := ReleaseResult{Deployments: 1000, Replicas: 1, Clusters: []string{"a", "b"}, Budget: Budget{200, 300},
		ByHandSeconds: 40, ReleaseSeconds: 100, WorkflowSeconds: 99.5,
		ByHandProgress: []Point{{T: 0.5, Updated: 0}, {T: 10, Updated: 499}, {T: 12, Updated: 500}, {T: 30, Updated: 950}, {T: 40, Updated: 1000}},
		Waves:          []WaveTime{{Name: "w1", Deployments: 250, StartSeconds: 0.5, DoneSeconds: 25}},
		History:        HistorySize{Runs: 2, Events: 9000, LargestRun: 5010},
		Procs:          map[string]*RSSStats{"worker": {PeakKB: map[string]int64{phaseSetup: 60 * 1024, phaseByHand: 80 * 1024, phaseRelease: 120 * 1024}, HWMKB: 121 * 1024}},
	}
	got := r.Text()
	for _, want := range []string{
		"1000 Deployments × 1 replica, half in each of clusters a and b, client budget QPS 200 / burst 300",
		"40.0s (half complete at 12.0s, 90% at 30.0s)", "100.0s (2.50× by hand; workflow 99.5s)",
		"wave w1 (250 Deployments): 24.5s, from 0.5s to 25.0s",
		"9000 events over 2 run(s) (1 Continue-As-New), largest run 5010 events",
		"worker                               60       80       120      121",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	if (ReleaseResult{}).Overhead() != 0 {
		t.Error("overhead without a by-hand time must be 0")
	}
}

func TestReached(t *testing.T) {
	pts := []Point{{T: 0.5, Updated: 0}, {T: 1, Updated: 3}, {T: 1.5, Updated: 8}}
	tests := []struct {
		give int
		want float64
	}{{0, 0.5}, {3, 1}, {4, 1.5}, {8, 1.5}, {9, -1}}
	for _, tt := range tests {
		if got := reached(pts, tt.give); got != tt.want {
			t.Errorf("reached(%d) = %v, want %v", tt.give, got, tt.want)
		}
	}
}
