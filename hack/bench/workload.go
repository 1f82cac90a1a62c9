package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// Workload kinds.
const (
	KindRolling  = "rolling"
	KindRecreate = "recreate"
	KindScale    = "scale"
	// KindCanary is rolling with canarySteps on each Deployment (ours: a stepped rollout; the
	// built-in controller ignores the annotation and rolls as rolling does).
	KindCanary = "canary"
	// KindHeld is rolling with heldSteps: half the replicas on the new template, then held for
	// Workload.Hold on the step's timer (at rest, held-at-rest), then the rest.
	KindHeld = "held"
)

// canarySteps: two weights with a 30 s pause after each, then the rest.
const canarySteps = `[{"setWeight":20},{"pause":{"duration":"30s"}},{"setWeight":60},{"pause":{"duration":"30s"}}]`

// heldSteps is the held workload's steps for a hold.
func heldSteps(hold time.Duration) string {
	return fmt.Sprintf(`[{"setWeight":50},{"pause":{"duration":%q}}]`, hold.String())
}

// Workload is N Deployments x R replicas with one strategy. The scale kind sits idle after
// creation, then rolls Rolled of its Deployments.
type Workload struct {
	Name   string
	Kind   string
	N, R   int
	Rolled int
	Idle   time.Duration
	// Hold is the held kind's pause (--hold).
	Hold time.Duration
}

var workloadRE = regexp.MustCompile(`^(rolling|recreate|canary|held)-(\d+)x(\d+)$|^scale-(\d+)$`)

// ParseWorkload reads rolling-<N>x<R>, recreate-<N>x<R>, canary-<N>x<R>, held-<N>x<R> or
// scale-<N> (N x 1 replica).
func ParseWorkload(name string, rolled int, idle time.Duration) (Workload, error) {
	m := workloadRE.FindStringSubmatch(name)
	if m == nil {
		return Workload{}, fmt.Errorf("unknown workload %q (want rolling-<N>x<R>, recreate-<N>x<R>, canary-<N>x<R>, held-<N>x<R> or scale-<N>)", name)
	}
	w := Workload{Name: name}
	if m[4] != "" {
		w.Kind = KindScale
		w.N, _ = strconv.Atoi(m[4])
		w.R = 1
		w.Rolled = min(rolled, w.N)
		w.Idle = idle
	} else {
		w.Kind = m[1]
		w.N, _ = strconv.Atoi(m[2])
		w.R, _ = strconv.Atoi(m[3])
		w.Rolled = w.N
	}
	if w.N <= 0 || w.R <= 0 || w.Rolled <= 0 {
		return Workload{}, fmt.Errorf("workload %q: sizes must be > 0", name)
	}
	return w, nil
}

const (
	benchNamespace  = "bench"
	warmupNamespace = "bench-warmup"
	imageV1         = "registry.local/bench/app:v1"
	imageV2         = "registry.local/bench/app:v2"
)

func (w Workload) names() []string {
	out := make([]string, w.N)
	for i := range out {
		out[i] = fmt.Sprintf("app-%04d", i)
	}
	return out
}

func (w Workload) deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	replicas := int32(w.R)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{{Name: "app", Image: imageV1}},
					TerminationGracePeriodSeconds: new(int64),
				},
			},
		},
	}
	switch w.Kind {
	case KindCanary:
		d.Annotations = map[string]string{k8s.StepsAnnotation: canarySteps}
	case KindHeld:
		d.Annotations = map[string]string{k8s.StepsAnnotation: heldSteps(w.Hold)}
	}
	if w.Kind == KindRecreate {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	} else {
		surge, unavailable := intstr.FromString("25%"), intstr.FromString("25%")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	}
	return d
}

