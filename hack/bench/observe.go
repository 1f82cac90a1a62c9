package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/temporal-rollout/rollout/k8s"
)

// tracker follows the namespace's Deployments with an informer and notices the moment a set
// of them is complete by `kubectl rollout status` rules.
type tracker struct {
	deploymentInformer

	mu   sync.Mutex
	goal *goal
}

type goal struct {
	mu      *sync.Mutex // the tracker's
	gens    map[string]int64
	pending map[string]bool
	doneAt  time.Time
	done    chan struct{}
}

// deploymentInformer is an informer on the Deployments of one namespace, each change handed to
// a function; the tracker and the control measurement's watch both run one.
type deploymentInformer struct {
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	lister  appslisters.DeploymentNamespaceLister
}

// startDeploymentInformer starts the informer and waits for its first list.
func startDeploymentInformer(ctx context.Context, kube kubernetes.Interface, ns string, onChange func(obj any)) (deploymentInformer, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	inf := f.Apps().V1().Deployments()
	di := deploymentInformer{cancel: cancel, factory: f, lister: inf.Lister().Deployments(ns)}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	}); err != nil {
		cancel()
		return deploymentInformer{}, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		cancel()
		f.Shutdown()
		return deploymentInformer{}, fmt.Errorf("deployment informer did not sync: %w", ctx.Err())
	}
	return di, nil
}

func (di deploymentInformer) stop() {
	di.cancel()
	di.factory.Shutdown()
}

func startTracker(ctx context.Context, kube kubernetes.Interface, ns string) (*tracker, error) {
	t := &tracker{}
	di, err := startDeploymentInformer(ctx, kube, ns, t.onChange)
	if err != nil {
		return nil, err
	}
	t.deploymentInformer = di
	return t, nil
}

func (t *tracker) onChange(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.goal
	if g == nil || !g.doneAt.IsZero() {
		return
	}
	want, ok := g.gens[d.Name]
	if !ok {
		return
	}
	if rolloutComplete(d, want) {
		delete(g.pending, d.Name)
	} else {
		g.pending[d.Name] = true
	}
	if len(g.pending) == 0 {
		g.doneAt = time.Now()
		close(g.done)
	}
}

// setGoal starts waiting for the named Deployments to be complete at (at least) the given
// generations. Call it before the writes that start the phase.
func (t *tracker) setGoal(gens map[string]int64) *goal {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := &goal{mu: &t.mu, gens: gens, pending: map[string]bool{}, done: make(chan struct{})}
	for name, want := range gens {
		d, err := t.lister.Get(name)
		if err != nil || !rolloutComplete(d, want) {
			g.pending[name] = true
		}
	}
	t.goal = g
	return g
}

// wait returns when the goal was reached, or fails after the timeout.
func (g *goal) wait(ctx context.Context, timeout time.Duration, log io.Writer, phase string) (time.Time, error) {
	start := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		select {
		case <-g.done:
			return g.doneAt, nil
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s: %w after %s; %d of %d Deployments not complete", phase, errTimeout, timeout, g.left(), len(g.gens))
		case <-tick.C:
			logf(log, "%s: %s elapsed, %d of %d Deployments not complete yet", phase, time.Since(start).Round(time.Second), g.left(), len(g.gens))
		}
	}
}

func (g *goal) left() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

func (t *tracker) generation(name string) int64 {
	d, err := t.lister.Get(name)
	if err != nil {
		return 0
	}
	return d.Generation
}

// specs returns the rollout bounds of the named Deployments from the informer cache.
func (t *tracker) specs(names []string) map[string]boundSpec {
	out := map[string]boundSpec{}
	for _, n := range names {
		d, err := t.lister.Get(n)
		if err != nil {
			continue
		}
		out[n] = boundSpec{replicas: replicasOf(d), surge: k8s.MaxSurge(d), unavailable: k8s.MaxUnavailable(d), recreate: !k8s.IsRollingUpdate(d)}
	}
	return out
}

