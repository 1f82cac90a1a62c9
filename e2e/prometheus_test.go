//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/analysis"
)

// startPromTarget serves /metrics on a free loopback port, in Prometheus's text format, with
// the gauge rollout_test_success_rate at the value last given to set (absent until then). It
// returns the target (host:port) for startPrometheus; the test's end closes it.
func startPromTarget(t *testing.T) (target string, set func(float64)) {
	t.Helper()
	var (
		mu    sync.Mutex
		value float64
		isSet bool
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		v, ok := value, isSet
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if ok {
			fmt.Fprintf(w, "# HELP rollout_test_success_rate Set by the test.\n# TYPE rollout_test_success_rate gauge\nrollout_test_success_rate %g\n", v)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func(v float64) {
		mu.Lock()
		defer mu.Unlock()
		value, isSet = v, true
	}
}

// startPrometheus runs a Prometheus of the test's own (beside the suite's env.prom, which the
// worker queries) scraping target every second, and returns its address (http://host:port).
// It is the stack's process "prometheus-<test name>"; the test's end stops it.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	name := "prometheus-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, err := env.stack.StartPrometheusAs(ctx, name, []string{target}, time.Second)
	if err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() { env.stack.StopProcess(name) })
	return addr
}

// TestPrometheusClient runs the analysis package's client against Debian's Prometheus (the
// tools cache's) scraping a target the test sets: one value, a change of it, no data, a bad
// query, several series, an infinite value, and the server gone.
func TestPrometheusClient(t *testing.T) {
	target, set := startPromTarget(t)
	addr := startPrometheus(t, target)
	c, err := analysis.NewClient(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// waitFor polls until the query returns want: the first scrape comes a few seconds after
	// the start (Prometheus hands new targets to its scrapers at most every 5s), a new value
	// within a scrape interval.
	waitFor := func(query string, want float64) {
		t.Helper()
		start := time.Now()
		var (
			v   float64
			ok  bool
			err error
		)
		for time.Since(start) < 30*time.Second {
			if v, ok, err = c.Query(ctx, query); err == nil && ok && v == want {
				t.Logf("%s = %g after %s", query, v, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s = %v, ok %t, err %v after 30s; want %g", query, v, ok, err, want)
	}

	if v, ok, err := c.Query(ctx, "rollout_test_success_rate"); err != nil || ok {
		t.Errorf("before the gauge is set: %v, ok %t, err %v; want no data", v, ok, err)
	}
	set(0.97)
	waitFor("rollout_test_success_rate", 0.97)
	set(0.5)
	waitFor("rollout_test_success_rate", 0.5)
	waitFor("scalar(rollout_test_success_rate)", 0.5)
	waitFor(`up{job="test"}`, 1)

	if v, ok, err := c.Query(ctx, "rollout_test_metric_that_does_not_exist"); err != nil || ok {
		t.Errorf("a metric that does not exist: %v, ok %t, err %v; want no data (ok=false, no error)", v, ok, err)
	}
	_, ok, err := c.Query(ctx, "rollout_test_success_rate{")
	if err == nil || ok || !strings.Contains(err.Error(), "bad_data") || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("a bad query: ok %t, err %v; want Prometheus's bad_data parse error", ok, err)
	}
	if _, _, err := c.Query(ctx, `{job="test"}`); err == nil || !strings.Contains(err.Error(), "series") {
		t.Errorf("every series of the job: %v, want an error naming several series", err)
	} else {
		t.Logf("several series: %v", err)
	}
	if _, _, err := c.Query(ctx, "rollout_test_success_rate / 0"); err == nil || !strings.Contains(err.Error(), "Inf") {
		t.Errorf("a division by zero: %v, want an error saying the value is +Inf", err)
	}

	// The suite's Prometheus, which the worker queries, is another process: stopping ours
	// leaves it up.
	name := "prometheus-" + t.Name()
	env.stack.StopProcess(name)
	if env.stack.Proc(name) != nil {
		t.Errorf("%s still listed after StopProcess", name)
	}
	if _, _, err := c.Query(ctx, "rollout_test_success_rate"); err == nil {
		t.Error("a query to the stopped Prometheus succeeded")
	}
	if env.prom != nil {
		suite, err := analysis.NewClient(env.prom.address, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok, err := suite.Query(ctx, `up{job="test"}`); err != nil || !ok || v != 1 {
			t.Errorf("the suite's Prometheus after ours stopped: up = %v, ok %t, err %v; want 1", v, ok, err)
		}
	}
}
