package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// soakResult is what e2e TestTrafficSoak writes to SOAK_REPORT: "key value" lines.
type soakResult map[string]int64

// runSoak runs the data-plane soak (e2e TestTrafficSoak: requests through Traefik while 30
// rollouts move, aborts at every weight from 10 to 100) and records its figures in
// <out>/soak.txt and, unless --markdown is empty, as a dated section of BENCHMARKS.md.
func runSoak(ctx context.Context, cfg Config) error {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	report, err := filepath.Abs(filepath.Join(cfg.OutDir, "soak.txt"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-tags", "e2e", "-count=1", "-p", "1", "-timeout", "30m", "-v", "-run", "^TestTrafficSoak$", "./e2e/")
	cmd.Env = append(os.Environ(), "SOAK_REPORT="+report)
	log, err := os.Create(filepath.Join(cfg.OutDir, "soak.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	fmt.Fprintf(os.Stderr, "bench: traffic soak (e2e TestTrafficSoak), log in %s\n", log.Name())
	runErr := cmd.Run()
	res, err := readSoak(report)
	if err != nil {
		return fmt.Errorf("traffic soak: %v (the test: %v; see %s)", err, runErr, log.Name())
	}
	text := res.markdown(time.Now().UTC(), runErr == nil)
	fmt.Print(text)
	if cfg.Markdown != "" {
		f, err := os.OpenFile(cfg.Markdown, os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteString("\n" + text); err != nil {
			return err
		}
	}
	if runErr != nil {
		return fmt.Errorf("traffic soak failed: %v (see %s)", runErr, log.Name())
	}
	return nil
}

func readSoak(path string) (soakResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := soakResult{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", path, sc.Text())
		}
		res[k] = n
	}
	if _, ok := res["requests"]; !ok {
		return nil, fmt.Errorf("%s has no requests line", path)
	}
	return res, sc.Err()
}

// markdown is the soak's BENCHMARKS.md section.
func (r soakResult) markdown(at time.Time, passed bool) string {
	verdict := "passed"
	if !passed {
		verdict = "FAILED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: traffic soak (`make bench BENCH_FLAGS=--traffic-soak`)\n\n", at.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "e2e `TestTrafficSoak` (docs/traffic.md#the-soak), %s: %d rollouts across 6 Deployments in %d s, requests through Traefik without pause.\n\n",
		verdict, r["rollouts"], r["seconds"])
	b.WriteString("| requests | per second | failed | samples (one begun every 50 ms) | ticks without a sample | with a weighted backend and no pod | aborts | abort → 100% on stable pods, median | p99 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d ms | %d ms |\n", r["requests"], r["rate"], r["failed"], r["samples"], r["skipped_samples"], r["bad_samples"], r["aborts"], r["abort_median_ms"], r["abort_p99_ms"])
	return b.String()
}
