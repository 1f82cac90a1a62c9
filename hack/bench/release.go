package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/kube"
	"github.com/temporal-rollout/rollout/release"
)

// The release measurement (`make bench BENCH_FLAGS=--release N`), on our controller only: N
// Deployments of releaseReplicas replica, half in the stack's own cluster ("") and half in a
// second cluster ("b"), one Temporal dev server, one worker per cluster with its watcher
// (`worker --watch`; the first cluster's also `--releases`, the second's `--cluster b`).
//   - by hand: a new image on all N at once, as `kubectl set image` would, until every one is
//     complete (`kubectl rollout status`);
//   - release: a release of another image in releaseWaves waves of N/4 (each wave half in each
//     cluster, maxConcurrent the wave's size, no bake, no approval), from its start until its
//     workflow completed and every Deployment is complete.

const (
	// defaultReleaseDeployments is --release without a number.
	defaultReleaseDeployments = 1000
	// releaseWaves is the release's wave count.
	releaseWaves = 4
	// releaseReplicas is each Deployment's replica count: 1 keeps 1,000 Deployments (2,000
	// pods at the surge) within what one 2-core machine carries beside three other test runs.
	releaseReplicas = 1
	// secondCluster is the second cluster's name (its worker's --cluster).
	secondCluster = "b"
	imageV3       = "registry.local/bench/app:v3"
	// releaseName names the release (workflow release/<name>).
	releaseName = "bench-release"
	// waveLabel carries a Deployment's wave, w1 ... w4, for the release's selectors.
	waveLabel = "bench-wave"
)

// ReleaseResult is what --release measures; bench-out/release.json holds it.
type ReleaseResult struct {
	Deployments int      `json:"deployments"`
	Replicas    int      `json:"replicas"`
	Clusters    []string `json:"clusters"`
	Budget      Budget   `json:"budget"`
	// ByHandSeconds: new image on all N at once → all complete.
	ByHandSeconds float64 `json:"byHandSeconds"`
	// ReleaseSeconds: release started → its workflow completed and all complete.
	ReleaseSeconds float64 `json:"releaseSeconds"`
	// ByHandProgress and ReleaseProgress: Deployments complete on the new image, every ~500ms
	// since the phase began.
	ByHandProgress  []Point `json:"byHandProgress"`
	ReleaseProgress []Point `json:"releaseProgress"`
	// WorkflowSeconds: release started → its workflow completed.
	WorkflowSeconds float64     `json:"workflowSeconds"`
	Waves           []WaveTime  `json:"waves"`
	History         HistorySize `json:"history"`
	// Procs by process name (worker, worker-b, temporal): peak RSS per phase, sampled.
	Procs   map[string]*RSSStats `json:"procs"`
	Started time.Time            `json:"started"`
	Machine Machine              `json:"machine"`
}

// Overhead is ReleaseSeconds / ByHandSeconds.
func (r ReleaseResult) Overhead() float64 {
	if r.ByHandSeconds <= 0 {
		return 0
	}
	return r.ReleaseSeconds / r.ByHandSeconds
}

// WaveTime is one wave as the status query saw it, in seconds since the release started.
type WaveTime struct {
	Name        string `json:"name"`
	Deployments int    `json:"deployments"`
	// StartSeconds: first seen Rolling; DoneSeconds: first seen Done.
	StartSeconds float64 `json:"startSeconds"`
	DoneSeconds  float64 `json:"doneSeconds"`
}

// Seconds is the wave's own time, start → done.
func (w WaveTime) Seconds() float64 { return w.DoneSeconds - w.StartSeconds }

// HistorySize is the release workflow's history over all its runs (Continue-As-New).
type HistorySize struct {
	Runs int `json:"runs"`
	// Events over all runs; LargestRun is the most events of one run.
	Events     int `json:"events"`
	LargestRun int `json:"largestRun"`
	// ChildWorkflows started by all runs.
	ChildWorkflows int `json:"childWorkflows"`
}

// sizeOf sums the event counts of a workflow's runs, in run order.
func sizeOf(runs []int) HistorySize {
	h := HistorySize{Runs: len(runs)}
	for _, n := range runs {
		h.Events += n
		h.LargestRun = max(h.LargestRun, n)
	}
	return h
}

// RSSStats is one process's resident memory: the peak of the samples (every second) in each
// phase, and VmHWM at the end.
type RSSStats struct {
	// PeakKB by phase: setup (Deployments created and available), by-hand, release.
	PeakKB map[string]int64 `json:"peakKB"`
	HWMKB  int64            `json:"hwmKB"`
}

