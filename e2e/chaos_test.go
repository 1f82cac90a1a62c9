//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// chaosConfig sizes TestChaos. The defaults are the short run `make test` does; `make chaos`
// sets the environment for the full one (CHAOS_DEPLOYMENTS=50 CHAOS_REPLICAS=10
// CHAOS_DURATION=60s).
type chaosConfig struct {
	Deployments int           `json:"deployments"`
	Replicas    int32         `json:"replicas"`
	KillEvery   time.Duration `json:"killEvery"`
	// WritesPerSecond is the second client's patch rate, over all objects.
	WritesPerSecond int           `json:"writesPerSecond"`
	Duration        time.Duration `json:"duration"`
	Report          string        `json:"-"`
}

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	c := chaosConfig{Deployments: 10, Replicas: 4, KillEvery: 3 * time.Second, Duration: 20 * time.Second, WritesPerSecond: 10,
		Report: filepath.Join("..", "chaos-out", "report.md")}
	atoi := func(key string, into *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive integer", key, v)
			}
			*into = n
		}
	}
	dur := func(key string, into *time.Duration) {
		if v := os.Getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration", key, v)
			}
			*into = d
		}
	}
	atoi("CHAOS_DEPLOYMENTS", &c.Deployments)
	r := int(c.Replicas)
	atoi("CHAOS_REPLICAS", &r)
	c.Replicas = int32(r)
	atoi("CHAOS_WRITES_PER_SECOND", &c.WritesPerSecond)
	dur("CHAOS_KILL_EVERY", &c.KillEvery)
	dur("CHAOS_DURATION", &c.Duration)
	if v := os.Getenv("CHAOS_REPORT"); v != "" {
		c.Report = v
	}
	return c
}

// chaosReport is what TestChaos measured; it is written as JSON and Markdown.
type chaosReport struct {
	Config            chaosConfig      `json:"config"`
	Namespace         string           `json:"namespace"`
	Kills             map[string]int   `json:"kills"`
	UnexpectedExits   []string         `json:"unexpectedExits"`
	APIServerRestart  float64          `json:"apiServerRestartSeconds"`
	TemporalRestart   float64          `json:"temporalRestartSeconds"`
	WriterPatches     int64            `json:"writerPatches"`
	WriterErrors      int64            `json:"writerErrors"`
	Conflicts         map[string]int   `json:"conflictsLogged"`
	ChaosSeconds      float64          `json:"chaosSeconds"`
	ConvergeSeconds   float64          `json:"convergeSecondsAfterChaos"`
	TotalSeconds      float64          `json:"totalSecondsFromFirstUpdate"`
	BoundBreaches     []string         `json:"boundBreaches"`
	WorstSurplus      int32            `json:"worstSurplus"`
	WorstShortfall    int32            `json:"worstShortfall"`
	ObserverLists     int              `json:"observerReplicaSetLists"`
	DuplicateRS       []string         `json:"duplicateReplicaSets"`
	WrongEndState     []string         `json:"wrongEndState"`
	FailedWorkflows   []string         `json:"failedWorkflows"`
	WorkflowRuns      map[string]int64 `json:"workflowRunsByStatus"`
	ProcessesAtTheEnd []string         `json:"processesAtTheEnd"`
}

