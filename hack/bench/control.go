package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// The control measurement (`make bench BENCH_FLAGS=--control`, issue 23): how soon a user's
// command takes effect while many Deployments roll. Users command our rollouts with the plain
// Temporal CLI and the built-in controller's with kubectl; the target is p99 ≤ 1s and median
// ≤ 200ms from the command's return to its effect.
//
// Each side at each budget gets a fresh stack with N Deployments x R replicas (RollingUpdate
// maxSurge 1, maxUnavailable 0, minReadySeconds 2s, so 10 replicas roll for half a minute or
// more); once they are available every image changes at once, and while they roll one loop per
// command kind issues Tries commands, Interval apart, each against a random Deployment still
// rolling. A Deployment informer started before the first command sees the effects.

// Control commands. Ours go through the Temporal CLI, the built-in side's through kubectl.
const (
	cmdPause    = "pause"
	cmdResume   = "resume"
	cmdRollback = "rollback"
	cmdQuery    = "query status"
	cmdPromote  = "promote"
	cmdAbort    = "abort"
	cmdKPause   = "kubectl rollout pause"
	cmdKResume  = "kubectl rollout resume"
	cmdKUndo    = "kubectl rollout undo"
)

// controlMeasures says what each command's time runs to.
var controlMeasures = map[string]string{
	cmdPause:    "signal return → spec.paused true",
	cmdResume:   "signal return → spec.paused false",
	cmdRollback: "signal return → template is v1",
	cmdQuery:    "the command (start → answer)",
	cmdPromote:  "the command (start → update returns)",
	cmdAbort:    "the command (start → update returns)",
	cmdKPause:   "return → spec.paused true",
	cmdKResume:  "return → spec.paused false",
	cmdKUndo:    "return → template is v1",
}

// controlOrder is the order of the rows in a table.
var controlOrder = []string{cmdPause, cmdResume, cmdRollback, cmdQuery, cmdPromote, cmdAbort, cmdKPause, cmdKResume, cmdKUndo}

// Control targets: from the command's return to its effect.
const (
	controlTargetMedian = 0.2
	controlTargetP99    = 1.0
)

// Steps annotations of the stepped Deployments: promote ones hold three times, abort ones once.
const (
	promoteSteps = `[{"setWeight":30},{"pause":{}},{"setWeight":60},{"pause":{}},{"setWeight":90},{"pause":{}}]`
	abortSteps   = `[{"setWeight":50},{"pause":{}}]`
	// promotesPerDeployment is how many pauses promoteSteps holds at.
	promotesPerDeployment = 3
	// holdWait bounds the wait for a stepped Deployment held at a pause (the first holds come
	// a minute or more after the update at QPS 20 with 100 Deployments rolling).
	holdWait = 5 * time.Minute
	// resumeRetries: a failed resume is sent again, unrecorded, up to this many times.
	resumeRetries = 5
)

// ControlConfig is --control and its settings.
type ControlConfig struct {
	On            bool          `json:"-"`
	Deployments   int           `json:"deployments"`
	Replicas      int           `json:"replicas"`
	MinReady      time.Duration `json:"minReady"`
	Tries         int           `json:"tries"`
	Interval      time.Duration `json:"interval"`
	EffectTimeout time.Duration `json:"effectTimeout"`
}

func (c ControlConfig) validate() error {
	switch {
	case c.Deployments < 2 || c.Replicas < 2:
		return fmt.Errorf("--control-deployments and --control-replicas must be ≥ 2, got %d and %d", c.Deployments, c.Replicas)
	case c.Tries < 1:
		return fmt.Errorf("--control-tries must be ≥ 1, got %d", c.Tries)
	case c.Interval < 0 || c.MinReady < 0 || c.EffectTimeout <= 0:
		return errors.New("--control-interval and --control-min-ready must be ≥ 0, --control-effect-timeout > 0")
	}
	return nil
}