// sample records Σ status.updatedReplicas of the goal's Deployments every interval until the
// goal is reached; a Deployment counts once its status has observed the wanted generation.
// The returned function stops sampling and returns the points.
func (t *tracker) sample(ctx context.Context, g *goal, start time.Time, every time.Duration) func() []Point {
	var (
		mu  sync.Mutex
		pts []Point
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sum := 0
			for name, want := range g.gens {
				if d, err := t.lister.Get(name); err == nil && d.Status.ObservedGeneration >= want {
					sum += int(d.Status.UpdatedReplicas)
				}
			}
			mu.Lock()
			pts = append(pts, Point{T: time.Since(start).Seconds(), Updated: sum})
			mu.Unlock()
			select {
			case <-tick.C:
			case <-g.done:
				return
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() []Point {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
		mu.Lock()
		defer mu.Unlock()
		return pts
	}
}

type boundSpec struct {
	replicas, surge, unavailable int32
	recreate                     bool
}

// Bounds is the worst breach of the rollout bounds seen during the update phase.
type Bounds struct {
	// WorstSurge is the largest Σ spec.replicas − (replicas + maxSurge) seen, 0 if never above.
	WorstSurge int32 `json:"worstSurge"`
	// WorstUnavailable is the largest (replicas − maxUnavailable) − Ready pods seen, 0 if
	// never below (not checked for Recreate).
	WorstUnavailable int32 `json:"worstUnavailable"`
	// Breaches counts the observations that broke a bound.
	Breaches int    `json:"breaches"`
	First    string `json:"first,omitempty"`
	// Events is the number of ReplicaSet and pod events checked.
	Events int `json:"events"`
}

// Worst is the larger of the two breaches.
func (b Bounds) Worst() int32 { return max(b.WorstSurge, b.WorstUnavailable) }

// bounds watches ReplicaSets and pods of a namespace (list, then watch from the list's
// resourceVersion) and checks every change against each Deployment's bounds.
type bounds struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	specs  map[string]boundSpec
	rsDep  map[string]string
	rsRepl map[string]map[string]int32 // deployment -> ReplicaSet -> spec.replicas
	ready  map[string]map[string]bool  // deployment -> Ready pods
	res    Bounds
	err    error
}

func watchBounds(ctx context.Context, kube kubernetes.Interface, ns string, specs map[string]boundSpec) (*bounds, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &bounds{cancel: cancel, done: make(chan struct{}), specs: specs,
		rsDep: map[string]string{}, rsRepl: map[string]map[string]int32{}, ready: map[string]map[string]bool{}}
	rsList, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	podList, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range rsList.Items {
		b.onRS(watch.Added, &rsList.Items[i])
	}
	for i := range podList.Items {
		b.onPod(watch.Added, &podList.Items[i])
	}
	// The seed is the state before the update: count only what the watch brings.
	b.res = Bounds{}
	rsw, err := watchtools.NewRetryWatcherWithContext(ctx, rsList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.AppsV1().ReplicaSets(ns).Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		return nil, err
	}
	pw, err := watchtools.NewRetryWatcherWithContext(ctx, podList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods(ns).Watch(ctx, o)
		}})
	if err != nil {
		rsw.Stop()
		cancel()
		return nil, err
	}
	go func() {
		defer close(b.done)
		defer rsw.Stop()
		defer pw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rsw.ResultChan():
				if !ok {
					b.fail(fmt.Errorf("replicaset watch ended"))
					return
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok {
					b.onRS(ev.Type, rs)
				} else if ev.Type == watch.Error {
					b.fail(fmt.Errorf("replicaset watch error: %v", ev.Object))
				}
			case ev, ok := <-pw.ResultChan():
				if !ok {
					b.fail(fmt.Errorf("pod watch ended"))
					return
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				if p, ok := ev.Object.(*corev1.Pod); ok {
					b.onPod(ev.Type, p)
				} else if ev.Type == watch.Error {
					b.fail(fmt.Errorf("pod watch error: %v", ev.Object))
				}
			}
		}
	}()
	return b, nil
}

func (b *bounds) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// stop ends the watch and returns the worst breach. Safe to call twice.
func (b *bounds) stop() Bounds {
	b.cancel()
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	res := b.res
	if b.err != nil && res.First == "" {
		res.First = "observer: " + b.err.Error()
	}
	return res
}

func (b *bounds) onRS(typ watch.EventType, rs *appsv1.ReplicaSet) {
	dep := ""
	if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
		dep = ref.Name
	} else {
		dep = rs.Labels["app"]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Events++
	if prev, ok := b.rsDep[rs.Name]; ok && prev != dep {
		delete(b.rsRepl[prev], rs.Name)
	}
	spec, tracked := b.specs[dep]
	if typ == watch.Deleted || !tracked {
		delete(b.rsDep, rs.Name)
		if m := b.rsRepl[dep]; m != nil {
			delete(m, rs.Name)
		}
		return
	}
	b.rsDep[rs.Name] = dep
	if b.rsRepl[dep] == nil {
		b.rsRepl[dep] = map[string]int32{}
	}
	n := int32(0)
	if rs.Spec.Replicas != nil {
		n = *rs.Spec.Replicas
	}
	b.rsRepl[dep][rs.Name] = n
	var total int32
	for _, v := range b.rsRepl[dep] {
		total += v
	}
	if over := total - (spec.replicas + spec.surge); over > 0 {
		b.res.Breaches++
		b.res.WorstSurge = max(b.res.WorstSurge, over)
		if b.res.First == "" {
			b.res.First = fmt.Sprintf("%s: Σ spec.replicas %d > %d + %d (%v)", dep, total, spec.replicas, spec.surge, sortedMap(b.rsRepl[dep]))
		}
	}
}

func (b *bounds) onPod(typ watch.EventType, p *corev1.Pod) {
	dep := p.Labels["app"]
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Events++
	spec, tracked := b.specs[dep]
	if !tracked {
		return
	}
	if b.ready[dep] == nil {
		b.ready[dep] = map[string]bool{}
	}
	if typ != watch.Deleted && p.DeletionTimestamp == nil && podReady(p) {
		b.ready[dep][p.Name] = true
	} else {
		delete(b.ready[dep], p.Name)
	}
	if spec.recreate {
		return
	}
	n := int32(len(b.ready[dep]))
	if short := (spec.replicas - spec.unavailable) - n; short > 0 {
		b.res.Breaches++
		b.res.WorstUnavailable = max(b.res.WorstUnavailable, short)
		if b.res.First == "" {
			b.res.First = fmt.Sprintf("%s: %d Ready pods < %d − %d", dep, n, spec.replicas, spec.unavailable)
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortedMap(m map[string]int32) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s:%d ", k, m[k])
	}
	return s
}