// Result is one workload at one client budget on one side.
type Result struct {
	Workload    string `json:"workload"`
	Kind        string `json:"kind"`
	Side        Side   `json:"side"`
	Budget      Budget `json:"budget"`
	Deployments int    `json:"deployments"`
	Replicas    int    `json:"replicas"`
	Rolled      int    `json:"rolled"`
	// Workers is how many of our workers ran (0 in results from before the option: 1).
	Workers int `json:"workers,omitempty"`
	// Temporal is "cluster" when our side ran on the Temporal server on PostgreSQL.
	TemporalMode string `json:"temporalMode,omitempty"`
	// CreateSeconds is create→available for all Deployments; UpdateSeconds is
	// update→complete for the rolled ones.
	CreateSeconds float64 `json:"createSeconds"`
	UpdateSeconds float64 `json:"updateSeconds"`
	CreateWrites  Writes  `json:"createWrites"`
	UpdateWrites  Writes  `json:"updateWrites"`
	Bounds        Bounds  `json:"bounds"`
	// Freshness is how long the rolled Deployments' status counts disagreed with their
	// ReplicaSets from the update until the closing scrape.
	Freshness Freshness `json:"freshness"`
	// CreateTimeline and UpdateTimeline split each phase into the controller's reaction,
	// the pods, and the status's catching up (see Timeline).
	CreateTimeline *Timeline `json:"createTimeline,omitempty"`
	UpdateTimeline *Timeline `json:"updateTimeline,omitempty"`
	// Procs by process name: kube-controller-manager, kube-apiserver, etcd, kube-scheduler,
	// kwok, and for our side worker, watcher, temporal and (on the cluster server) postgres.
	Procs map[string]*ProcStats `json:"procs"`
	// MachineUpdate is the whole machine's CPU from the update to its completion (no settle),
	// from /proc/stat: every process on it, ours, the stack's and anything else running.
	MachineUpdate *MachineCPU    `json:"machineUpdate,omitempty"`
	Temporal      *TemporalStats `json:"temporal,omitempty"`
	// StartPath: our side's reaction to the creates, along each workflow's first run.
	StartPath *StartPath `json:"startPath,omitempty"`
	// UpdatePath: our side's reaction to the image update, along each rolled workflow's runs.
	UpdatePath *StartPath `json:"updatePath,omitempty"`
	// Progress is Σ status.updatedReplicas (counted once a Deployment has observed the new
	// generation) over the rolled Deployments, every ~500ms since the update.
	Progress []Point `json:"progress"`
	Target   int     `json:"target"`
	Err      string  `json:"error,omitempty"`
}

// Point is one progress sample.
type Point struct {
	T       float64 `json:"t"`
	Updated int     `json:"updated"`
}

// measured lists the processes whose CPU and memory are reported.
func measured(side Side, workers int) []string {
	stack := []string{"kube-controller-manager", "kube-apiserver", "etcd", "kube-scheduler", "kwok"}
	if side == SideOurs {
		return append(append(stack, workerNames(workers)...), "watcher", "temporal", "postgres")
	}
	return stack
}

// workerNames are our worker processes: worker, worker-2, ... worker-N.
func workerNames(n int) []string {
	names := []string{"worker"}
	for i := 2; i <= n; i++ {
		names = append(names, fmt.Sprintf("worker-%d", i))
	}
	return names
}

// runOne starts a fresh stack, runs the workload, measures, and stops the stack.
func runOne(ctx context.Context, cfg Config, w Workload, b Budget, side Side) (res Result) {
	res = Result{Workload: w.Name, Kind: w.Kind, Side: side, Budget: b, Deployments: w.N, Replicas: w.R, Rolled: w.Rolled, Workers: cfg.Workers, TemporalMode: clusterLabel(side, cfg.Temporal),
		Target: w.Rolled * w.R, Procs: map[string]*ProcStats{}}
	dir, err := os.MkdirTemp("", "rollout-bench-")
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
	nodes := nodesFor(w, cfg.Nodes)
	if nodes > cfg.Nodes {
		logf(cfg.Log, "%d kwok nodes instead of %d: each holds %d pods, the workload needs up to %d", nodes, cfg.Nodes, stack.PodsPerNode, w.N*w.R*5/4+w.R)
	}
	// --profile on the Temporal server on PostgreSQL profiles the server too.
	serverPprof := 0
	if cfg.Profile && side != SideBuiltin && cfg.Temporal == stack.TemporalCluster {
		serverPprof, _ = stack.FreePort()
	}
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: cfg.Tools, Nodes: nodes, Temporal: cfg.Temporal, ServerPprofPort: serverPprof,
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
	r := &runner{cfg: cfg, w: w, b: b, side: side, s: s, res: &res}
	if serverPprof != 0 {
		r.pprof = map[string]string{"temporal": fmt.Sprintf("127.0.0.1:%d", serverPprof)}
	}
	if err := r.run(ctx); err != nil {
		res.Err = err.Error()
		for _, name := range []string{"kube-controller-manager", "worker", "watcher"} {
			if p := s.Proc(name); p != nil {
				logf(cfg.Log, "---- %s log tail ----\n%s", name, p.Tail(4000))
				keep := filepath.Join(cfg.OutDir, "logs", fmt.Sprintf("%s-qps%s-%s-%s.log", w.Name, fmtNum(b.QPS), side, name))
				if err := os.MkdirAll(filepath.Dir(keep), 0o755); err == nil {
					_ = os.WriteFile(keep, []byte(p.Tail(4<<20)), 0o644)
				}
			}
		}
		logf(cfg.Log, "log tails (last 4 MiB) saved in %s", filepath.Join(cfg.OutDir, "logs"))
	}
	// Process figures, read before the stack stops.
	tree := readProcTree()
	for _, name := range measured(side, cfg.Workers) {
		p := s.Proc(name)
		if p == nil {
			continue
		}
		st := res.Procs[name]
		if st == nil {
			st = &ProcStats{}
			res.Procs[name] = st
		}
		if err := st.readFinal(p.Pid(), tree); err != nil {
			logf(cfg.Log, "read /proc for %s: %v", name, err)
		}
	}
	return res
}

