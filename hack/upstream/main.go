// Command upstream runs Kubernetes' own `[sig-apps] Deployment` e2e specs (the e2e.test binary
// of k8s.io/kubernetes v1.36.3, built by hack/upstream-e2e.sh) against the local stack, once
// with kube-controller-manager's built-in Deployment controller and once with ours, on a fresh
// stack each, at the same client budget, and prints each spec's time side by side.
//
//	go run ./hack/upstream --e2e-test PATH [--budget 20/30] [--focus REGEXP] [--out DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/temporal-rollout/rollout/internal/stack"
)

type options struct {
	e2eTest, tools, bin, out, focus, skip string
	qps, burst                            int
	sides                                 []string
	timeout                               time.Duration
}

// specResult is one spec's outcome on one side.
type specResult struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Seconds float64 `json:"seconds"`
}

// sideResult is one side's run.
type sideResult struct {
	Side  string       `json:"side"`
	Specs []specResult `json:"specs"`
	Err   string       `json:"error,omitempty"`
}

func main() {
	var o options
	var budget, sides string
	flag.StringVar(&o.e2eTest, "e2e-test", "", "the e2e.test binary (hack/upstream-e2e.sh builds it)")
	flag.StringVar(&o.tools, "tools", stack.DefaultTools(), "stack tools folder")
	flag.StringVar(&o.bin, "bin", "bin", "folder holding the built worker and starter")
	flag.StringVar(&o.out, "out", "upstream-out", "folder for the reports and logs")
	flag.StringVar(&o.focus, "focus", `\[sig-apps\] Deployment`, "ginkgo focus")
	flag.StringVar(&o.skip, "skip", `load-balancer`, "ginkgo skip (the load-balancer spec needs a cloud)")
	flag.StringVar(&budget, "budget", "20/30", "client QPS/burst of kube-controller-manager and of our worker and watcher")
	flag.StringVar(&sides, "sides", "built-in,temporal", "which controllers to run")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "limit for each side's e2e run")
	flag.Parse()
	if _, err := fmt.Sscanf(budget, "%d/%d", &o.qps, &o.burst); err != nil || o.qps <= 0 || o.burst <= 0 {
		fail(fmt.Errorf("--budget %q: want <qps>/<burst>", budget))
	}
	o.sides = strings.Split(sides, ",")
	for _, s := range o.sides {
		if s != "built-in" && s != "temporal" {
			fail(fmt.Errorf("--sides: unknown side %q (built-in, temporal)", s))
		}
	}
	if o.e2eTest == "" {
		fail(errors.New("--e2e-test is required (run hack/upstream-e2e.sh)"))
	}
	if _, err := os.Stat(o.e2eTest); err != nil {
		fail(fmt.Errorf("--e2e-test: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fail(err)
	}
	var results []sideResult
	for _, side := range o.sides {
		r := runSide(ctx, o, side)
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	js, _ := json.MarshalIndent(results, "", "  ")
	_ = os.WriteFile(filepath.Join(o.out, "results.json"), js, 0o644)
	table := render(results, o)
	_ = os.WriteFile(filepath.Join(o.out, "results.md"), []byte(table), 0o644)
	fmt.Print(table)
	for _, r := range results {
		if r.Err != "" {
			os.Exit(1)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "upstream:", err)
	os.Exit(2)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[upstream %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func runSide(ctx context.Context, o options, side string) (res sideResult) {
	res.Side = side
	dir, err := os.MkdirTemp("", "rollout-upstream-")
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	logf("%s: starting a fresh stack", side)
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: o.tools, Nodes: 3, Headless: true,
		PodReadyDelay: 300 * time.Millisecond, PodReadyJitter: 400 * time.Millisecond,
		BuiltinDeploymentController: side == "built-in", NoTemporal: side == "built-in",
		KubeAPIQPS: float32(o.qps), KubeAPIBurst: o.burst, Progress: os.Stderr,
	})
	if err != nil {
		res.Err = "start stack: " + err.Error()
		return res
	}
	defer s.Stop()
	if side == "temporal" {
		common := []string{"--kubeconfig", s.Kubeconfig, "--temporal-address", s.TemporalAddress,
			"--kube-qps", strconv.Itoa(o.qps), "--kube-burst", strconv.Itoa(o.burst),
			"--metrics-address", "", "--log-format", "text"}
		// The worker runs the watcher too, as deploy/ does.
		if _, err := s.StartProcess("worker", filepath.Join(o.bin, "worker"), append([]string{"--watch", "--search-attributes"}, common...)...); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	report := filepath.Join(dir, "report.json")
	logPath := filepath.Join(o.out, side+"-e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer logFile.Close()
	rctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, o.e2eTest,
		"--kubeconfig", s.Kubeconfig, "--provider", "skeleton",
		"--ginkgo.focus", o.focus, "--ginkgo.skip", o.skip,
		"--ginkgo.json-report", report, "--ginkgo.no-color", "--ginkgo.v",
		"--report-dir", filepath.Join(dir, "reports"), "--minStartupPods", "0",
		"--system-pods-startup-timeout", "10s", "--node-schedulable-timeout", "1m")
	cmd.Stdout, cmd.Stderr = io.MultiWriter(logFile), logFile
	logf("%s: running e2e.test --ginkgo.focus %q (log: %s)", side, o.focus, logPath)
	start := time.Now()
	runErr := cmd.Run()
	logf("%s: e2e.test ended after %s (%v)", side, time.Since(start).Round(time.Second), runErr)
	specs, err := readReport(report)
	if err != nil {
		res.Err = fmt.Sprintf("read the ginkgo report: %v (e2e.test: %v; see %s)", err, runErr, logPath)
		return res
	}
	res.Specs = specs
	if runErr != nil {
		res.Err = fmt.Sprintf("e2e.test: %v (see %s)", runErr, logPath)
	}
	// Our controller's logs, for a spec that failed or ran long.
	for _, name := range []string{"worker", "watcher", "kube-controller-manager"} {
		if p := s.Proc(name); p != nil {
			_ = os.WriteFile(filepath.Join(o.out, side+"-"+name+".log"), []byte(p.Tail(8<<20)), 0o644)
		}
	}
	return res
}

// readReport reads ginkgo's JSON report: every spec that ran, with its state and run time.
func readReport(path string) ([]specResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suites []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
			RunTime                 time.Duration
		}
	}
	if err := json.Unmarshal(b, &suites); err != nil {
		return nil, err
	}
	var out []specResult
	for _, s := range suites {
		for _, sp := range s.SpecReports {
			if sp.LeafNodeType != "It" || sp.State == "skipped" {
				continue
			}
			out = append(out, specResult{Name: strings.Join(append(sp.ContainerHierarchyTexts, sp.LeafNodeText), " "), State: sp.State, Seconds: sp.RunTime.Seconds()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func render(results []sideResult, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Upstream e2e specs (%s), client QPS %d / burst %d for kube-controller-manager and for our worker\n\n", o.focus, o.qps, o.burst)
	bySide := map[string]map[string]specResult{}
	var names []string
	seen := map[string]bool{}
	for _, r := range results {
		bySide[r.Side] = map[string]specResult{}
		for _, s := range r.Specs {
			bySide[r.Side][s.Name] = s
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	sort.Strings(names)
	b.WriteString("| spec | built-in | ours | ratio |\n|---|---|---|---|\n")
	cell := func(side, name string) (string, float64) {
		s, ok := bySide[side][name]
		if !ok {
			return "—", 0
		}
		if s.State != "passed" {
			return fmt.Sprintf("%s (%.1f s)", s.State, s.Seconds), 0
		}
		return fmt.Sprintf("%.1f s", s.Seconds), s.Seconds
	}
	for _, n := range names {
		bi, bt := cell("built-in", n)
		ou, ot := cell("temporal", n)
		ratio := "—"
		if bt > 0 && ot > 0 {
			ratio = fmt.Sprintf("%.2f×", ot/bt)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.TrimPrefix(n, "[sig-apps] Deployment "), bi, ou, ratio)
	}
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", r.Side, r.Err)
		}
	}
	return b.String()
}
