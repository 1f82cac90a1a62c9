//go:build e2e

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuick runs the harness in --quick mode end to end: both controllers, each on a fresh
// stack, one Deployment x 2 replicas at one client budget, and checks that it produced
// numbers, status freshness included.
func TestQuick(t *testing.T) {
	bin := t.TempDir()
	for _, pkg := range []string{"worker", "starter"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, pkg), "../../"+pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("build %s: %v", pkg, err)
		}
	}
	cfg, err := parseFlags([]string{"--quick", "--bin", bin, "--out", t.TempDir(), "--timeout", "5m"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Markdown != "" || cfg.DocsPNG != "" {
		t.Fatalf("--quick must not write BENCHMARKS.md or docs: %q %q", cfg.Markdown, cfg.DocsPNG)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if rep != nil {
		t.Log("\n" + rep.Text())
	}
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	if len(cfg.Budgets) != 1 {
		t.Fatalf("--quick runs %d budgets, want 1", len(cfg.Budgets))
	}
	if len(rep.Results) != 2 {
		t.Fatalf("got %d results, want 2 (one per controller)", len(rep.Results))
	}
	text := rep.Text()
	for _, want := range []string{"Status freshness during the update", cfg.Budgets[0].String(), "ours / built-in"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, res := range rep.Results {
		name := res.Workload + " at " + res.Budget.String() + " on " + string(res.Side)
		if res.Budget != cfg.Budgets[0] {
			t.Errorf("%s: budget %v, want %v", name, res.Budget, cfg.Budgets[0])
		}
		// The update makes the status stale (its old ReplicaSet is no longer the new one)
		// until the controller writes it: at least one interval, none longer than the phase.
		if f := res.Freshness; f.Deployments != 1 || f.Intervals < 1 || f.Events == 0 || f.Err != "" ||
			f.Max <= 0 || f.Max > f.PhaseSeconds || f.P99 > f.Max || f.PerDeployment["app-0000"] <= 0 {
			t.Errorf("%s: status freshness %+v; want ≥ 1 stale interval of 1 Deployment within the phase", name, f)
		}
		if res.Err != "" {
			t.Errorf("%s: %s", name, res.Err)
		}
		if res.CreateSeconds <= 0 || res.UpdateSeconds <= 0 {
			t.Errorf("%s: create→available %.2fs, update→complete %.2fs; want both > 0", name, res.CreateSeconds, res.UpdateSeconds)
		}
		// The harness's own writes (1 create, 1 patch) come on top of the controller's.
		if res.CreateWrites.Total() <= 1 || res.UpdateWrites.Total() <= 1 {
			t.Errorf("%s: writes create %d, update %d; want more than the harness's own", name, res.CreateWrites.Total(), res.UpdateWrites.Total())
		}
		if res.UpdateWrites.ReplicaSets == 0 {
			t.Errorf("%s: no ReplicaSet writes during the update", name)
		}
		if res.Bounds.Worst() != 0 || res.Bounds.Breaches != 0 {
			t.Errorf("%s: bounds breached: %+v", name, res.Bounds)
		}
		if res.Bounds.Events == 0 {
			t.Errorf("%s: the bounds observer saw no events", name)
		}
		if len(res.Progress) == 0 {
			t.Errorf("%s: no progress samples", name)
		}
		if kcm := res.Procs["kube-controller-manager"]; kcm == nil || kcm.CPUSeconds <= 0 || kcm.PeakRSSKB <= 0 {
			t.Errorf("%s: no kube-controller-manager CPU/RSS: %+v", name, kcm)
		}
		for _, proc := range []string{"etcd", "kube-scheduler", "kwok"} {
			if p := res.Procs[proc]; p == nil || p.CPUSeconds <= 0 {
				t.Errorf("%s: no %s CPU: %+v", name, proc, p)
			}
		}
		if m := res.MachineUpdate; m == nil || m.Seconds <= 0 || m.Busy <= 0 || m.Busy > m.Seconds {
			t.Errorf("%s: machine CPU over the update %+v, want busy within the interval's", name, m)
		}
		switch res.Side {
		case SideOurs:
			ts := res.Temporal
			if ts == nil || ts.Rollouts != 1 || len(ts.Events) != 1 || ts.Events[0] < 1 {
				t.Errorf("%s: Temporal stats %+v; want at least 1 history event for the rollout", name, ts)
			} else if ts.WorkflowTasks[0] < 1 || ts.LocalActivities[0] < 1 {
				t.Errorf("%s: Temporal stats %+v; want workflow tasks and local activities", name, ts)
			}
			if st := res.Procs["worker"]; st == nil || st.CPUSeconds <= 0 || st.PeakRSSKB <= 0 {
				t.Errorf("%s: no worker CPU/RSS: %+v", name, st)
			}
			// The worker runs the watcher (--watch): no process of its own.
			if st := res.Procs["watcher"]; st != nil {
				t.Errorf("%s: a watcher process ran (%+v); the worker runs it", name, st)
			}
			// The create along the workflow's first run: started, then picked, then done.
			if p := res.StartPath; p == nil || p.Deployments != 1 || p.StartedMedian <= 0 ||
				p.PickedMedian < p.StartedMedian || p.DecidedMedian < p.PickedMedian {
				t.Errorf("%s: start path %+v; want started ≤ picked ≤ done, all after the creates began", name, p)
			}
			// The update along the workflow's runs: the watcher's signal, then picked, then done.
			if p := res.UpdatePath; p == nil || p.Deployments != 1 || p.StartedMedian <= 0 ||
				p.PickedMedian < p.StartedMedian || p.DecidedMedian < p.PickedMedian {
				t.Errorf("%s: update path %+v; want signalled ≤ picked ≤ done, all after the update began", name, p)
			}
		case SideBuiltin:
			if res.Temporal != nil {
				t.Errorf("%s: Temporal stats on the built-in side", name)
			}
		}
	}
	for _, f := range []string{"results.json", "results.md", "progress.png"} {
		if st, err := os.Stat(filepath.Join(cfg.OutDir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", f, err)
		}
	}
}
