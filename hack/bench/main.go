// Command bench is `make bench`: it runs the same Deployment workloads on the same kind of
// local stack twice, once with kube-controller-manager's built-in Deployment controller and
// once with the built-in controller off (`--controllers=*,-deployment`) and our worker and
// watcher in its place, and reports wall times, status freshness, apiserver writes, bound
// breaches, Temporal history sizes and process CPU and memory. Every workload runs at every
// client budget (by default QPS 20 / burst 30, kube-controller-manager's default, and QPS 200 /
// burst 300), the same for kube-controller-manager and for our worker and watcher. Every
// workload on every side at every budget gets a fresh stack that is stopped afterwards.
//
// It prints a table, writes bench-out/ (results.json, progress.png, the tables) and, for a
// full run, BENCHMARKS.md and docs/bench-progress.png.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// Side is one of the two controllers under test.
type Side string

const (
	// SideBuiltin is kube-controller-manager with its own Deployment controller.
	SideBuiltin Side = "built-in"
	// SideOurs is the built-in controller off, our worker and watcher on.
	SideOurs Side = "temporal"
)

// Budget is a client budget, the same for kube-controller-manager (`--kube-api-qps`,
// `--kube-api-burst`) and for our worker and watcher (`--kube-qps`, `--kube-burst`).
type Budget struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

// String is "QPS 20 / burst 30".
func (b Budget) String() string { return fmt.Sprintf("QPS %s / burst %d", fmtNum(b.QPS), b.Burst) }

// Short is "20/30", the --budgets syntax.
func (b Budget) Short() string { return fmtNum(b.QPS) + "/" + strconv.Itoa(b.Burst) }

// ParseBudgets reads a comma-separated list of <qps>/<burst>.
func ParseBudgets(s string) ([]Budget, error) {
	var out []Budget
	seen := map[Budget]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		q, b, ok := strings.Cut(part, "/")
		if !ok {
			return nil, fmt.Errorf("budget %q: want <qps>/<burst>, for example 20/30", part)
		}
		qps, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
		if err != nil || qps <= 0 {
			return nil, fmt.Errorf("budget %q: qps must be a number > 0", part)
		}
		burst, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || burst <= 0 {
			return nil, fmt.Errorf("budget %q: burst must be an integer > 0", part)
		}
		bu := Budget{QPS: qps, Burst: burst}
		if !seen[bu] {
			seen[bu] = true
			out = append(out, bu)
		}
	}
	return out, nil
}

// Config is everything a run needs; flags fill it.
type Config struct {
	Workloads []Workload
	Sides     []Side

	// Budgets are the client budgets every workload runs at, each the same for
	// kube-controller-manager and for our worker and watcher.
	Budgets []Budget
	// HarnessQPS and HarnessBurst are the harness's own client budget (high, so the harness
	// is not the bottleneck).
	HarnessQPS   float64
	HarnessBurst int

	PodReadyDelay, PodReadyJitter time.Duration
	Nodes                         int
	// Idle is how long the scale workload sits managed and idle before its rollout.
	Idle time.Duration
	// Hold is how long the held workload's rollouts are held at their step.
	Hold time.Duration
	// Rolled is how many of the scale workload's Deployments are rolled at once.
	Rolled int
	// Workers is how many of our workers share the task queue (our side).
	Workers int
	// SeparateWatcher: our side runs the watcher as its own process (`starter watch`)
	// instead of inside each worker (`worker --watch`).
	SeparateWatcher bool
	// Profile runs our processes with --pprof (the Temporal server on PostgreSQL with its
	// pprof port) and saves their heap after the idle period and their CPU profile over the
	// first CPUProfile of the update phase.
	Profile    bool
	CPUProfile time.Duration
	// Temporal is the Temporal under our side: the dev server or the Temporal server on
	// PostgreSQL with several history shards.
	Temporal stack.TemporalMode
	// Settle is how long to wait after a phase completes before the closing scrape, so
	// trailing writes (status updates) count on both sides.
	Settle time.Duration
	// Timeout bounds each phase (create, update).
	Timeout time.Duration

	Bin   string
	Tools string
	// OutDir receives results.json, results.md and the plot.
	OutDir string
	// Markdown is the BENCHMARKS.md path; empty skips it.
	Markdown string
	// DocsPNG is where the plot is copied for BENCHMARKS.md; empty skips it.
	DocsPNG string
	// PlotWorkload is the workload whose rollout progress is plotted.
	PlotWorkload string
	Keep         bool
	Quick        bool
	// Render re-renders the outputs from a results.json instead of running.
	Render string `json:"-"`
	// Abort, when > 0, runs only the abort measurement (abort.go) with that many replicas.
	Abort int `json:"-"`
	// Release, when > 0, runs only the release measurement (release.go) with that many
	// Deployments.
	Release int `json:"-"`
	// TrafficSoak: run only the traffic soak (soak.go).
	TrafficSoak bool `json:"-"`
	// WorkerArgs are appended to each of our workers' command lines (--worker-args), so two
	// designs can be compared, for example --local-wait=300ms.
	WorkerArgs []string `json:"workerArgs,omitempty"`
	// Control runs only the control measurement (control.go) with these settings.
	Control ControlConfig `json:"-"`
	// Log receives progress lines.
	Log io.Writer `json:"-"`
}

