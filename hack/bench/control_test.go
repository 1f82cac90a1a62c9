package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseWorkerArgs(t *testing.T) {
	tests := []struct {
		give string
		want []string
	}{
		{"", nil},
		{"--local-wait=300ms", []string{"--local-wait=300ms"}},
		{"--local-wait=300ms,--max-concurrent-syncs=8", []string{"--local-wait=300ms", "--max-concurrent-syncs=8"}},
		{" --local-wait 300ms , --log-level=debug ", []string{"--local-wait", "300ms", "--log-level=debug"}},
		{",,", nil},
	}
	for _, tt := range tests {
		if got := ParseWorkerArgs(tt.give); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseWorkerArgs(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestParseFlagsControl(t *testing.T) {
	def := ControlConfig{On: true, Deployments: 100, Replicas: 10, MinReady: 2 * time.Second, Tries: 15, Interval: time.Second, EffectTimeout: 30 * time.Second}
	tests := []struct {
		give       []string
		want       ControlConfig
		budgets    []Budget
		workerArgs []string
		wantErr    bool
	}{
		{give: []string{"--control"}, want: def, budgets: []Budget{{20, 30}, {200, 300}}},
		{give: []string{"--control", "--budgets", "200/300", "--control-deployments", "20", "--control-tries", "5"},
			want:    ControlConfig{On: true, Deployments: 20, Replicas: 10, MinReady: 2 * time.Second, Tries: 5, Interval: time.Second, EffectTimeout: 30 * time.Second},
			budgets: []Budget{{200, 300}}},
		{give: []string{"--control", "--worker-args=--local-wait=300ms"}, want: def, budgets: []Budget{{20, 30}, {200, 300}}, workerArgs: []string{"--local-wait=300ms"}},
		{give: []string{"--worker-args", "--local-wait=300ms,--max-concurrent-syncs 4"}, want: ControlConfig{Deployments: 100, Replicas: 10, MinReady: 2 * time.Second, Tries: 15, Interval: time.Second, EffectTimeout: 30 * time.Second},
			budgets: []Budget{{20, 30}, {200, 300}}, workerArgs: []string{"--local-wait=300ms", "--max-concurrent-syncs", "4"}},
		{give: []string{"--control", "--control-tries", "0"}, wantErr: true},
		{give: []string{"--control", "--control-deployments", "1"}, wantErr: true},
		{give: []string{"--control", "--control-effect-timeout", "0s"}, wantErr: true},
		// Without --control the settings are not checked.
		{give: []string{"--control-tries", "0"}, want: ControlConfig{Deployments: 100, Replicas: 10, MinReady: 2 * time.Second, Interval: time.Second, EffectTimeout: 30 * time.Second},
			budgets: []Budget{{20, 30}, {200, 300}}},
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
		if c.Control != tt.want {
			t.Errorf("%q: control %+v, want %+v", tt.give, c.Control, tt.want)
		}
		if !reflect.DeepEqual(c.Budgets, tt.budgets) {
			t.Errorf("%q: budgets %v, want %v", tt.give, c.Budgets, tt.budgets)
		}
		if !reflect.DeepEqual(c.WorkerArgs, tt.workerArgs) {
			t.Errorf("%q: worker args %q, want %q", tt.give, c.WorkerArgs, tt.workerArgs)
		}
	}
}

func TestControlStepped(t *testing.T) {
	tests := []struct {
		deployments, tries     int
		wantPromote, wantAbort int
	}{
		{100, 15, 5, 15}, // 15 promotes at 3 a Deployment, 15 aborts at 1
		{100, 10, 4, 10},
		{20, 15, 2, 8}, // at most half of 20: 10 stepped
		{4, 15, 1, 1},
	}
	for _, tt := range tests {
		p, a := ControlConfig{Deployments: tt.deployments, Tries: tt.tries}.stepped()
		if p != tt.wantPromote || a != tt.wantAbort {
			t.Errorf("%d Deployments, %d tries: got %d promote, %d abort; want %d, %d", tt.deployments, tt.tries, p, a, tt.wantPromote, tt.wantAbort)
		}
	}
}

// samples makes one successful sample per value (seconds), with the CLI taking 0.1s longer.
func samples(cmd string, secs ...float64) []ControlSample {
	var out []ControlSample
	for _, s := range secs {
		out = append(out, ControlSample{Command: cmd, Seconds: s, CommandSeconds: s + 0.1})
	}
	return out
}

func TestControlStats(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i+1) / 100 // 0.01 … 1.00
	}
	tests := []struct {
		name string
		give []ControlSample
		want []ControlStat
	}{
		{name: "none", give: nil, want: nil},
		{
			name: "order and failures",
			give: append(append(samples(cmdQuery, 0.3, 0.1, 0.2), samples(cmdPause, 0.05)...),
				ControlSample{Command: cmdPause, Err: "no effect within 30s"}),
			want: []ControlStat{
				{Command: cmdPause, Measure: controlMeasures[cmdPause], Count: 1, Failed: 1, Median: 0.05, P99: 0.05, Max: 0.05, CLIMedian: 0.15000000000000002, CLIP99: 0.15000000000000002},
				{Command: cmdQuery, Measure: controlMeasures[cmdQuery], Count: 3, Median: 0.2, P99: 0.3, Max: 0.3, CLIMedian: 0.30000000000000004, CLIP99: 0.4},
			},
		},
		{
			name: "nearest rank over 100",
			give: samples(cmdKPause, hundred...),
			want: []ControlStat{{Command: cmdKPause, Measure: controlMeasures[cmdKPause], Count: 100, Median: 0.5, P99: 0.99, Max: 1, CLIMedian: 0.6, CLIP99: 1.09}},
		},
	}
	for _, tt := range tests {
		got := controlStats(tt.give)
		if len(got) != len(tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			g, w := got[i], tt.want[i]
			near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
			if g.Command != w.Command || g.Measure != w.Measure || g.Count != w.Count || g.Failed != w.Failed ||
				!near(g.Median, w.Median) || !near(g.P99, w.P99) || !near(g.Max, w.Max) || !near(g.CLIMedian, w.CLIMedian) || !near(g.CLIP99, w.CLIP99) {
				t.Errorf("%s: row %d: got %+v, want %+v", tt.name, i, g, w)
			}
		}
	}
}

func TestControlStatMeets(t *testing.T) {
	tests := []struct {
		give ControlStat
		want bool
	}{
		{ControlStat{Count: 10, Median: 0.2, P99: 1}, true},
		{ControlStat{Count: 10, Median: 0.21, P99: 0.5}, false},
		{ControlStat{Count: 10, Median: 0.1, P99: 1.01}, false},
		{ControlStat{Count: 10, Failed: 1, Median: 0.1, P99: 0.2}, false},
		{ControlStat{}, false},
	}
	for _, tt := range tests {
		if got := tt.give.Meets(); got != tt.want {
			t.Errorf("%+v: Meets() = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestControlReport(t *testing.T) {
	ours := append(samples(cmdPause, 0.12, 0.08), samples(cmdQuery, 0.25)...)
	builtin := samples(cmdKPause, 0, 0.004)
	r := &ControlReport{
		Started: t0, Finished: t0.Add(time.Hour), WorkerArgs: []string{"--local-wait=300ms"},
		Settings: ControlConfig{Deployments: 100, Replicas: 10, MinReady: 2 * time.Second, Tries: 15, Interval: time.Second},
		Runs: []ControlRun{
			{Side: SideBuiltin, Budget: Budget{20, 30}, Deployments: 100, Replicas: 10, CreateSeconds: 30, CommandsSeconds: 40, Rolling: 60, Samples: builtin, Stats: controlStats(builtin)},
			{Side: SideOurs, Budget: Budget{20, 30}, Deployments: 100, Replicas: 10, CreateSeconds: 31, CommandsSeconds: 41, Rolling: 70, Samples: ours, Stats: controlStats(ours)},
			{Side: SideOurs, Budget: Budget{200, 300}, Err: "start stack: no etcd"},
		},
	}
	text := r.Text()
	for _, want := range []string{
		"Control latency while Deployments roll, QPS 20 / burst 30 (target: median ≤ 200ms, p99 ≤ 1s)",
		"Control latency while Deployments roll, QPS 200 / burst 300",
		"| built-in | kubectl rollout pause | return → spec.paused true",
		"| temporal | pause                 | signal return → spec.paused true",
		"| 2 | 80ms   | 120ms | 120ms | 180ms      | 220ms   | 0      | yes",
		"| temporal | query status", "250ms", "| no ",
		"FAILED", "start stack: no etcd",
		"100 Deployments x 10 replicas available after 31.0s; the commands ran for 41.0s from the update, 70 Deployments still rolling at the end.",
		"Our worker ran with `--local-wait=300ms`.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "control.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back ControlReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 3 || back.Runs[1].Stats[0].Median != 0.08 || back.Runs[2].Err == "" {
		t.Errorf("control.json read back: %+v", back.Runs)
	}
	md, err := os.ReadFile(filepath.Join(dir, "control.md"))
	if err != nil || !strings.Contains(string(md), "## Control latency while Deployments roll, QPS 20 / burst 30") {
		t.Errorf("control.md: %v\n%s", err, md)
	}
}

func TestUpdatePatch(t *testing.T) {
	tests := []struct {
		image, steps string
		want         string
	}{
		{imageV2, "", `{"spec":{"template":{"spec":{"containers":[{"image":"registry.local/bench/app:v2","name":"app"}]}}}}`},
		{imageV2, abortSteps, `{"metadata":{"annotations":{"temporal-rollout.io/steps":"[{\"setWeight\":50},{\"pause\":{}}]"}},"spec":{"template":{"spec":{"containers":[{"image":"registry.local/bench/app:v2","name":"app"}]}}}}`},
	}
	for _, tt := range tests {
		if got := string(updatePatch(tt.image, tt.steps)); got != tt.want {
			t.Errorf("updatePatch(%q, %q) = %s, want %s", tt.image, tt.steps, got, tt.want)
		}
	}
}