type runner struct {
	cfg  Config
	w    Workload
	b    Budget
	side Side
	s    *stack.Stack
	res  *Result
	kube kubernetes.Interface
	scr  *scraper
	// pprof: metrics (and pprof) address per process of ours, with --profile.
	pprof map[string]string
}

func (r *runner) run(ctx context.Context) error {
	cfg, w, res := r.cfg, r.w, r.res
	kube, _, err := kube.NewClientsetAs("rollout-bench", r.s.Kubeconfig, float32(cfg.HarnessQPS), cfg.HarnessBurst)
	if err != nil {
		return err
	}
	r.kube = kube
	r.scr = newScraper(r.s.APIServer, r.s.Token)

	if r.side == SideOurs {
		if err := startOurs(r.s, cfg, r.b, r.withProfiling); err != nil {
			return err
		}
	}
	for _, ns := range []string{benchNamespace, warmupNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	// Warm up: one Deployment elsewhere proves the controller runs before the clock starts.
	logf(cfg.Log, "warm-up: one Deployment in %s", warmupNamespace)
	if err := r.warmup(ctx); err != nil {
		return err
	}

	tr, err := startTracker(ctx, kube, benchNamespace)
	if err != nil {
		return err
	}
	defer tr.stop()

	// Create phase.
	names := w.names()
	before, err := r.scr.scrape(ctx)
	if err != nil {
		return err
	}
	gens := map[string]int64{}
	for _, n := range names {
		gens[n] = 1
	}
	g := tr.setGoal(gens)
	cfr, err := watchFreshness(ctx, kube, benchNamespace, gens)
	if err != nil {
		return err
	}
	defer func() { cfr.stop(time.Now()) }()
	logf(cfg.Log, "create: %d Deployments x %d replicas (%s)", w.N, w.R, w.Kind)
	t0 := time.Now()
	cfr.begin(t0)
	if err := parallel(ctx, names, func(ctx context.Context, name string) error {
		_, err := kube.AppsV1().Deployments(benchNamespace).Create(ctx, w.deployment(benchNamespace, name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create deployments: %w", err)
	}
	doneAt, err := g.wait(ctx, cfg.Timeout, cfg.Log, "create")
	if err != nil {
		return err
	}
	res.CreateSeconds = doneAt.Sub(t0).Seconds()
	ctl := cfr.timeline(ctx, 5*time.Second)
	res.CreateTimeline = &ctl
	cfr.stop(time.Now())
	logf(cfg.Log, "create: all available after %s", fmtDur(res.CreateSeconds))
	sleep(ctx, cfg.Settle)
	after, err := r.scr.scrape(ctx)
	if err != nil {
		return err
	}
	res.CreateWrites = after.sub(before)

	if w.Kind == KindScale && w.Idle > 0 {
		logf(cfg.Log, "idle: %s with %d Deployments managed", w.Idle, w.N)
		sleep(ctx, w.Idle)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, name := range append(workerNames(cfg.Workers), "watcher") {
			if p := r.s.Proc(name); p != nil {
				st := r.proc(name)
				_, rss, err := readMem(p.Pid())
				if err != nil {
					return err
				}
				st.RSSAfterIdleKB = rss
			}
		}
		if cfg.Profile {
			r.saveHeapProfiles(ctx)
		}
	}

	// Update phase.
	rolled := names[:w.Rolled]
	cpu0 := r.cpu()
	m0, _ := readMachineCPU()
	bo, err := watchBounds(ctx, kube, benchNamespace, tr.specs(rolled))
	if err != nil {
		return err
	}
	defer bo.stop()
	gens = map[string]int64{}
	for _, n := range rolled {
		gens[n] = tr.generation(n) + 1
	}
	fr, err := watchFreshness(ctx, kube, benchNamespace, gens)
	if err != nil {
		return err
	}
	defer func() { fr.stop(time.Now()) }()
	before, err = r.scr.scrape(ctx)
	if err != nil {
		return err
	}
	beats0, writes0 := -1, 0
	var sampled func() []ServerSample
	if r.side == SideOurs && r.s.TemporalMetrics != "" {
		if beats0, writes0, err = serverCounters(ctx, r.s.TemporalMetrics); err != nil {
			return err
		}
		sampled = sampleServer(ctx, r.s.TemporalMetrics, beats0, writes0)
	}
	g = tr.setGoal(gens)
	logf(cfg.Log, "update: new image on %d Deployments", len(rolled))
	profiled := func() {}
	if cfg.Profile {
		profiled = r.cpuProfiles(ctx, cfg.CPUProfile)
	}
	t1 := time.Now()
	fr.begin(t1)
	samples := tr.sample(ctx, g, t1, 500*time.Millisecond)
	patch := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"` + imageV2 + `"}]`)
	var mu sync.Mutex
	if err := parallel(ctx, rolled, func(ctx context.Context, name string) error {
		d, err := kube.AppsV1().Deployments(benchNamespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if d.Generation != gens[name] {
			return fmt.Errorf("deployment %s: generation %d after the update, expected %d", name, d.Generation, gens[name])
		}
		return nil
	}); err != nil {
		return fmt.Errorf("update deployments: %w", err)
	}
	doneAt, err = g.wait(ctx, cfg.Timeout, cfg.Log, "update")
	res.Progress = samples()
	if err != nil {
		return err
	}
	res.UpdateSeconds = doneAt.Sub(t1).Seconds()
	cpuDone := r.cpu()
	if m1, err := readMachineCPU(); err == nil && m0 != nil {
		res.MachineUpdate = m1.since(m0)
	}
	res.Progress = append(res.Progress, Point{T: res.UpdateSeconds, Updated: res.Target})
	logf(cfg.Log, "update: all complete after %s", fmtDur(res.UpdateSeconds))
	profiled()
	sleep(ctx, cfg.Settle)
	after, err = r.scr.scrape(ctx)
	if err != nil {
		return err
	}
	var beats, writes *int
	var server []ServerSample
	if beats0 >= 0 {
		server = sampled()
		b, w, err := serverCounters(ctx, r.s.TemporalMetrics)
		if err != nil {
			return err
		}
		b, w = b-beats0, w-writes0
		beats, writes = &b, &w
	}
	utl := fr.timeline(ctx, 5*time.Second)
	res.UpdateTimeline = &utl
	res.Freshness = fr.stop(time.Now())
	res.UpdateWrites = after.sub(before)
	res.Bounds = bo.stop()
	cpu1 := r.cpu()
	for name, c := range cpu1 {
		r.proc(name).CPUUpdateSeconds = c - cpu0[name]
		r.proc(name).CPUActiveSeconds = cpuDone[name] - cpu0[name]
	}

	if r.side == SideOurs {
		tc, err := client.Dial(client.Options{HostPort: r.s.TemporalAddress, Logger: quiet{}})
		if err != nil {
			return fmt.Errorf("dial temporal: %w", err)
		}
		defer tc.Close()
		ts, err := temporalStats(ctx, tc, benchNamespace, rolled, t1)
		if err != nil {
			return err
		}
		ts.HeartbeatsReached, ts.PersistenceWrites, ts.Samples = beats, writes, server
		res.Temporal = ts
		if res.StartPath, err = startPath(ctx, tc, benchNamespace, names, t0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED); err != nil {
			return err
		}
		if res.UpdatePath, err = startPath(ctx, tc, benchNamespace, rolled, t1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// nodesFor is the kwok node count for a workload: at least min, and enough for every pod of
// every Deployment plus a 25% surge (each node holds stack.PodsPerNode pods; scale-10000 on 3
// nodes left 4,000 pods Pending forever).
func nodesFor(w Workload, min int) int {
	need := w.N*w.R*5/4 + w.R
	n := (need + stack.PodsPerNode - 1) / stack.PodsPerNode
	return max(n, min)
}

// ourArgs are the flags our worker (and, with --separate-watcher, `starter watch`) start with;
// the worker adds `--watch --search-attributes`, the watcher `watch --search-attributes`;
// everything else stays at its default.
func ourArgs(kubeconfig, temporal string, b Budget) []string {
	return []string{"--kubeconfig", kubeconfig, "--temporal-address", temporal,
		"--kube-qps", strconv.FormatFloat(b.QPS, 'f', -1, 64), "--kube-burst", strconv.Itoa(b.Burst),
		"--metrics-address", "", "--log-format", "text"}
}

// startOurs starts our side on s: cfg.Workers workers running the watcher (`worker --watch
// --search-attributes`), or with cfg.SeparateWatcher workers plus `starter watch`; each worker
// gets cfg.WorkerArgs last. wrap may change a process's arguments (withProfiling); nil keeps
// them.
func startOurs(s *stack.Stack, cfg Config, b Budget, wrap func(name string, args []string) []string) error {
	if wrap == nil {
		wrap = func(_ string, args []string) []string { return args }
	}
	common := ourArgs(s.Kubeconfig, s.TemporalAddress, b)
	workerArgs := common
	if !cfg.SeparateWatcher {
		workerArgs = append([]string{"--watch", "--search-attributes"}, common...)
	}
	workerArgs = append(append([]string{}, workerArgs...), cfg.WorkerArgs...)
	for _, name := range workerNames(cfg.Workers) {
		if _, err := s.StartProcess(name, filepath.Join(cfg.Bin, "worker"), wrap(name, workerArgs)...); err != nil {
			return err
		}
	}
	if cfg.SeparateWatcher {
		watchArgs := append([]string{"watch", "--search-attributes"}, common...)
		if _, err := s.StartProcess("watcher", filepath.Join(cfg.Bin, "starter"), wrap("watcher", watchArgs)...); err != nil {
			return err
		}
	}
	return nil
}

// withProfiling gives a process of ours a metrics address with pprof (--profile), recorded in
// r.pprof by process name.
func (r *runner) withProfiling(name string, args []string) []string {
	if !r.cfg.Profile {
		return args
	}
	port, err := stack.FreePort()
	if err != nil {
		return args
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if r.pprof == nil {
		r.pprof = map[string]string{}
	}
	r.pprof[name] = addr
	out := append([]string{}, args...)
	for i := range out {
		if out[i] == "--metrics-address" && i+1 < len(out) {
			out[i+1] = addr
		}
	}
	return append(out, "--pprof")
}

// saveHeapProfiles writes each profiled process's heap profile (after the idle period) to
// OutDir/profiles/<workload>-<budget>-<process>.heap, for `go tool pprof`.
func (r *runner) saveHeapProfiles(ctx context.Context) {
	for name, addr := range r.pprof {
		r.saveProfile(ctx, name, "http://"+addr+"/debug/pprof/heap", "heap", "heap after the idle period")
	}
}

// cpuProfiles starts a CPU profile of each profiled process of ours (--profile) covering the
// first `window` of the update phase; the function it returns waits for them and writes
// OutDir/profiles/<workload>-<budget>-<process>.cpu, for `go tool pprof`.
func (r *runner) cpuProfiles(ctx context.Context, window time.Duration) func() {
	var wg sync.WaitGroup
	for name, addr := range r.pprof {
		wg.Go(func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, int(window.Seconds())))
			r.saveProfile(ctx, name, url, "cpu", fmt.Sprintf("CPU profile of the update phase's first %s", window))
		})
	}
	return wg.Wait
}

// saveProfile fetches a pprof profile of process `name` from url and writes it to
// OutDir/profiles/<workload>-<budget>-<name>.<ext>, logging what it did.
func (r *runner) saveProfile(ctx context.Context, name, url, ext, what string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf(r.cfg.Log, "profiles: %s %s: %v", name, ext, err)
		return
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		logf(r.cfg.Log, "profiles: %s %s: status %d, %v", name, ext, resp.StatusCode, err)
		return
	}
	dir := filepath.Join(r.cfg.OutDir, "profiles")
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.%s", r.w.Name, strings.ReplaceAll(r.b.Short(), "/", "-"), name, ext))
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		logf(r.cfg.Log, "profiles: %v", err)
		return
	}
	logf(r.cfg.Log, "profiles: %s %s in %s", name, what, path)
}