const (
	defaultWorkloads = "rolling-20x10,rolling-100x10,recreate-20x10,scale-1000"
	defaultBudgets   = "20/30,200/300"
	// quickBudgets is --quick's single budget.
	quickBudgets = "200/300"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.Render != "" {
		rep, err := render(cfg)
		if err == nil {
			fmt.Print(rep.Text())
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Control.On {
		rep, err := runControl(ctx, cfg)
		if rep != nil {
			fmt.Println()
			fmt.Print(rep.Text())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if cfg.TrafficSoak {
		if err := runSoak(ctx, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if cfg.Release > 0 {
		runSingle(ctx, cfg, stop, cfg.Release, runRelease)
		return
	}
	if cfg.Abort > 0 {
		runSingle(ctx, cfg, stop, cfg.Abort, runAbort)
		return
	}
	rep, err := Run(ctx, cfg)
	if rep != nil {
		fmt.Println()
		fmt.Print(rep.Text())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

func parseFlags(args []string) (Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var c Config
	workloads := fs.String("workloads", defaultWorkloads, "comma-separated workloads: rolling-<N>x<R>, recreate-<N>x<R>, canary-<N>x<R> (steps 20%, 30s, 60%, 30s), held-<N>x<R> (50%, held --hold), scale-<N>")
	sides := fs.String("sides", string(SideBuiltin)+","+string(SideOurs), "controllers to run: built-in, temporal")
	budgets := fs.String("budgets", defaultBudgets, "comma-separated client budgets <qps>/<burst>, each the same for kube-controller-manager and for our worker and watcher; every workload runs at each (--quick: "+quickBudgets+")")
	qps := fs.Float64("qps", 20, "shorthand for a single budget: --qps Q --burst B is --budgets Q/B")
	burst := fs.Int("burst", 30, "shorthand for a single budget, with --qps")
	fs.Float64Var(&c.HarnessQPS, "harness-qps", 200, "the harness's own client QPS")
	fs.IntVar(&c.HarnessBurst, "harness-burst", 400, "the harness's own client burst")
	fs.DurationVar(&c.PodReadyDelay, "pod-ready-delay", time.Second, "kwok: time before a scheduled pod becomes Ready")
	fs.DurationVar(&c.PodReadyJitter, "pod-ready-jitter", 500*time.Millisecond, "kwok: random extra time before Ready")
	fs.IntVar(&c.Nodes, "nodes", 3, "kwok nodes")
	fs.DurationVar(&c.Idle, "idle", time.Minute, "scale workload: idle time before the rollout")
	fs.DurationVar(&c.Hold, "hold", 5*time.Minute, "held workload: how long the rollout is held at its step (a timed pause)")
	fs.IntVar(&c.Rolled, "rolled", 100, "scale workload: Deployments rolled at once")
	fs.IntVar(&c.Workers, "workers", 1, "our side: workers sharing the task queue (worker, worker-2, ...)")
	fs.BoolVar(&c.SeparateWatcher, "separate-watcher", false, "our side: run the watcher as its own process (starter watch) instead of inside each worker (worker --watch)")
	fs.BoolVar(&c.Profile, "profile", false, "our side: run the worker(s) and watcher with --pprof (and, with --temporal cluster, the Temporal server with its pprof port), save their heap profiles after the scale workload's idle period and CPU profiles of the update phase (--cpu-profile long) to <out>/profiles/")
	fs.DurationVar(&c.CPUProfile, "cpu-profile", 30*time.Second, "with --profile: how long the CPU profiles of the update phase run")
	temporalMode := fs.String("temporal", "dev", "our side's Temporal: dev (the dev server, one shard) or cluster (the Temporal server on PostgreSQL, 4 history shards)")
	fs.DurationVar(&c.Settle, "settle", 5*time.Second, "wait after each phase before the closing scrape")
	fs.DurationVar(&c.Timeout, "timeout", 20*time.Minute, "limit for each phase")
	fs.StringVar(&c.Bin, "bin", "bin", "folder holding the built worker and starter")
	fs.StringVar(&c.Tools, "tools", "", "stack tools folder (default: the hack/tools.sh cache)")
	fs.StringVar(&c.OutDir, "out", "bench-out", "output folder (results.json, results.md, progress.png)")
	fs.StringVar(&c.Markdown, "markdown", "BENCHMARKS.md", "BENCHMARKS.md to write; empty skips (skipped in --quick unless set)")
	fs.StringVar(&c.DocsPNG, "docs-png", "docs/bench-progress.png", "copy of the progress plot for BENCHMARKS.md; empty skips (skipped in --quick unless set)")
	fs.StringVar(&c.PlotWorkload, "plot", "rolling-100x10", "workload whose rollout progress is plotted")
	fs.BoolVar(&c.Keep, "keep", false, "keep each stack's folder (logs) instead of deleting it")
	fs.BoolVar(&c.Quick, "quick", false, "smoke test: one workload, 1 Deployment x 2 replicas, one budget ("+quickBudgets+")")
	fs.IntVar(&c.Abort, "abort", 0, "run only the abort measurement: one Deployment of N replicas, abort and promote from setWeight 50 against a forward rollout, at the last --budgets budget")
	rel := releaseFlag{n: &c.Release}
	fs.Var(rel, "release", fmt.Sprintf("run only the release measurement: N Deployments (--release alone: %d; a multiple of 8) in two clusters, a new image on all at once by hand against a release in 4 waves, at the last --budgets budget; writes <out>/release.json", defaultReleaseDeployments))
	workerArgs := fs.String("worker-args", "", "our side: extra arguments appended to each worker's command line, comma- or space-separated, for example --worker-args=--local-wait=300ms")
	fs.BoolVar(&c.TrafficSoak, "traffic-soak", false, "run only the traffic soak: e2e TestTrafficSoak (30 rollouts, aborts at every weight, requests through Traefik), its figures to <out>/soak.txt and BENCHMARKS.md")
	fs.BoolVar(&c.Control.On, "control", false, "run only the control measurement: time from a CLI command's return (temporal workflow signal/query/update, kubectl rollout pause/resume/undo) to its effect while Deployments roll, at every --budgets budget on every --sides side")
	fs.IntVar(&c.Control.Deployments, "control-deployments", 100, "with --control: Deployments rolling while the commands run")
	fs.IntVar(&c.Control.Replicas, "control-replicas", 10, "with --control: replicas per Deployment")
	fs.DurationVar(&c.Control.MinReady, "control-min-ready", 2*time.Second, "with --control: the Deployments' minReadySeconds (RollingUpdate maxSurge 1, maxUnavailable 0), so rollouts last a while")
	fs.IntVar(&c.Control.Tries, "control-tries", 15, "with --control: commands of each kind")
	fs.DurationVar(&c.Control.Interval, "control-interval", time.Second, "with --control: spacing between two commands of one kind")
	fs.DurationVar(&c.Control.EffectTimeout, "control-effect-timeout", 30*time.Second, "with --control: how long to wait for a command's effect before counting it failed")
	fs.StringVar(&c.Render, "render", "", "write the outputs again from a results.json instead of running (with the current --out, --markdown, --docs-png)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Release == defaultReleaseDeployments && fs.NArg() > 0 {
		// "--release N": --release also goes without a value, so N stopped the parse.
		if _, err := strconv.Atoi(fs.Arg(0)); err == nil {
			if err := rel.Set(fs.Arg(0)); err != nil {
				return c, err
			}
			if err := fs.Parse(fs.Args()[1:]); err != nil {
				return c, err
			}
		}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.Release > 0 {
		if _, err := releaseLayout(c.Release); err != nil {
			return c, err
		}
	}
	mode, err := stack.ParseTemporalMode(*temporalMode)
	if err != nil {
		return c, fmt.Errorf("--temporal: %w", err)
	}
	c.Temporal = mode
	c.WorkerArgs = ParseWorkerArgs(*workerArgs)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Quick {
		if !set["workloads"] {
			*workloads = "rolling-1x2"
		}
		if !set["plot"] {
			c.PlotWorkload = "rolling-1x2"
		}
		if !set["markdown"] {
			c.Markdown = ""
		}
		if !set["docs-png"] {
			c.DocsPNG = ""
		}
		if !set["budgets"] {
			*budgets = quickBudgets
		}
	}
	switch {
	case set["budgets"] && (set["qps"] || set["burst"]):
		return c, errors.New("--budgets and --qps/--burst are exclusive")
	case set["qps"] || set["burst"]:
		*budgets = fmt.Sprintf("%s/%d", fmtNum(*qps), *burst)
	}
	if c.Budgets, err = ParseBudgets(*budgets); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*sides, ",") {
		switch Side(strings.TrimSpace(s)) {
		case SideBuiltin:
			c.Sides = append(c.Sides, SideBuiltin)
		case SideOurs:
			c.Sides = append(c.Sides, SideOurs)
		default:
			return c, fmt.Errorf("unknown side %q (want %s or %s)", s, SideBuiltin, SideOurs)
		}
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(*workloads, ",") {
		w, err := ParseWorkload(strings.TrimSpace(name), c.Rolled, c.Idle)
		if err != nil {
			return c, err
		}
		w.Hold = c.Hold
		if !seen[w.Name] {
			seen[w.Name] = true
			c.Workloads = append(c.Workloads, w)
		}
	}
	if !set["plot"] && !seen[c.PlotWorkload] && len(c.Workloads) > 0 {
		// A subset without the default plot workload plots its first workload.
		c.PlotWorkload = c.Workloads[0].Name
	}
	if c.HarnessQPS <= 0 || c.HarnessBurst <= 0 {
		return c, errors.New("harness qps and burst must be > 0")
	}
	if c.Control.On {
		if err := c.Control.validate(); err != nil {
			return c, err
		}
	}
	c.Log = os.Stderr
	return c, nil
}

// ParseWorkerArgs splits --worker-args on commas and white space: "--local-wait=300ms,--foo 1"
// is ["--local-wait=300ms", "--foo", "1"].
func ParseWorkerArgs(s string) []string {
	args := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(args) == 0 {
		return nil
	}
	return args
}

// Run runs every workload at every budget on every side, each on a fresh stack, then writes
// the outputs. It returns the report even when some workload failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Tools == "" {
		cfg.Tools = stack.DefaultTools()
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return nil, err
	}
	cfg.Bin = bin
	if cfg.hasSide(SideOurs) {
		for _, b := range []string{"worker", "starter"} {
			if _, err := os.Stat(filepath.Join(cfg.Bin, b)); err != nil {
				return nil, fmt.Errorf("%s not built in %s (run `make build`): %w", b, cfg.Bin, err)
			}
		}
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Cfg: cfg, Machine: describeMachine()}
	var errs []error
	n, total := 0, len(cfg.Workloads)*len(cfg.Budgets)*len(cfg.Sides)
run:
	for _, w := range cfg.Workloads {
		for _, b := range cfg.Budgets {
			for _, side := range cfg.Sides {
				if ctx.Err() != nil {
					errs = append(errs, ctx.Err())
					break run
				}
				n++
				what := fmt.Sprintf("%s at %s on %s", w.Name, b, side)
				logf(cfg.Log, "==== %s (%d of %d) ====", what, n, total)
				res := runOne(ctx, cfg, w, b, side)
				if res.Err != "" {
					errs = append(errs, fmt.Errorf("%s: %s", what, res.Err))
					logf(cfg.Log, "%s FAILED: %s", what, res.Err)
				} else {
					logf(cfg.Log, "%s: create→available %s, update→complete %s, status stale p99 %s (%d intervals), writes update %d",
						what, fmtDur(res.CreateSeconds), fmtDur(res.UpdateSeconds), fmtSecs(res.Freshness.P99), res.Freshness.Intervals, res.UpdateWrites.Total())
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	rep.Finished = time.Now()
	if err := rep.Write(); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// render loads a results.json and writes the outputs again with the current output flags.
func render(cfg Config) (*Report, error) {
	b, err := os.ReadFile(cfg.Render)
	if err != nil {
		return nil, err
	}
	// The file's own config wins; the current flags stand in for what it lacks.
	rep := Report{Cfg: cfg}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("read %s: %w", cfg.Render, err)
	}
	// Files from before --budgets had one budget, in config.QPS and config.Burst.
	var legacy struct {
		Config struct {
			QPS   float64
			Burst int
		} `json:"config"`
	}
	_ = json.Unmarshal(b, &legacy)
	for i := range rep.Results {
		if rep.Results[i].Budget == (Budget{}) {
			rep.Results[i].Budget = Budget{QPS: legacy.Config.QPS, Burst: legacy.Config.Burst}
		}
	}
	rep.Cfg.Budgets = rep.budgets()
	rep.Cfg.OutDir, rep.Cfg.Markdown, rep.Cfg.DocsPNG = cfg.OutDir, cfg.Markdown, cfg.DocsPNG
	if err := os.MkdirAll(rep.Cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	return &rep, rep.Write()
}

func (c Config) hasSide(s Side) bool {
	for _, x := range c.Sides {
		if x == s {
			return true
		}
	}
	return false
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// releaseFlag is --release: "--release" alone is defaultReleaseDeployments, "--release=N" and
// "--release N" are N.
type releaseFlag struct{ n *int }

func (f releaseFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return strconv.Itoa(*f.n)
}

func (f releaseFlag) Set(s string) error {
	if s == "true" {
		*f.n = defaultReleaseDeployments
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("--release %q: want a number of Deployments > 0", s)
	}
	*f.n = n
	return nil
}

// IsBoolFlag lets --release go without a value.
func (releaseFlag) IsBoolFlag() bool { return true }

// runSingle runs one of the single measurements (--release N, --abort N) and prints its
// result, or exits 1 with the error.
func runSingle[R interface{ Text() string }](ctx context.Context, cfg Config, stop func(), n int, run func(context.Context, Config, int) (R, error)) {
	if cfg.Tools == "" {
		cfg.Tools = stack.DefaultTools()
	}
	res, err := run(ctx, cfg, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
	fmt.Print(res.Text())
}