// stepped says how many of the Deployments carry promoteSteps and abortSteps on our side:
// enough for Tries promotes and Tries aborts, at most half of the Deployments, so most roll
// plainly.
func (c ControlConfig) stepped() (promote, abort int) {
	promote = (c.Tries + promotesPerDeployment - 1) / promotesPerDeployment
	abort = c.Tries
	if limit := c.Deployments / 2; promote+abort > limit {
		promote = max(1, limit/4)
		abort = max(1, limit-promote)
	}
	return promote, abort
}

// ControlSample is one command.
type ControlSample struct {
	Command    string `json:"command"`
	Deployment string `json:"deployment"`
	// At is seconds since the update began.
	At float64 `json:"at"`
	// CommandSeconds is the CLI process's own run, start to exit.
	CommandSeconds float64 `json:"commandSeconds"`
	// Seconds is what the command is measured by (controlMeasures): from the command's
	// return to its effect seen by the informer (0 when the informer saw it first), or the
	// command's own run.
	Seconds float64 `json:"seconds"`
	Err     string  `json:"error,omitempty"`
}

// ControlStat is one row of the table: one command on one side.
type ControlStat struct {
	Command   string  `json:"command"`
	Measure   string  `json:"measure"`
	Count     int     `json:"count"`
	Failed    int     `json:"failed"`
	Median    float64 `json:"median"`
	P99       float64 `json:"p99"`
	Max       float64 `json:"max"`
	CLIMedian float64 `json:"cliMedian"`
	CLIP99    float64 `json:"cliP99"`
}

// Meets is the target: median ≤ 200ms and p99 ≤ 1s, with no failure.
func (s ControlStat) Meets() bool {
	return s.Count > 0 && s.Failed == 0 && s.Median <= controlTargetMedian && s.P99 <= controlTargetP99
}

// ControlRun is one side at one budget.
type ControlRun struct {
	Side        Side   `json:"side"`
	Budget      Budget `json:"budget"`
	Deployments int    `json:"deployments"`
	Replicas    int    `json:"replicas"`
	// CreateSeconds is create → every Deployment available.
	CreateSeconds float64 `json:"createSeconds"`
	// CommandsSeconds is how long the command loops ran from the update.
	CommandsSeconds float64 `json:"commandsSeconds"`
	// Rolling is how many Deployments were still rolling when the last command ended.
	Rolling int             `json:"rolling"`
	Stats   []ControlStat   `json:"stats"`
	Samples []ControlSample `json:"samples"`
	Err     string          `json:"error,omitempty"`
}

// ControlReport is bench-out/control.json.
type ControlReport struct {
	Started    time.Time     `json:"started"`
	Finished   time.Time     `json:"finished"`
	Machine    Machine       `json:"machine"`
	Settings   ControlConfig `json:"settings"`
	WorkerArgs []string      `json:"workerArgs,omitempty"`
	Runs       []ControlRun  `json:"runs"`
}

// controlStats summarises samples by command, in controlOrder. Failed samples count in Failed
// only.
func controlStats(samples []ControlSample) []ControlStat {
	by := map[string][]ControlSample{}
	for _, s := range samples {
		by[s.Command] = append(by[s.Command], s)
	}
	var out []ControlStat
	for _, cmd := range controlOrder {
		list, ok := by[cmd]
		if !ok {
			continue
		}
		st := ControlStat{Command: cmd, Measure: controlMeasures[cmd]}
		var xs, cli []float64
		for _, s := range list {
			if s.Err != "" {
				st.Failed++
				continue
			}
			xs = append(xs, s.Seconds)
			cli = append(cli, s.CommandSeconds)
		}
		sort.Float64s(xs)
		sort.Float64s(cli)
		st.Count = len(xs)
		st.Median, st.P99, st.Max = quantile(xs, 0.5), quantile(xs, 0.99), quantile(xs, 1)
		st.CLIMedian, st.CLIP99 = quantile(cli, 0.5), quantile(cli, 0.99)
		out = append(out, st)
	}
	return out
}