func (r *runner) proc(name string) *ProcStats {
	if r.res.Procs[name] == nil {
		r.res.Procs[name] = &ProcStats{}
	}
	return r.res.Procs[name]
}

func (r *runner) cpu() map[string]float64 {
	out := map[string]float64{}
	tree := readProcTree()
	for _, name := range measured(r.side, r.cfg.Workers) {
		if p := r.s.Proc(name); p != nil {
			if c, err := tree.cpu(p.Pid()); err == nil {
				out[name] = c
			}
		}
	}
	return out
}

func (r *runner) warmup(ctx context.Context) error {
	w := Workload{Kind: KindRolling, N: 1, R: 1}
	d := w.deployment(warmupNamespace, "warmup")
	if _, err := r.kube.AppsV1().Deployments(warmupNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create warm-up deployment: %w", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := r.kube.AppsV1().Deployments(warmupNamespace).Get(ctx, "warmup", metav1.GetOptions{})
		if err == nil && rolloutComplete(got, 1) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up deployment not available after 3m (controller not running?): %v", err)
		}
		for _, name := range []string{"worker", "watcher", "kube-controller-manager"} {
			if p := r.s.Proc(name); p != nil {
				if ok, err := p.Exited(); ok {
					return fmt.Errorf("%s exited (%v); log tail:\n%s", name, err, p.Tail(3000))
				}
			}
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// rolloutComplete is `kubectl rollout status` success for a Deployment that must have reached
// generation want.
func rolloutComplete(d *appsv1.Deployment, want int64) bool {
	if d.Generation < want || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	return countsComplete(replicasOf(d), actualStatus(d))
}

// countsComplete is `kubectl rollout status`'s rule on the three counts: every replica updated,
// no other pods, every updated one available.
func countsComplete(replicas int32, c statusCounts) bool {
	return c.updated >= replicas && c.replicas <= c.updated && c.available >= c.updated
}

// replicasOf is spec.replicas, 1 when unset.
func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// parallel runs f for every name with bounded concurrency and returns the first error.
func parallel(ctx context.Context, names []string, f func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan string)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range min(32, len(names)) {
		wg.Go(func() {
			for name := range work {
				if err := f(ctx, name); err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	for _, n := range names {
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func fmtDur(seconds float64) string {
	return strconv.FormatFloat(seconds, 'f', 1, 64) + "s"
}

// fmtSecs shows a short duration: milliseconds under a second, else seconds.
func fmtSecs(seconds float64) string {
	if ms := math.Round(seconds * 1000); ms < 1000 {
		return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(seconds, 'f', 2, 64) + "s"
}

var errTimeout = errors.New("timed out")

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// clusterLabel is Result.Temporal: "cluster" for our side on the Temporal server on
// PostgreSQL, empty for the dev server (and for the built-in side, which runs no Temporal).
func clusterLabel(side Side, m stack.TemporalMode) string {
	if side == SideOurs && m == stack.TemporalCluster {
		return string(m)
	}
	return ""
}

// sampleServer reads the Temporal server's counters every serverSampleEvery until the returned
// function is called, which returns the samples (since beats0 and writes0). A failed scrape is
// skipped.
func sampleServer(ctx context.Context, url string, beats0, writes0 int) func() []ServerSample {
	ctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	var out []ServerSample
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(serverSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			b, w, err := serverCounters(ctx, url)
			if err != nil {
				continue
			}
			out = append(out, ServerSample{T: time.Since(start).Seconds(), Heartbeats: b - beats0, PersistenceWrites: w - writes0})
		}
	}()
	return func() []ServerSample {
		cancel()
		<-done
		return out
	}
}
