package stack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/analysis"
)

func TestModelDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 1500 * time.Millisecond: "1500ms", 90 * time.Second: "1m30s",
		time.Hour: "1h", 2*time.Hour + 5*time.Second: "2h5s", 250 * time.Millisecond: "250ms",
	} {
		if got := model(d); got != want {
			t.Errorf("model(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestStartPrometheus runs Debian's Prometheus from the tools cache (skipped without it) on a
// stack of nothing else, as a stack started with NoTemporal and no Kubernetes would be. The
// first sample takes ~5s: Prometheus hands new targets to its scrapers at most every 5s.
func TestStartPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus")
	}
	tools := DefaultTools()
	if _, err := os.Stat(ToolPath(tools, "prometheus")); err != nil {
		t.Skipf("no prometheus in the tools cache (run `make tools`): %v", err)
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE stack_test_gauge gauge\nstack_test_gauge 42\n")
	}))
	defer target.Close()
	s := &Stack{Opts: Options{Dir: t.TempDir(), Tools: tools}, procs: map[string]*Proc{}}
	defer s.Stop()
	ctx := context.Background()
	host := strings.TrimPrefix(target.URL, "http://")

	addr, err := s.StartPrometheus(ctx, []string{host}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "http://127.0.0.1:") {
		t.Errorf("address %q, want http://127.0.0.1:PORT", addr)
	}
	if _, err := s.StartPrometheus(ctx, []string{host}, time.Second); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second StartPrometheus: %v, want already running", err)
	}
	c, err := analysis.NewClient(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitValue(t, c, "stack_test_gauge", 42)

	p := s.Proc("prometheus")
	s.StopProcess("prometheus")
	if ok, _ := p.Exited(); !ok || s.Proc("prometheus") != nil {
		t.Fatalf("StopProcess(prometheus): exited %t, still listed %t", ok, s.Proc("prometheus") != nil)
	}

	// Again (a fresh data folder), and beside it a second one under another name: Stop stops both.
	if _, err := s.StartPrometheus(ctx, []string{host}, time.Second); err != nil {
		t.Fatal(err)
	}
	addr2, err := s.StartPrometheusAs(ctx, "prometheus-2", []string{host}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := analysis.NewClient(addr2, nil)
	waitValue(t, c2, "stack_test_gauge", 42)
	p1, p2 := s.Proc("prometheus"), s.Proc("prometheus-2")
	s.Stop()
	for _, p := range []*Proc{p1, p2} {
		if ok, _ := p.Exited(); !ok {
			t.Errorf("%s still runs after Stop", p.Name)
		}
	}
}

// TestStartPrometheusExits: a Prometheus that exits at once fails the start with its log.
func TestStartPrometheusExits(t *testing.T) {
	tools := t.TempDir()
	bin := ToolPath(tools, "prometheus")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'err=\"cannot start: boom\"' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Stack{Opts: Options{Dir: t.TempDir(), Tools: tools}, procs: map[string]*Proc{}}
	defer s.Stop()
	_, err := s.StartPrometheus(context.Background(), []string{"127.0.0.1:1"}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "prometheus exited") || !strings.Contains(err.Error(), "cannot start: boom") {
		t.Fatalf("StartPrometheus of a binary that exits: %v, want its exit and log tail", err)
	}
	if s.Proc("prometheus") != nil {
		t.Error("a failed start stays listed")
	}
	conf, err := os.ReadFile(filepath.Join(s.Opts.Dir, "prometheus", "prometheus.yml"))
	if err != nil || !strings.Contains(string(conf), "scrape_interval: 1s") || !strings.Contains(string(conf), `targets: ["127.0.0.1:1"]`) {
		t.Errorf("prometheus.yml: %v\n%s", err, conf)
	}
}

func waitValue(t *testing.T, c *analysis.Client, query string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, ok, err := c.Query(context.Background(), query)
		if err == nil && ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, %t, %v after 20s; want %v", query, v, ok, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