// tables are one table per budget, both sides in it.
func (r *ControlReport) tables() []table {
	var budgets []Budget
	seen := map[Budget]bool{}
	for _, run := range r.Runs {
		if !seen[run.Budget] {
			seen[run.Budget] = true
			budgets = append(budgets, run.Budget)
		}
	}
	var out []table
	for _, b := range budgets {
		t := table{
			title:  fmt.Sprintf("Control latency while Deployments roll, %s (target: median ≤ 200ms, p99 ≤ 1s)", b),
			header: []string{"side", "command", "measured", "n", "median", "p99", "max", "CLI median", "CLI p99", "failed", "target"},
		}
		for _, run := range r.Runs {
			if run.Budget != b {
				continue
			}
			if run.Err != "" {
				t.rows = append(t.rows, []string{string(run.Side), "FAILED", firstLine(run.Err), "", "", "", "", "", "", "", ""})
				t.notes = append(t.notes, fmt.Sprintf("%s: %s", run.Side, firstLine(run.Err)))
			}
			for _, s := range run.Stats {
				meets := "no"
				if s.Meets() {
					meets = "yes"
				}
				t.rows = append(t.rows, []string{string(run.Side), s.Command, s.Measure, fmt.Sprint(s.Count),
					fmtSecs(s.Median), fmtSecs(s.P99), fmtSecs(s.Max), fmtSecs(s.CLIMedian), fmtSecs(s.CLIP99), fmt.Sprint(s.Failed), meets})
			}
			if run.Err == "" {
				t.notes = append(t.notes, fmt.Sprintf("%s: %d Deployments x %d replicas available after %s; the commands ran for %s from the update, %d Deployments still rolling at the end.",
					run.Side, run.Deployments, run.Replicas, fmtDur(run.CreateSeconds), fmtDur(run.CommandsSeconds), run.Rolling))
			}
		}
		out = append(out, t)
	}
	return out
}

func (r *ControlReport) settingsLine() string {
	c := r.Settings
	line := fmt.Sprintf("%d Deployments x %d replicas, RollingUpdate maxSurge 1 / maxUnavailable 0, minReadySeconds %s; every image changed at once, then %d commands of each kind, %s apart, each against a random Deployment still rolling; effects seen by a Deployment informer started before the commands. CLI: the Temporal CLI %s (ours) and kubectl %s (built-in). Promote and abort run on our side only, against Deployments with a steps annotation held at a pause (Progressing reason %s).",
		c.Deployments, c.Replicas, c.MinReady, c.Tries, c.Interval, stack.TemporalVersion, stack.KubeVersion, k8s.CanaryPausedReason)
	if len(r.WorkerArgs) > 0 {
		line += fmt.Sprintf(" Our worker ran with `%s`.", strings.Join(r.WorkerArgs, " "))
	}
	return line
}

