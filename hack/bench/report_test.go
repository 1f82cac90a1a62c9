package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeReport has rolling-20x10 at two budgets on both sides; the temporal side at 200/300
// failed its update.
func fakeReport(dir string) *Report {
	w, _ := ParseWorkload("rolling-20x10", 100, time.Minute)
	cfg := Config{Workloads: []Workload{w}, Sides: []Side{SideBuiltin, SideOurs}, Budgets: []Budget{{20, 30}, {200, 300}},
		HarnessQPS: 200, HarnessBurst: 400, PodReadyDelay: time.Second, Nodes: 3, Settle: 5 * time.Second,
		PlotWorkload: "rolling-20x10", OutDir: dir, Markdown: filepath.Join(dir, "BENCHMARKS.md"), DocsPNG: filepath.Join(dir, "docs", "p.png")}
	res := func(b Budget, side Side, create, update, p99 float64) Result {
		return Result{Workload: w.Name, Kind: w.Kind, Side: side, Budget: b, Deployments: 20, Replicas: 10, Rolled: 20, Target: 200,
			CreateSeconds: create, UpdateSeconds: update, UpdateWrites: Writes{Deployments: 20, Detail: map[string]int{"deployments PATCH": 20}},
			Freshness: Freshness{Deployments: 20, Intervals: 40, P50: p99 / 4, P99: p99, Max: p99 * 2, TotalMedian: p99, TotalMax: 2 * p99, PhaseSeconds: update + 5},
			Progress:  []Point{{0, 0}, {update / 2, 100}, {update, 200}}, Procs: map[string]*ProcStats{}}
	}
	failed := res(Budget{200, 300}, SideOurs, 2.7, 0, 0)
	failed.Err = "update: timed out"
	return &Report{Cfg: cfg, Started: t0, Finished: t0.Add(time.Hour), Results: []Result{
		res(Budget{20, 30}, SideBuiltin, 12.6, 36.2, 0.5),
		res(Budget{20, 30}, SideOurs, 14.1, 34.1, 0.25),
		res(Budget{200, 300}, SideBuiltin, 1.8, 3.2, 0.004),
		failed,
	}}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	r := fakeReport(dir)
	text := r.Text()
	for _, want := range []string{
		"QPS 20 / burst 30: built-in", "QPS 200 / burst 300: built-in", "ours / built-in",
		"| rolling-20x10 | update→complete  | 36.2s", "34.1s", "0.94×", // 34.1 / 36.2
		"1.12×", // create 14.1 / 12.6
		"0.50×", // stale p99 250ms / 500ms
		"Status freshness during the update", "40 (0)", "250ms", "4ms",
		"FAILED",
		"Writes during the update phase by resource and verb, QPS 20 / burst 30",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	for _, unwanted := range []string{"coalesce", "signal-interval"} {
		if strings.Contains(text+strings.Join(r.settings(), "\n")+r.Markdown(""), unwanted) {
			t.Errorf("report still mentions %q", unwanted)
		}
	}

	// A previous BENCHMARKS.md with a hand-written analysis keeps it.
	if err := os.WriteFile(r.Cfg.Markdown, []byte("# old\n\n## Analysis\n\nBy hand.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(r.Cfg.Markdown)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Analysis\n\nBy hand.\n", "![rollout progress](docs/p.png)", "`--budgets`", "QPS 20 / burst 30 and QPS 200 / burst 300", "### Status freshness during the update"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	for _, f := range []string{"results.json", "results.md", "progress.png", filepath.Join("docs", "p.png")} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}

	// results.json carries each result's budget and freshness, and renders again.
	var back Report
	js, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 4 || back.Results[2].Budget != (Budget{200, 300}) || back.Results[0].Freshness.P99 != 0.5 {
		t.Errorf("results.json round trip: %+v", back.Results)
	}
	out := t.TempDir()
	rendered, err := render(Config{Render: filepath.Join(dir, "results.json"), OutDir: out, Budgets: []Budget{{1, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if rendered.Text() != text {
		t.Errorf("re-rendered text differs")
	}
}

// TestRenderLegacy reads a results.json from before --budgets: one budget in the config.
func TestRenderLegacy(t *testing.T) {
	dir := t.TempDir()
	legacy := `{"config": {"QPS": 20, "Burst": 30, "Coalesce": 100000000, "PlotWorkload": "rolling-20x10"},
		"results": [{"workload": "rolling-20x10", "kind": "rolling", "side": "built-in", "createSeconds": 12.6, "updateSeconds": 36.2, "target": 200, "progress": [{"t": 0, "updated": 0}]},
		            {"workload": "rolling-20x10", "kind": "rolling", "side": "temporal", "createSeconds": 14.1, "updateSeconds": 34.1, "target": 200, "progress": [{"t": 0, "updated": 0}]}]}`
	path := filepath.Join(dir, "old.json")
	if err := os.WriteFile(path, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := render(Config{Render: path, OutDir: filepath.Join(dir, "out"), Budgets: []Budget{{20, 30}, {200, 300}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.budgets(); len(got) != 1 || got[0] != (Budget{20, 30}) {
		t.Errorf("budgets %v, want [20/30]", got)
	}
	if text := rep.Text(); !strings.Contains(text, "0.94×") || strings.Contains(text, "200 / burst 300") {
		t.Errorf("legacy render:\n%s", text)
	}
}