// Phases of the release measurement, for RSSStats.
const (
	phaseSetup   = "setup"
	phaseByHand  = "by-hand"
	phaseRelease = "release"
)

// waveName is wave i's name (0-based), also its Deployments' waveLabel value.
func waveName(i int) string { return "w" + strconv.Itoa(i+1) }

// releaseLayout checks n and returns the Deployments per wave per cluster: n/8 (1,000
// Deployments: 125 in each cluster in each wave, 250 per wave).
func releaseLayout(n int) (int, error) {
	per := 2 * releaseWaves
	if n < per || n%per != 0 {
		return 0, fmt.Errorf("--release %d: want a multiple of %d (%d waves, each half in each of 2 clusters), at least %d and at most %d", n, per, releaseWaves, per, release.MaxTargets)
	}
	if n > release.MaxTargets {
		return 0, fmt.Errorf("--release %d: a release changes at most %d Deployments", n, release.MaxTargets)
	}
	return n / per, nil
}

// releaseSpec is the benchmark's release: for each wave one target group per cluster (its
// Deployments labelled bench-wave=wK), maxConcurrent the wave's size, no bake, no approval.
func releaseSpec(ns string, n int) (release.Spec, error) {
	per, err := releaseLayout(n)
	if err != nil {
		return release.Spec{}, err
	}
	s := release.Spec{
		Name:   releaseName,
		Change: release.Change{Images: map[string]string{"app": imageV3}},
	}
	for i := range releaseWaves {
		w := release.Wave{Name: waveName(i), MaxConcurrent: 2 * per}
		for _, c := range []string{"", secondCluster} {
			g := release.TargetGroup{Name: waveName(i) + "-" + clusterName(c), Cluster: c, Namespace: ns, Selector: waveLabel + "=" + waveName(i)}
			s.Targets = append(s.Targets, g)
			w.Targets = append(w.Targets, g.Name)
		}
		s.Waves = append(s.Waves, w)
	}
	return s, s.Validate()
}

// clusterName is "a" for the stack's own cluster, else its name.
func clusterName(c string) string {
	if c == "" {
		return "a"
	}
	return c
}

// releaseDeployment is Deployment i (0-based) of one cluster: app-NNNN, in wave i/per.
func releaseDeployment(i, per int) *appsv1.Deployment {
	w := Workload{Kind: KindRolling, N: 1, R: releaseReplicas}
	d := w.deployment(benchNamespace, fmt.Sprintf("app-%04d", i))
	d.Labels = map[string]string{waveLabel: waveName(i / per)}
	return d
}

// Text is the result as a short table.
func (r ReleaseResult) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Release vs by hand: %d Deployments × %d replica, half in each of clusters %s, client budget %s (ours)\n",
		r.Deployments, r.Replicas, strings.Join(r.Clusters, " and "), r.Budget)
	fmt.Fprintf(&b, "  by hand (new image on all at once → all complete):        %s (half complete at %s, 90%% at %s)\n",
		fmtDur(r.ByHandSeconds), fmtDur(reached(r.ByHandProgress, r.Deployments/2)), fmtDur(reached(r.ByHandProgress, r.Deployments*9/10)))
	fmt.Fprintf(&b, "  release, %d waves (start → workflow done, all complete): %s (%.2f× by hand; workflow %s)\n",
		len(r.Waves), fmtDur(r.ReleaseSeconds), r.Overhead(), fmtDur(r.WorkflowSeconds))
	for _, w := range r.Waves {
		fmt.Fprintf(&b, "    wave %s (%d Deployments): %s, from %s to %s\n", w.Name, w.Deployments, fmtDur(w.Seconds()), fmtDur(w.StartSeconds), fmtDur(w.DoneSeconds))
	}
	h := r.History
	fmt.Fprintf(&b, "  release workflow history: %d events over %d run(s) (%d Continue-As-New), largest run %d events, %d child workflows\n",
		h.Events, h.Runs, max(h.Runs-1, 0), h.LargestRun, h.ChildWorkflows)
	fmt.Fprintf(&b, "  peak RSS, sampled every second (MiB):   %-8s %-8s %-8s VmHWM\n", phaseSetup, phaseByHand, phaseRelease)
	for _, name := range releaseProcs() {
		p := r.Procs[name]
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "    %-36s %-8s %-8s %-8s %s\n", name, mib(p.PeakKB[phaseSetup]), mib(p.PeakKB[phaseByHand]), mib(p.PeakKB[phaseRelease]), mib(p.HWMKB))
	}
	return b.String()
}