// TestChaos (issue 10): Deployments roll out at once on two workers and two watchers while a
// random one of the four is SIGKILLed every few seconds and restarted, kube-apiserver is
// restarted once, the Temporal server is restarted once, and a second client keeps patching the
// same ReplicaSets and Deployments (labels and annotations), which makes our writes conflict.
// Half-way every Deployment gets a second new image, so each rolls over mid-rollout. Then:
// every Deployment converges to revision 3 with exactly the new ReplicaSet at full size, the
// surge and unavailability bounds are never breached (checked per Deployment on every
// ReplicaSet and pod change), no two ReplicaSets of a Deployment share a template, and no
// workflow run failed, timed out or was terminated. The figures go to chaos-out/report.md.
func TestChaos(t *testing.T) {
	if env.builtin {
		t.Skip("our worker is not running")
	}
	cfg := chaosConfigFromEnv(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rep := &chaosReport{Config: cfg, Namespace: ns, Kills: map[string]int{}, Conflicts: map[string]int{}, WorkflowRuns: map[string]int64{}}
	t.Logf("chaos: %d Deployments × %d replicas, a kill every ~%s for at least %s", cfg.Deployments, cfg.Replicas, cfg.KillEvery, cfg.Duration)

	// Two workers and two watchers instead of the suite's one each.
	restartSuite := stopOurs(t)
	procs := map[string]func() error{
		"worker-a":  func() error { return startNamed("worker-a", "worker", workerArgs()...) },
		"worker-b":  func() error { return startNamed("worker-b", "worker", workerArgs()...) },
		"watcher-a": func() error { return startNamed("watcher-a", "starter", watcherArgs()...) },
		"watcher-b": func() error { return startNamed("watcher-b", "starter", watcherArgs()...) },
	}
	names := []string{"worker-a", "worker-b", "watcher-a", "watcher-b"}
	t.Cleanup(func() {
		for _, n := range names {
			env.stack.StopProcess(n)
		}
		restartSuite()
	})
	for _, n := range names {
		if err := procs[n](); err != nil {
			t.Fatal(err)
		}
	}

	// A client of the harness's own that retries through the API server's restart.
	kc, _, err := kube.NewClientsetAs("e2e-chaos", env.stack.Kubeconfig, 200, 400)
	if err != nil {
		t.Fatal(err)
	}
	surge := intstr.FromString("25%")
	unavail := intstr.FromString("25%")
	maxSurge, _ := intstr.GetScaledValueFromIntOrPercent(&surge, int(cfg.Replicas), true)
	maxUnavail, _ := intstr.GetScaledValueFromIntOrPercent(&unavail, int(cfg.Replicas), false)
	deps := make([]string, cfg.Deployments)
	for i := range deps {
		deps[i] = fmt.Sprintf("app-%02d", i)
		create(t, newDeployment(ns, deps[i], cfg.Replicas, "nginx:1.25", rolling("25%", "25%")))
	}
	for _, n := range deps {
		waitComplete(t, ns, n)
	}

	obs := observeEach(t, kc, ns, cfg.Replicas+int32(maxSurge), cfg.Replicas-int32(maxUnavail))
	defer obs.stop()

	// The second client: merge patches of a label and an annotation on a random ReplicaSet or
	// Deployment of the namespace, CHAOS_WRITES_PER_SECOND times a second, until the
	// Deployments have converged. An annotation change bumps a Deployment's generation (the
	// API server's strategy: annotations are copied to the new ReplicaSet), so each one makes
	// our next status write conflict and asks for a sync of its own.
	writerCtx, stopWriter := context.WithCancel(ctx)
	var patches, writerErrs atomic.Int64
	var writer sync.WaitGroup
	writer.Go(func() {
		wc, _, err := kube.NewClientsetAs("e2e-chaos-writer", env.stack.Kubeconfig, 100, 200)
		if err != nil {
			t.Error(err)
			return
		}
		wrng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
		var rsNames []string
		var listed time.Time
		tick := time.NewTicker(time.Second / time.Duration(cfg.WritesPerSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-writerCtx.Done():
				return
			case <-tick.C:
			}
			if time.Since(listed) > 2*time.Second {
				if rss, err := wc.AppsV1().ReplicaSets(ns).List(writerCtx, metav1.ListOptions{}); err == nil {
					rsNames = rsNames[:0]
					for _, rs := range rss.Items {
						rsNames = append(rsNames, rs.Name)
					}
					listed = time.Now()
				}
			}
			patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"chaos-churn":"%d"},"annotations":{"chaos.example.com/churn":"%d"}}}`, i, i))
			if i%2 == 0 && len(rsNames) > 0 {
				_, err = wc.AppsV1().ReplicaSets(ns).Patch(writerCtx, rsNames[wrng.IntN(len(rsNames))], types.MergePatchType, patch, metav1.PatchOptions{})
			} else {
				_, err = wc.AppsV1().Deployments(ns).Patch(writerCtx, deps[wrng.IntN(len(deps))], types.MergePatchType, patch, metav1.PatchOptions{})
			}
			if err != nil {
				writerErrs.Add(1)
			} else {
				patches.Add(1)
			}
		}
	})
	defer func() { stopWriter(); writer.Wait() }()

	setAll := func(image string) {
		t.Helper()
		for _, n := range deps {
			retryKube(t, 3*time.Minute, "set image of "+n, func() error { return setImageOnce(kc, ns, n, image) })
		}
	}
	t0 := time.Now()
	setAll("nginx:1.26")

	// The chaos loop. Every change to the stack's processes happens on this goroutine.
	rng := rand.New(rand.NewPCG(uint64(t0.UnixNano()), 10))
	var apiDone, temporalDone, secondImage bool
	var apiAt time.Time
	for !(apiDone && temporalDone && secondImage && time.Since(t0) >= cfg.Duration) {
		time.Sleep(cfg.KillEvery/2 + time.Duration(rng.Int64N(int64(cfg.KillEvery))))
		for _, n := range names {
			if p := env.stack.Proc(n); p != nil {
				if exited, err := p.Exited(); exited {
					rep.UnexpectedExits = append(rep.UnexpectedExits, fmt.Sprintf("%s at +%s: %v: %s", n, since(t0), err, lastLine(p.Tail(2000))))
					env.stack.StopProcess(n)
					if err := procs[n](); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		victim := names[rng.IntN(len(names))]
		env.stack.KillProcess(victim)
		rep.Kills[victim]++
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		if err := procs[victim](); err != nil {
			t.Fatal(err)
		}
		t.Logf("+%s killed and restarted %s", since(t0), victim)
		switch {
		case !apiDone && time.Since(t0) >= 4*time.Second:
			start := time.Now()
			if err := env.stack.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			rep.APIServerRestart = time.Since(start).Seconds()
			apiDone, apiAt = true, time.Now()
			t.Logf("+%s kube-apiserver restarted in %.1fs", since(t0), rep.APIServerRestart)
		case apiDone && !temporalDone && time.Since(apiAt) >= 3*time.Second:
			start := time.Now()
			env.stack.StopTemporal()
			time.Sleep(2 * time.Second)
			if err := env.stack.StartTemporal(ctx); err != nil {
				t.Fatal(err)
			}
			rep.TemporalRestart = time.Since(start).Seconds()
			temporalDone = true
			t.Logf("+%s Temporal restarted in %.1fs (2s down)", since(t0), rep.TemporalRestart)
		case temporalDone && !secondImage:
			setAll("nginx:1.27")
			secondImage = true
			t.Logf("+%s every Deployment updated again, to nginx:1.27", since(t0))
		}
	}
	rep.ChaosSeconds = time.Since(t0).Seconds()
	chaosEnd := time.Now()
	for _, n := range names {
		if p := env.stack.Proc(n); p == nil {
			t.Fatalf("%s not running at the end of the chaos", n)
		} else if exited, err := p.Exited(); exited {
			rep.UnexpectedExits = append(rep.UnexpectedExits, fmt.Sprintf("%s at the end: %v: %s", n, err, lastLine(p.Tail(2000))))
			env.stack.StopProcess(n)
			if err := procs[n](); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Convergence: every Deployment at revision 3, complete, with the new ReplicaSet at full
	// size and every other at 0.
	pending := func() []string {
		var out []string
		for _, n := range deps {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				out = append(out, n+": "+err.Error())
				continue
			}
			if why := rolloutPending(d); why != "" {
				out = append(out, n+": "+why)
			} else if d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" || d.Annotations[k8s.RevisionAnnotation] != "3" {
				out = append(out, fmt.Sprintf("%s: image %s revision %s", n, d.Spec.Template.Spec.Containers[0].Image, d.Annotations[k8s.RevisionAnnotation]))
			}
		}
		return out
	}
	deadline := time.Now().Add(5 * time.Minute)
	for p := pending(); len(p) > 0; p = pending() {
		if time.Now().After(deadline) {
			rep.WrongEndState = p
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	rep.ConvergeSeconds = time.Since(chaosEnd).Seconds()
	rep.TotalSeconds = time.Since(t0).Seconds()
	stopWriter()
	writer.Wait()
	rep.WriterPatches, rep.WriterErrors = patches.Load(), writerErrs.Load()

	// Exact end state, after a last sync settles: no duplicate templates, old ReplicaSets at 0.
	if len(rep.WrongEndState) == 0 {
		eventually(t, 30*time.Second, func() string {
			rep.DuplicateRS, rep.WrongEndState = endState(t, kc, ns, deps, cfg.Replicas)
			if len(rep.DuplicateRS)+len(rep.WrongEndState) > 0 {
				return strings.Join(append(rep.DuplicateRS, rep.WrongEndState...), "; ")
			}
			return ""
		})
	}
	rep.BoundBreaches, rep.WorstSurplus, rep.WorstShortfall = obs.result()
	obs.mu.Lock()
	rep.ObserverLists = obs.relists
	obs.mu.Unlock()

	// Workflows: no run of this namespace failed, timed out or was terminated.
	var token []byte
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`%s = %q`, contract.SearchAttrNamespace, ns), NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Executions {
			rep.WorkflowRuns[e.Status.String()]++
			switch e.Status {
			case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
				rep.FailedWorkflows = append(rep.FailedWorkflows, fmt.Sprintf("%s/%s: %s", e.Execution.WorkflowId, e.Execution.RunId, e.Status))
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	// One running workflow per Deployment, read from the history (describe), not from
	// visibility: after a Temporal restart the visibility records of continue-as-new runs can
	// lag the histories by seconds, and a count from the list then misses a running chain.
	for _, n := range deps {
		desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, n), "")
		if err != nil {
			t.Errorf("%s: describe its workflow: %v", n, err)
			continue
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("%s: its workflow's last run %s is %s, want Running; runs by status %v", n, desc.WorkflowExecutionInfo.Execution.RunId, st, rep.WorkflowRuns)
		}
	}
	for _, n := range names {
		for _, line := range strings.Split(readLog(n), "\n") {
			// A 409, or a write whose precondition found the object changed since the
			// decision: either way the sync starts again from a live read.
			if strings.Contains(line, ns+"/") && (strings.Contains(line, "the object has been modified") || strings.Contains(line, "Decision was stale")) {
				rep.Conflicts[n]++
			}
		}
		if p := env.stack.Proc(n); p != nil {
			if exited, _ := p.Exited(); !exited {
				rep.ProcessesAtTheEnd = append(rep.ProcessesAtTheEnd, n)
			}
		}
	}

	writeChaosReport(t, cfg.Report, rep)
	if len(rep.UnexpectedExits) > 0 {
		t.Errorf("processes exited on their own: %v", rep.UnexpectedExits)
	}
	if len(rep.WrongEndState) > 0 {
		t.Errorf("not converged 5 min after the chaos: %v", rep.WrongEndState)
	}
	if len(rep.DuplicateRS) > 0 {
		t.Errorf("duplicate ReplicaSets: %v", rep.DuplicateRS)
	}
	if len(rep.BoundBreaches) > 0 {
		t.Errorf("%d bound breaches; first: %s", len(rep.BoundBreaches), rep.BoundBreaches[0])
	}
	if len(rep.FailedWorkflows) > 0 {
		t.Errorf("workflow runs that did not end well: %v", rep.FailedWorkflows)
	}
	if rep.Kills["worker-a"]+rep.Kills["worker-b"]+rep.Kills["watcher-a"]+rep.Kills["watcher-b"] == 0 || rep.APIServerRestart == 0 || rep.TemporalRestart == 0 {
		t.Errorf("the chaos did not happen: kills %v, kube-apiserver restart %.1fs, Temporal restart %.1fs", rep.Kills, rep.APIServerRestart, rep.TemporalRestart)
	}
}

func since(t0 time.Time) string { return time.Since(t0).Round(100 * time.Millisecond).String() }

func workerArgs() []string {
	args := commonArgs()
	if env.prom != nil {
		args = append(args, "--prometheus-address", env.prom.address)
	}
	return args
}

func watcherArgs() []string {
	return append([]string{"watch", "--search-attributes"}, commonArgs()...)
}

func startNamed(name, bin string, args ...string) error {
	_, err := env.stack.StartProcess(name, filepath.Join(env.bin, bin), args...)
	return err
}

func readLog(name string) string {
	b, _ := os.ReadFile(filepath.Join(env.stack.Opts.Dir, name+".log"))
	return string(b)
}

// retryKube retries f (which may fail while kube-apiserver restarts) for up to timeout.
func retryKube(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func setImageOnce(kc kubernetes.Interface, ns, name, image string) error {
	d, err := kc.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Template.Spec.Containers[0].Image = image
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[k8s.ChangeCauseAnnotation] = "image " + image
	_, err = kc.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
	return err
}

// endState checks each Deployment's ReplicaSets: no two with the same template (without the
// pod-template-hash label), the expected new one at full size, every other at 0.
func endState(t *testing.T, kc kubernetes.Interface, ns string, names []string, replicas int32) (dups, wrong []string) {
	t.Helper()
	list, err := kc.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, []string{err.Error()}
	}
	for _, n := range names {
		d, err := kc.AppsV1().Deployments(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			wrong = append(wrong, err.Error())
			continue
		}
		var owned []appsv1.ReplicaSet
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
				owned = append(owned, rs)
			}
		}
		for i := range owned {
			for j := i + 1; j < len(owned); j++ {
				a, b := owned[i].Spec.Template.DeepCopy(), owned[j].Spec.Template.DeepCopy()
				delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
				delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
				if apiequality.Semantic.DeepEqual(a, b) {
					dups = append(dups, fmt.Sprintf("%s: %s and %s share a template", n, owned[i].Name, owned[j].Name))
				}
			}
		}
		newName := expectedRSName(d)
		var sizes []string
		ok := false
		for _, rs := range owned {
			sizes = append(sizes, fmt.Sprintf("%s:%d", rs.Name, *rs.Spec.Replicas))
			if rs.Name == newName && *rs.Spec.Replicas == replicas {
				ok = true
			} else if rs.Name != newName && *rs.Spec.Replicas != 0 {
				ok = false
				break
			}
		}
		if !ok {
			sort.Strings(sizes)
			wrong = append(wrong, fmt.Sprintf("%s: replicasets %v, want %s:%d and the rest at 0", n, sizes, newName, replicas))
		}
	}
	return dups, wrong
}

// eachObserver checks the rollout bounds per Deployment (pods and ReplicaSets by their app
// label) on every change. It lists and watches each resource itself: when a watch ends (the
// API server restarts) it lists again and takes the list as one snapshot, so a list replayed
// object by object never shows a mix of old and new sizes.
type eachObserver struct {
	stopCh    chan struct{}
	done      sync.WaitGroup
	mu        sync.Mutex
	maxTotal  int32
	minReady  int32
	rs        map[string]map[string]int32 // app → ReplicaSet → spec.replicas
	ready     map[string]map[string]bool  // app → Ready pod
	armed     map[string]bool             // app: ready reached minReady once
	breaches  []string
	surplus   int32
	shortfall int32
	relists   int
}

func observeEach(t *testing.T, kc kubernetes.Interface, ns string, maxTotal, minReady int32) *eachObserver {
	t.Helper()
	o := &eachObserver{stopCh: make(chan struct{}), maxTotal: maxTotal, minReady: minReady,
		rs: map[string]map[string]int32{}, ready: map[string]map[string]bool{}, armed: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-o.stopCh; cancel() }()
	synced := make(chan struct{}, 2)
	o.done.Go(func() {
		loopListWatch(ctx, synced,
			func() (string, error) {
				list, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return "", err
				}
				o.mu.Lock()
				o.rs = map[string]map[string]int32{}
				for i := range list.Items {
					o.setRS(&list.Items[i], false)
				}
				for app := range o.rs {
					o.checkRS(app)
				}
				o.relists++
				o.mu.Unlock()
				return list.ResourceVersion, nil
			},
			func(rv string) (watch.Interface, error) {
				return kc.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			},
			func(ev watch.Event) {
				if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok {
					o.mu.Lock()
					o.setRS(rs, ev.Type == watch.Deleted)
					o.checkRS(rs.Spec.Selector.MatchLabels["app"])
					o.mu.Unlock()
				}
			})
	})
	o.done.Go(func() {
		loopListWatch(ctx, synced,
			func() (string, error) {
				list, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return "", err
				}
				o.mu.Lock()
				o.ready = map[string]map[string]bool{}
				for i := range list.Items {
					o.setPod(&list.Items[i], false)
				}
				for app := range o.ready {
					o.checkReady(app)
				}
				o.mu.Unlock()
				return list.ResourceVersion, nil
			},
			func(rv string) (watch.Interface, error) {
				return kc.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			},
			func(ev watch.Event) {
				if p, ok := ev.Object.(*corev1.Pod); ok {
					o.mu.Lock()
					o.setPod(p, ev.Type == watch.Deleted)
					o.checkReady(p.Labels["app"])
					o.mu.Unlock()
				}
			})
	})
	for range 2 {
		select {
		case <-synced:
		case <-time.After(30 * time.Second):
			t.Fatal("observer: no first list within 30s")
		}
	}
	return o
}

// loopListWatch lists (one snapshot), then watches from the list's resourceVersion, and lists
// again whenever the watch ends or fails, until ctx ends.
func loopListWatch(ctx context.Context, synced chan<- struct{}, list func() (string, error), watchFrom func(string) (watch.Interface, error), on func(watch.Event)) {
	first := true
	for ctx.Err() == nil {
		rv, err := list()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if first {
			synced <- struct{}{}
			first = false
		}
		w, err := watchFrom(rv)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			on(ev)
		}
		w.Stop()
	}
}

func (o *eachObserver) setRS(rs *appsv1.ReplicaSet, deleted bool) {
	app := rs.Spec.Selector.MatchLabels["app"]
	if o.rs[app] == nil {
		o.rs[app] = map[string]int32{}
	}
	if deleted {
		delete(o.rs[app], rs.Name)
	} else {
		o.rs[app][rs.Name] = *rs.Spec.Replicas
	}
}

func (o *eachObserver) checkRS(app string) {
	var total int32
	for _, n := range o.rs[app] {
		total += n
	}
	if total > o.maxTotal {
		o.breaches = append(o.breaches, fmt.Sprintf("%s: Σ spec.replicas = %d > %d (%v)", app, total, o.maxTotal, o.rs[app]))
	}
	o.surplus = max(o.surplus, total-o.maxTotal)
}

func (o *eachObserver) setPod(p *corev1.Pod, deleted bool) {
	app := p.Labels["app"]
	if o.ready[app] == nil {
		o.ready[app] = map[string]bool{}
	}
	if !deleted && p.DeletionTimestamp == nil && podReady(p) {
		o.ready[app][p.Name] = true
	} else {
		delete(o.ready[app], p.Name)
	}
}

func (o *eachObserver) checkReady(app string) {
	n := int32(len(o.ready[app]))
	if n >= o.minReady {
		o.armed[app] = true
	}
	if o.armed[app] && n < o.minReady {
		o.breaches = append(o.breaches, fmt.Sprintf("%s: ready pods = %d < %d", app, n, o.minReady))
		o.shortfall = max(o.shortfall, o.minReady-n)
	}
}

func (o *eachObserver) result() ([]string, int32, int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.breaches...), o.surplus, o.shortfall
}

func (o *eachObserver) stop() {
	select {
	case <-o.stopCh:
	default:
		close(o.stopCh)
	}
	o.done.Wait()
}

func writeChaosReport(t *testing.T, path string, r *chaosReport) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Error(err)
		return
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(strings.TrimSuffix(path, filepath.Ext(path))+".json", js, 0o644); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos run, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%d Deployments × %d replicas (RollingUpdate 25%%/25%%), two workers and two watchers, a SIGKILL every ~%s, chaos for %.0fs from the first image update; namespace %s.\n\n",
		r.Config.Deployments, r.Config.Replicas, r.Config.KillEvery, r.ChaosSeconds, r.Namespace)
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| what | figure |\n|---|---|\n")
	row("SIGKILLs (restarted each time)", fmt.Sprintf("%d: %v", r.Kills["worker-a"]+r.Kills["worker-b"]+r.Kills["watcher-a"]+r.Kills["watcher-b"], r.Kills))
	row("processes that exited on their own", fmt.Sprintf("%d %v", len(r.UnexpectedExits), r.UnexpectedExits))
	row("kube-apiserver restart (stop → ready)", fmt.Sprintf("%.1fs", r.APIServerRestart))
	row("Temporal server restart (2s down)", fmt.Sprintf("%.1fs", r.TemporalRestart))
	row("second client's patches (errors)", fmt.Sprintf("%d at %d/s (%d)", r.WriterPatches, r.Config.WritesPerSecond, r.WriterErrors))
	row("conflicts our processes met (409s and stale decisions, each synced again from a live read)", fmt.Sprintf("%v", r.Conflicts))
	row("converged after the chaos ended", fmt.Sprintf("%.1fs (%.1fs from the first update)", r.ConvergeSeconds, r.TotalSeconds))
	row("bound breaches", fmt.Sprintf("%d (worst surplus %d, worst shortfall %d)", len(r.BoundBreaches), r.WorstSurplus, r.WorstShortfall))
	row("bound observer's ReplicaSet lists (1 + one per broken watch)", fmt.Sprintf("%d", r.ObserverLists))
	row("duplicate ReplicaSets", fmt.Sprintf("%d", len(r.DuplicateRS)))
	row("Deployments not at revision 3 with the new ReplicaSet alone", fmt.Sprintf("%d %v", len(r.WrongEndState), r.WrongEndState))
	row("workflow runs by status", fmt.Sprintf("%v", r.WorkflowRuns))
	row("runs failed, timed out, terminated or cancelled", fmt.Sprintf("%d %v", len(r.FailedWorkflows), r.FailedWorkflows))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("chaos report (%s):\n%s", path, b.String())
}