// Text is the terminal report.
func (r *ControlReport) Text() string {
	var b strings.Builder
	b.WriteString("Control: from a CLI command's return to its effect\n")
	b.WriteString(r.settingsLine() + "\n\n")
	for _, t := range r.tables() {
		b.WriteString(t.title + "\n\n" + t.render())
		for _, n := range t.notes {
			b.WriteString("  * " + n + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Markdown is bench-out/control.md.
func (r *ControlReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Control: from a CLI command's return to its effect\n\n")
	fmt.Fprintf(&b, "Run on %s (%d cores), %s to %s. %s\n\n", r.Machine.CPUModel, r.Machine.Cores,
		r.Started.UTC().Format("2006-01-02 15:04"), r.Finished.UTC().Format("15:04 MST"), r.settingsLine())
	for _, t := range r.tables() {
		b.WriteString("## " + t.title + "\n\n" + t.render() + "\n")
		for _, n := range t.notes {
			b.WriteString("- " + n + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// write saves control.json and control.md in dir.
func (r *ControlReport) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(filepath.Join(dir, "control.json"), js, 0o644),
		os.WriteFile(filepath.Join(dir, "control.md"), []byte(r.Markdown()), 0o644))
}

// runControl runs the control measurement at every budget on every side, each on a fresh
// stack, and writes the outputs. It returns the report even when a run failed.
func runControl(ctx context.Context, cfg Config) (*ControlReport, error) {
	if cfg.Tools == "" {
		cfg.Tools = stack.DefaultTools()
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return nil, err
	}
	cfg.Bin = bin
	need := []string{stack.ToolPath(cfg.Tools, "kubectl")}
	if cfg.hasSide(SideOurs) {
		need = append(need, filepath.Join(cfg.Bin, "worker"), stack.ToolPath(cfg.Tools, "temporal"))
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("control needs %s (`make build`, `make tools`): %w", p, err)
		}
	}
	rep := &ControlReport{Started: time.Now(), Machine: describeMachine(), Settings: cfg.Control, WorkerArgs: cfg.WorkerArgs}
	var errs []error
run:
	for _, b := range cfg.Budgets {
		for _, side := range cfg.Sides {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
				break run
			}
			logf(cfg.Log, "==== control at %s on %s ====", b, side)
			res := runControlOne(ctx, cfg, b, side)
			if res.Err != "" {
				errs = append(errs, fmt.Errorf("control at %s on %s: %s", b, side, res.Err))
				logf(cfg.Log, "control at %s on %s FAILED: %s", b, side, res.Err)
			}
			rep.Runs = append(rep.Runs, res)
		}
	}
	rep.Finished = time.Now()
	if err := rep.write(cfg.OutDir); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// runControlOne starts a fresh stack, runs the control measurement on one side, and stops it.
func runControlOne(ctx context.Context, cfg Config, b Budget, side Side) (res ControlRun) {
	cc := cfg.Control
	res = ControlRun{Side: side, Budget: b, Deployments: cc.Deployments, Replicas: cc.Replicas}
	dir, err := os.MkdirTemp("", "rollout-bench-control-")
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer func() {
		if cfg.Keep {
			logf(cfg.Log, "stack folder kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	w := Workload{Kind: KindRolling, N: cc.Deployments, R: cc.Replicas}
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: cfg.Tools, Nodes: nodesFor(w, cfg.Nodes), Temporal: cfg.Temporal,
		PodReadyDelay: cfg.PodReadyDelay, PodReadyJitter: cfg.PodReadyJitter,
		BuiltinDeploymentController: side == SideBuiltin,
		KubeAPIQPS:                  float32(b.QPS), KubeAPIBurst: b.Burst,
		NoTemporal: side == SideBuiltin, Headless: true, Progress: cfg.Log,
	})
	if err != nil {
		res.Err = "start stack: " + err.Error()
		return res
	}
	defer func() {
		logf(cfg.Log, "stopping the stack")
		s.Stop()
	}()
	c := &controller{cfg: cfg, cc: cc, side: side, s: s, res: &res, claimed: map[string]bool{}, done: map[string]bool{}}
	if err := c.run(ctx, w); err != nil {
		res.Err = err.Error()
		for _, name := range append(workerNames(cfg.Workers), "watcher", "kube-controller-manager") {
			if p := s.Proc(name); p != nil {
				logf(cfg.Log, "---- %s log tail ----\n%s", name, p.Tail(3000))
			}
		}
	}
	res.Stats = controlStats(res.Samples)
	return res
}

// controller runs the commands of one side.
type controller struct {
	cfg   Config
	cc    ControlConfig
	side  Side
	s     *stack.Stack
	res   *ControlRun
	kube  kubernetes.Interface
	watch *deployWatch
	t0    time.Time
	// tc reads the histories of slow commands (ours; see explainSlow).
	tc client.Client

	mu sync.Mutex
	// claimed: a command is under way on the Deployment.
	claimed map[string]bool
	// done: the Deployment was rolled back or aborted; no more rollbacks or aborts.
	done map[string]bool
	// promoted is each promote Deployment's updatedReplicas when last promoted.
	promoted map[string]int32
}

func (c *controller) run(ctx context.Context, w Workload) error {
	cfg, cc := c.cfg, c.cc
	kc, _, err := kube.NewClientsetAs("rollout-bench", c.s.Kubeconfig, float32(cfg.HarnessQPS), cfg.HarnessBurst)
	if err != nil {
		return err
	}
	c.kube = kc
	if c.side == SideOurs {
		if err := startOurs(c.s, cfg, c.res.Budget, nil); err != nil {
			return err
		}
		tc, err := client.Dial(client.Options{HostPort: c.s.TemporalAddress, Logger: quietLog{}})
		if err != nil {
			return err
		}
		defer tc.Close()
		c.tc = tc
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", benchNamespace, err)
	}
	if c.watch, err = startDeployWatch(ctx, kc, benchNamespace); err != nil {
		return err
	}
	defer c.watch.stop()

	names := w.names()
	logf(cfg.Log, "control: create %d Deployments x %d replicas", w.N, w.R)
	t0 := time.Now()
	if err := parallel(ctx, names, func(ctx context.Context, name string) error {
		_, err := kc.AppsV1().Deployments(benchNamespace).Create(ctx, controlDeployment(w, name, cc.MinReady), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create deployments: %w", err)
	}
	if err := c.waitAll(ctx, names, func(d *appsv1.Deployment) bool { return rolloutComplete(d, 1) }); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	c.res.CreateSeconds = time.Since(t0).Seconds()
	logf(cfg.Log, "control: all available after %s", fmtDur(c.res.CreateSeconds))

	// The stepped Deployments come first; only our side runs promote and abort, but both
	// sides get the same writes (the built-in controller ignores the annotation).
	np, na := cc.stepped()
	promoteNames, abortNames, plain := names[:np], names[np:np+na], names[np+na:]
	c.promoted = map[string]int32{}
	steps := map[string]string{}
	for _, n := range promoteNames {
		steps[n] = promoteSteps
	}
	for _, n := range abortNames {
		steps[n] = abortSteps
	}
	logf(cfg.Log, "control: new image on %d Deployments (%d of them stepped)", len(names), np+na)
	c.t0 = time.Now()
	if err := parallel(ctx, names, func(ctx context.Context, name string) error {
		_, err := kc.AppsV1().Deployments(benchNamespace).Patch(ctx, name, types.StrategicMergePatchType, updatePatch(imageV2, steps[name]), metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("update deployments: %w", err)
	}

	loops := c.loops(plain, promoteNames, abortNames)
	var wg sync.WaitGroup
	for i, loop := range loops {
		wg.Go(func() {
			// Staggered so the kinds do not fire together.
			sleep(ctx, time.Duration(i)*cc.Interval/time.Duration(len(loops)))
			for try := 0; try < cc.Tries && ctx.Err() == nil; try++ {
				if !loop(ctx) {
					return
				}
				sleep(ctx, cc.Interval)
			}
		})
	}
	wg.Wait()
	c.res.CommandsSeconds = time.Since(c.t0).Seconds()
	for _, n := range names {
		if d := c.watch.get(n); d != nil && !rolloutComplete(d, d.Generation) {
			c.res.Rolling++
		}
	}
	logf(cfg.Log, "control: %d commands in %s; %d Deployments still rolling", len(c.res.Samples), fmtDur(c.res.CommandsSeconds), c.res.Rolling)
	return ctx.Err()
}

// loops are the command loops of the side; each call runs one command (or a pause and its
// resume) and reports false when no Deployment is left to run it on.
func (c *controller) loops(plain, promoteNames, abortNames []string) []func(context.Context) bool {
	paused := func(want bool) func(*appsv1.Deployment) bool {
		return func(d *appsv1.Deployment) bool { return d.Spec.Paused == want }
	}
	isV1 := func(d *appsv1.Deployment) bool {
		return len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == imageV1
	}
	plainRolling := func(d *appsv1.Deployment) bool { return !d.Spec.Paused && !c.isDone(d.Name) && c.rolling(d) }
	if c.side == SideBuiltin {
		kubectl := func(args ...string) []string {
			return append([]string{"--kubeconfig", c.s.Kubeconfig, "-n", benchNamespace}, args...)
		}
		return []func(context.Context) bool{
			func(ctx context.Context) bool {
				return c.pauseResume(ctx, plain, plainRolling,
					cmdKPause, "kubectl", kubectl("rollout", "pause"), paused(true),
					cmdKResume, kubectl("rollout", "resume"), paused(false))
			},
			func(ctx context.Context) bool {
				return c.one(ctx, plain, plainRolling, true, cmdKUndo, "kubectl", func(n string) []string {
					return kubectl("rollout", "undo", "deployment/"+n, "--to-revision=1")
				}, isV1)
			},
		}
	}
	temporal := func(n string, args ...string) []string {
		return append(args, "--workflow-id", contract.WorkflowID(benchNamespace, n), "--address", c.s.TemporalAddress)
	}
	held := func(d *appsv1.Deployment) bool {
		cond := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
		return cond != nil && cond.Reason == k8s.CanaryPausedReason && !c.isDone(d.Name)
	}
	return []func(context.Context) bool{
		func(ctx context.Context) bool {
			return c.pauseResume(ctx, plain, plainRolling,
				cmdPause, "temporal", []string{"workflow", "signal", "--name", contract.SignalPause}, paused(true),
				cmdResume, []string{"workflow", "signal", "--name", contract.SignalResume}, paused(false))
		},
		func(ctx context.Context) bool {
			return c.one(ctx, plain, plainRolling, true, cmdRollback, "temporal", func(n string) []string {
				return temporal(n, "workflow", "signal", "--name", contract.SignalRollback, "--input", `{"revision":1}`)
			}, isV1)
		},
		func(ctx context.Context) bool {
			all := append(append(append([]string{}, plain...), promoteNames...), abortNames...)
			return c.one(ctx, all, c.rolling, false, cmdQuery, "temporal", func(n string) []string {
				return temporal(n, "workflow", "query", "--type", contract.QueryStatus)
			}, nil)
		},
		func(ctx context.Context) bool {
			promotable := func(d *appsv1.Deployment) bool {
				c.mu.Lock()
				last, ok := c.promoted[d.Name]
				c.mu.Unlock()
				return held(d) && (!ok || d.Status.UpdatedReplicas > last)
			}
			return c.one(ctx, promoteNames, promotable, false, cmdPromote, "temporal", func(n string) []string {
				if d := c.watch.get(n); d != nil {
					c.mu.Lock()
					c.promoted[n] = d.Status.UpdatedReplicas
					c.mu.Unlock()
				}
				return temporal(n, "workflow", "update", "execute", "--name", contract.UpdatePromote, "--input", `{}`)
			}, nil)
		},
		func(ctx context.Context) bool {
			return c.one(ctx, abortNames, held, true, cmdAbort, "temporal", func(n string) []string {
				return temporal(n, "workflow", "update", "execute", "--name", contract.UpdateAbort, "--input", `{"reason":"bench"}`)
			}, nil)
		},
	}
}

// rolling: the Deployment's rollout is not complete by `kubectl rollout status` rules.
func (c *controller) rolling(d *appsv1.Deployment) bool { return !rolloutComplete(d, d.Generation) }

func (c *controller) isDone(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done[name]
}

// pick claims a random Deployment of names that is not claimed and satisfies ok, waiting up
// to wait for one; "" when none came. ok runs without c.mu held.
func (c *controller) pick(ctx context.Context, names []string, ok func(*appsv1.Deployment) bool, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		c.mu.Lock()
		var free []string
		for _, n := range names {
			if !c.claimed[n] {
				free = append(free, n)
			}
		}
		c.mu.Unlock()
		var fit []string
		for _, n := range free {
			if d := c.watch.get(n); d != nil && ok(d) {
				fit = append(fit, n)
			}
		}
		rand.Shuffle(len(fit), func(i, j int) { fit[i], fit[j] = fit[j], fit[i] })
		c.mu.Lock()
		for _, n := range fit {
			if !c.claimed[n] {
				c.claimed[n] = true
				c.mu.Unlock()
				return n
			}
		}
		c.mu.Unlock()
		sleep(ctx, 100*time.Millisecond)
	}
	return ""
}

func (c *controller) release(name string, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.claimed, name)
	if done {
		c.done[name] = true
	}
}

// one runs one command on a random fitting Deployment: cmd's args for it, timed to effect
// (or, with effect nil, to the command's own return). final: the Deployment takes no more
// commands of this kind (a rollback, an undo, an abort).
func (c *controller) one(ctx context.Context, names []string, fit func(*appsv1.Deployment) bool, final bool,
	kind, tool string, args func(string) []string, effect func(*appsv1.Deployment) bool) bool {
	wait := c.cc.EffectTimeout
	if kind == cmdPromote || kind == cmdAbort {
		// The first holds come late at a low budget.
		wait = max(wait, holdWait)
	}
	n := c.pick(ctx, names, fit, wait)
	if n == "" {
		logf(c.cfg.Log, "control: %s: no Deployment fit after %s; stopping that loop", kind, wait)
		return false
	}
	defer c.release(n, final)
	c.measure(ctx, n, kind, tool, args(n), effect, true)
	return true
}

// pauseResume pauses a random fitting Deployment, waits an interval after the pause took
// effect, and resumes it, timing both.
func (c *controller) pauseResume(ctx context.Context, names []string, fit func(*appsv1.Deployment) bool,
	pauseKind, tool string, pauseArgs []string, paused func(*appsv1.Deployment) bool,
	resumeKind string, resumeArgs []string, resumed func(*appsv1.Deployment) bool) bool {
	n := c.pick(ctx, names, fit, c.cc.EffectTimeout)
	if n == "" {
		logf(c.cfg.Log, "control: %s: no Deployment fit after %s; stopping that loop", pauseKind, c.cc.EffectTimeout)
		return false
	}
	defer c.release(n, false)
	target := func(args []string) []string {
		if tool == "kubectl" {
			return append(append([]string{}, args...), "deployment/"+n)
		}
		return append(append([]string{}, args...), "--workflow-id", contract.WorkflowID(benchNamespace, n), "--address", c.s.TemporalAddress)
	}
	c.measure(ctx, n, pauseKind, tool, target(pauseArgs), paused, true)
	sleep(ctx, c.cc.Interval)
	// A failed resume counts as failed; it is sent again, unrecorded, so the rollout finishes.
	for i := 0; c.measure(ctx, n, resumeKind, tool, target(resumeArgs), resumed, i == 0) != "" && i < resumeRetries && ctx.Err() == nil; i++ {
		sleep(ctx, c.cc.Interval)
	}
	return true
}

// measure runs one command against Deployment n and records its sample. With effect set, the
// sample runs from the command's return to the first informer event after the command began
// on which effect holds (0 when that came before the return); without, it is the command's
// own run. Unless record, the sample is only logged. It returns the sample's error, if any.
func (c *controller) measure(ctx context.Context, n, kind, tool string, args []string, effect func(*appsv1.Deployment) bool, record bool) string {
	var seen <-chan time.Time
	cancel := func() {}
	if effect != nil {
		seen, cancel = c.watch.await(n, effect)
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, stack.ToolPath(c.cfg.Tools, tool), args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_CLI_SHOW_STACKS=0")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	ret := time.Now()
	s := ControlSample{Command: kind, Deployment: n, At: start.Sub(c.t0).Seconds(), CommandSeconds: ret.Sub(start).Seconds()}
	switch {
	case err != nil:
		s.Err = fmt.Sprintf("%s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	case effect == nil:
		s.Seconds = s.CommandSeconds
	default:
		select {
		case at := <-seen:
			s.Seconds = max(0, at.Sub(ret).Seconds())
		case <-time.After(c.cc.EffectTimeout):
			s.Err = fmt.Sprintf("no effect within %s", c.cc.EffectTimeout)
		case <-ctx.Done():
			s.Err = ctx.Err().Error()
		}
	}
	if s.Err != "" {
		logf(c.cfg.Log, "control: %s on %s (recorded: %v): %s", kind, n, record, s.Err)
	}
	if c.tc != nil && s.Err == "" && (s.Seconds > 1 || s.CommandSeconds > 1) {
		more := s.Seconds
		if effect == nil {
			more = 0
		}
		to := ret.Add(time.Duration(more * float64(time.Second)))
		logf(c.cfg.Log, "control: slow %s on %s: %s to return, %s more to its effect; its workflow tasks (relative to the command's start):\n%s",
			kind, n, fmtDur(s.CommandSeconds), fmtDur(more), explainSlow(ctx, c.tc, benchNamespace, n, start, to))
	}
	if record {
		c.mu.Lock()
		c.res.Samples = append(c.res.Samples, s)
		c.mu.Unlock()
	}
	return s.Err
}

// waitAll waits until ok holds for every named Deployment in the informer's cache.
func (c *controller) waitAll(ctx context.Context, names []string, ok func(*appsv1.Deployment) bool) error {
	deadline := time.Now().Add(c.cfg.Timeout)
	for {
		left := 0
		for _, n := range names {
			if d := c.watch.get(n); d == nil || !ok(d) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Deployments not there after %s: %w", left, len(names), c.cfg.Timeout, errTimeout)
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// controlDeployment is the workload's Deployment with RollingUpdate maxSurge 1,
// maxUnavailable 0 and minReadySeconds, so that each of its pods rolls one at a time.
func controlDeployment(w Workload, name string, minReady time.Duration) *appsv1.Deployment {
	d := w.deployment(benchNamespace, name)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	d.Spec.MinReadySeconds = int32(minReady / time.Second)
	return d
}

// updatePatch is the strategic merge patch that sets the container's image and, when steps is
// not empty, the steps annotation.
func updatePatch(image, steps string) []byte {
	p := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "app", "image": image}}}}}}
	if steps != "" {
		p["metadata"] = map[string]any{"annotations": map[string]string{k8s.StepsAnnotation: steps}}
	}
	b, _ := json.Marshal(p)
	return b
}

// deployWatch is a Deployment informer on one namespace with waiters for a condition on one
// Deployment.
type deployWatch struct {
	deploymentInformer

	mu      sync.Mutex
	waiters map[string][]*waiter
}

type waiter struct {
	ok func(*appsv1.Deployment) bool
	at chan time.Time
}

func startDeployWatch(ctx context.Context, kc kubernetes.Interface, ns string) (*deployWatch, error) {
	w := &deployWatch{waiters: map[string][]*waiter{}}
	di, err := startDeploymentInformer(ctx, kc, ns, w.onChange)
	if err != nil {
		return nil, err
	}
	w.deploymentInformer = di
	return w, nil
}

func (w *deployWatch) onChange(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiters[d.Name]
	keep := list[:0]
	for _, wt := range list {
		if wt.ok(d) {
			wt.at <- now
			continue
		}
		keep = append(keep, wt)
	}
	w.waiters[d.Name] = keep
}

// await returns a channel that receives the time of the first event on Deployment name on
// which ok holds, and a function that stops waiting.
func (w *deployWatch) await(name string, ok func(*appsv1.Deployment) bool) (<-chan time.Time, func()) {
	wt := &waiter{ok: ok, at: make(chan time.Time, 1)}
	w.mu.Lock()
	w.waiters[name] = append(w.waiters[name], wt)
	w.mu.Unlock()
	return wt.at, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.waiters[name]
		for i, x := range list {
			if x == wt {
				w.waiters[name] = append(list[:i:i], list[i+1:]...)
				return
			}
		}
	}
}

// get is the cached Deployment, nil when absent. Callers must not modify it.
func (w *deployWatch) get(name string) *appsv1.Deployment {
	d, err := w.lister.Get(name)
	if err != nil {
		return nil
	}
	return d
}