func mib(kb int64) string { return strconv.FormatInt((kb+512)/1024, 10) }

// releaseProcs are the processes whose memory is sampled.
func releaseProcs() []string {
	return []string{"worker", "worker-" + secondCluster, "temporal"}
}

// runRelease measures ReleaseResult on a fresh stack and writes bench-out/release.json.
func runRelease(ctx context.Context, cfg Config, n int) (_ ReleaseResult, err error) {
	b := cfg.Budgets[len(cfg.Budgets)-1]
	res := ReleaseResult{Deployments: n, Replicas: releaseReplicas, Clusters: []string{clusterName(""), secondCluster}, Budget: b, Procs: map[string]*RSSStats{},
		Started: time.Now().UTC(), Machine: describeMachine()}
	spec, err := releaseSpec(benchNamespace, n)
	if err != nil {
		return res, err
	}
	per, _ := releaseLayout(n)
	dir, err := os.MkdirTemp("", "rollout-bench-release-")
	if err != nil {
		return res, err
	}
	defer func() {
		if cfg.Keep {
			logf(cfg.Log, "stack folder kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: cfg.Tools, Nodes: cfg.Nodes, Temporal: cfg.Temporal,
		PodReadyDelay: cfg.PodReadyDelay, PodReadyJitter: cfg.PodReadyJitter,
		KubeAPIQPS: float32(b.QPS), KubeAPIBurst: b.Burst, Headless: true, Progress: cfg.Log,
	})
	if err != nil {
		return res, fmt.Errorf("start stack: %w", err)
	}
	defer s.Stop()
	defer func() {
		if err == nil {
			return
		}
		for _, name := range []string{"worker", "worker-" + secondCluster} {
			if p := s.Proc(name); p != nil {
				logf(cfg.Log, "---- %s log tail ----\n%s", name, p.Tail(4000))
			}
		}
	}()
	kb, err := s.StartKubeCluster(ctx, secondCluster)
	if err != nil {
		return res, err
	}
	common := ourArgs(s.Kubeconfig, s.TemporalAddress, b)
	workers := map[string][]string{
		"worker": append(append([]string{"--watch", "--search-attributes", "--releases"}, common...), cfg.WorkerArgs...),
		"worker-" + secondCluster: append(append([]string{"--watch", "--search-attributes", "--cluster", secondCluster},
			ourArgs(kb.Kubeconfig, s.TemporalAddress, b)...), cfg.WorkerArgs...),
	}
	for _, name := range []string{"worker", "worker-" + secondCluster} {
		if _, err := s.StartProcess(name, filepath.Join(cfg.Bin, "worker"), workers[name]...); err != nil {
			return res, err
		}
	}
	sampler := startRSSSampler(s, releaseProcs())
	defer func() {
		sampler.stop()
		for name, st := range sampler.result() {
			res.Procs[name] = st
		}
	}()

	ka, _, err := kube.NewClientsetAs("rollout-bench", s.Kubeconfig, float32(cfg.HarnessQPS), cfg.HarnessBurst)
	if err != nil {
		return res, err
	}
	kbc, _, err := kube.NewClientsetAs("rollout-bench", kb.Kubeconfig, float32(cfg.HarnessQPS), cfg.HarnessBurst)
	if err != nil {
		return res, err
	}
	clusters := []kubernetes.Interface{ka, kbc}
	tc, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Logger: quietLog{}})
	if err != nil {
		return res, err
	}
	defer tc.Close()

	// Setup: N/2 Deployments in each cluster, all available.
	names := make([]string, n/2)
	for i := range names {
		names[i] = fmt.Sprintf("app-%04d", i)
	}
	for _, kc := range clusters {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
		if err := parallel(ctx, names, func(ctx context.Context, name string) error {
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "app-"))
			_, err := kc.AppsV1().Deployments(benchNamespace).Create(ctx, releaseDeployment(i, per), metav1.CreateOptions{})
			return err
		}); err != nil {
			return res, fmt.Errorf("create deployments: %w", err)
		}
	}
	logf(cfg.Log, "release bench: %d Deployments created in 2 clusters; waiting until all are available", n)
	if _, err := waitAll(ctx, clusters, n, imageV1, cfg.Timeout, s, time.Now(), nil); err != nil {
		return res, fmt.Errorf("create: %w", err)
	}

	// Phase A: by hand.
	sampler.phase(phaseByHand)
	logf(cfg.Log, "release bench: all available; by hand: %s on all %d at once", imageV2, n)
	t0 := time.Now()
	patch := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"` + imageV2 + `"}]`)
	// Both clusters at once, each with its own client (as two kubectl would).
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, kc := range clusters {
		wg.Go(func() {
			errs[i] = parallel(ctx, names, func(ctx context.Context, name string) error {
				_, err := kc.AppsV1().Deployments(benchNamespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("by hand: %w", err)
	}
	done, err := waitAll(ctx, clusters, n, imageV2, cfg.Timeout, s, t0, &res.ByHandProgress)
	if err != nil {
		return res, fmt.Errorf("by hand: %w", err)
	}
	res.ByHandSeconds = done.Sub(t0).Seconds()
	logf(cfg.Log, "release bench: by hand took %s; settling %s", fmtDur(res.ByHandSeconds), cfg.Settle)
	sleep(ctx, cfg.Settle)

	// Phase B: the release.
	sampler.phase(phaseRelease)
	logf(cfg.Log, "release bench: release %s of %s in %d waves", releaseName, imageV3, releaseWaves)
	t0 = time.Now()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: release.WorkflowID(releaseName), TaskQueue: release.TaskQueue}, release.WorkflowType, spec)
	if err != nil {
		return res, fmt.Errorf("start release: %w", err)
	}
	firstRun := run.GetRunID()
	watchCtx, stopWatch := context.WithCancel(ctx)
	waves := make(chan []WaveTime, 1)
	go func() { waves <- watchWaves(watchCtx, tc, spec, per, t0) }()
	progress := make(chan []Point, 1)
	go func() {
		var pts []Point
		_, _ = waitAll(watchCtx, clusters, n, imageV3, cfg.Timeout, s, t0, &pts)
		progress <- pts
	}()
	var out release.Result
	wfCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = tc.GetWorkflow(wfCtx, release.WorkflowID(releaseName), "").Get(wfCtx, &out)
	cancel()
	wfDone := time.Now()
	stopWatch()
	res.Waves = <-waves
	if err != nil {
		// The progress poller stopped with watchCtx.
		<-progress
	}
	finishWaves(res.Waves, wfDone.Sub(t0).Seconds())
	if err != nil {
		return res, fmt.Errorf("release: %w", err)
	}
	if out.Phase != release.PhaseSucceeded {
		return res, fmt.Errorf("release ended %s: %+v", out.Phase, out)
	}
	res.WorkflowSeconds = wfDone.Sub(t0).Seconds()
	done, err = waitAll(ctx, clusters, n, imageV3, cfg.Timeout, s, t0, &res.ReleaseProgress)
	if err != nil {
		return res, fmt.Errorf("after the release: %w", err)
	}
	res.ReleaseProgress = append(<-progress, res.ReleaseProgress...)
	res.ReleaseSeconds = max(done.Sub(t0), wfDone.Sub(t0)).Seconds()
	if res.History, err = releaseHistory(ctx, tc, release.WorkflowID(releaseName), firstRun); err != nil {
		return res, err
	}
	sampler.stop()
	for _, name := range releaseProcs() {
		if p := s.Proc(name); p != nil {
			if hwm, _, err := readMem(p.Pid()); err == nil {
				sampler.setHWM(name, hwm)
			}
		}
	}
	for name, st := range sampler.result() {
		res.Procs[name] = st
	}
	if js, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.MkdirAll(cfg.OutDir, 0o755)
		if err := os.WriteFile(filepath.Join(cfg.OutDir, "release.json"), js, 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

// waitAll polls both clusters every 500ms until all n Deployments carry image and are
// complete (`kubectl rollout status`), and returns when that first held. It fails early when
// one of our workers exited. With progress set, it appends each poll's count, at seconds since
// t0.
func waitAll(ctx context.Context, clusters []kubernetes.Interface, n int, image string, timeout time.Duration, s *stack.Stack, t0 time.Time, progress *[]Point) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, last := 0, ""
		for _, kc := range clusters {
			list, err := kc.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				last = err.Error()
				continue
			}
			for i := range list.Items {
				d := &list.Items[i]
				if d.Spec.Template.Spec.Containers[0].Image == image && complete(releaseReplicas)(d) {
					got++
				}
			}
		}
		now := time.Now()
		if progress != nil {
			*progress = append(*progress, Point{T: now.Sub(t0).Seconds(), Updated: got})
		}
		if got == n {
			return now, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d Deployments complete on %s after %s %s", got, n, image, timeout, last)
		}
		for _, name := range releaseProcs() {
			if p := s.Proc(name); p != nil {
				if ok, err := p.Exited(); ok {
					return time.Time{}, fmt.Errorf("%s exited (%v); log tail:\n%s", name, err, p.Tail(3000))
				}
			}
		}
		sleep(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}

// watchWaves queries the release's status every 500ms until ctx ends, and returns when each
// wave was first seen Rolling and Done.
func watchWaves(ctx context.Context, tc client.Client, spec release.Spec, per int, t0 time.Time) []WaveTime {
	out := make([]WaveTime, len(spec.Waves))
	for i, w := range spec.Waves {
		out[i] = WaveTime{Name: w.Name, Deployments: 2 * per, StartSeconds: -1, DoneSeconds: -1}
	}
	for ctx.Err() == nil {
		v, err := tc.QueryWorkflow(ctx, release.WorkflowID(spec.Name), "", release.QueryStatus)
		var st release.Status
		if err == nil && v.Get(&st) == nil {
			observeWaves(out, st.Waves, time.Since(t0).Seconds())
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return out
}

// observeWaves records, at t, each wave first seen under way (Rolling or later) and Done. A
// wave seen Done without having been seen under way (it passed between two queries) starts
// when the one before it was done.
func observeWaves(out []WaveTime, waves []release.WaveStatus, t float64) {
	for i := range out {
		if i >= len(waves) {
			break
		}
		switch waves[i].State {
		case release.WaveRolling, release.WaveAnalyzing, release.WaveBaking:
			if out[i].StartSeconds < 0 {
				out[i].StartSeconds = t
			}
		case release.WaveDone:
			if out[i].StartSeconds < 0 {
				out[i].StartSeconds = 0
				if i > 0 && out[i-1].DoneSeconds >= 0 {
					out[i].StartSeconds = out[i-1].DoneSeconds
				}
			}
			if out[i].DoneSeconds < 0 {
				out[i].DoneSeconds = t
			}
		}
	}
}

// reached is the first time the progress count reached want, -1 if it never did.
func reached(progress []Point, want int) float64 {
	for _, p := range progress {
		if p.Updated >= want {
			return p.T
		}
	}
	return -1
}

// finishWaves closes the waves of a release that completed at t: the last wave(s) ended
// after the last status query; each starts when the one before it was done.
func finishWaves(out []WaveTime, t float64) {
	for i := range out {
		if out[i].StartSeconds < 0 {
			out[i].StartSeconds = 0
			if i > 0 {
				out[i].StartSeconds = out[i-1].DoneSeconds
			}
		}
		if out[i].DoneSeconds < 0 {
			out[i].DoneSeconds = t
		}
	}
}

// releaseHistory follows the release's runs from its first through Continue-As-New and counts
// their events and the child workflows they started.
func releaseHistory(ctx context.Context, tc client.Client, id, runID string) (HistorySize, error) {
	var runs []int
	children := 0
	for runID != "" {
		it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events, next := 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return HistorySize{}, fmt.Errorf("history of %s run %s: %w", id, runID, err)
			}
			events++
			switch ev.EventType {
			case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
				children++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		runs = append(runs, events)
		if len(runs) > 1000 {
			return HistorySize{}, errors.New("more than 1000 runs; not following further")
		}
		runID = next
	}
	h := sizeOf(runs)
	h.ChildWorkflows = children
	return h, nil
}

// rssSampler reads the RSS of some of the stack's processes every second and keeps each
// one's peak in the current phase.
type rssSampler struct {
	mu    sync.Mutex
	cur   string
	stats map[string]*RSSStats
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func startRSSSampler(s *stack.Stack, names []string) *rssSampler {
	r := &rssSampler{cur: phaseSetup, stats: map[string]*RSSStats{}, done: make(chan struct{})}
	pids := map[string]int{}
	for _, name := range names {
		if p := s.Proc(name); p != nil {
			pids[name] = p.Pid()
		}
	}
	r.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			for name, pid := range pids {
				if _, rss, err := readMem(pid); err == nil {
					r.observe(name, rss)
				}
			}
			select {
			case <-r.done:
				return
			case <-t.C:
			}
		}
	})
	return r
}

func (r *rssSampler) observe(name string, rssKB int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats[name]
	if st == nil {
		st = &RSSStats{PeakKB: map[string]int64{}}
		r.stats[name] = st
	}
	st.PeakKB[r.cur] = max(st.PeakKB[r.cur], rssKB)
}

func (r *rssSampler) phase(p string) {
	r.mu.Lock()
	r.cur = p
	r.mu.Unlock()
}

func (r *rssSampler) setHWM(name string, kb int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.stats[name]; st != nil {
		st.HWMKB = kb
	}
}

func (r *rssSampler) stop() {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
}

func (r *rssSampler) result() map[string]*RSSStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}
