package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/temporal-rollout/rollout/k8s"
)

// Freshness is how long the rolled Deployments' status counts disagreed with their
// ReplicaSets during the update phase: status.replicas with Σ ReplicaSet status.replicas,
// status.updatedReplicas with the new ReplicaSet's status.replicas, status.availableReplicas
// with Σ ReplicaSet status.availableReplicas, as a watch on Deployments and ReplicaSets sees
// them. A stale interval starts when they come to differ and ends when they agree again;
// intervals still open when the phase ends are closed there.
type Freshness struct {
	// Deployments is how many Deployments were followed; Intervals how many stale intervals
	// they had, Open how many of those were still open at the end of the phase.
	Deployments int `json:"deployments"`
	Intervals   int `json:"intervals"`
	Open        int `json:"open"`
	// P50, P99 and Max are of the stale intervals' durations, in seconds (nearest rank).
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	// TotalMedian and TotalMax are of the stale time per Deployment (the sum of its
	// intervals; 0 for a Deployment never stale), in seconds.
	TotalMedian float64 `json:"totalMedian"`
	TotalMax    float64 `json:"totalMax"`
	// PhaseSeconds is the length of the measured phase (update issued → closing scrape).
	PhaseSeconds float64 `json:"phaseSeconds"`
	// Durations are every stale interval, in seconds, sorted.
	Durations []float64 `json:"durations,omitempty"`
	// PerDeployment is the stale time of each Deployment, in seconds.
	PerDeployment map[string]float64 `json:"perDeployment,omitempty"`
	// Slow are the intervals of at least slowInterval, with when each began, for the
	// "where the time goes" reading (the first interval of a Deployment starts at the update).
	Slow []StaleInterval `json:"slow,omitempty"`
	// Events is the number of Deployment and ReplicaSet events seen.
	Events int `json:"events"`
	// Err is why the observation is incomplete (a watch that ended), if it is.
	Err string `json:"error,omitempty"`
}

// StaleInterval is one stale interval of a Deployment: it began At seconds into the phase and
// lasted Seconds; Nth counts the Deployment's intervals from 1.
type StaleInterval struct {
	Deployment string  `json:"deployment"`
	At         float64 `json:"at"`
	Seconds    float64 `json:"seconds"`
	Nth        int     `json:"nth"`
}

// slowInterval is the shortest interval Freshness.Slow lists.
const slowInterval = 250 * time.Millisecond

// staleness is the interval bookkeeping, free of any I/O. Before begin it only remembers
// which Deployments are stale; from begin to end it records intervals; after end it ignores
// everything.
type staleness struct {
	begun, ended bool
	beginAt      time.Time
	stale        map[string]bool
	since        map[string]time.Time // open intervals
	durs         map[string][]time.Duration
	slow         []StaleInterval
}

func newStaleness(names []string) *staleness {
	s := &staleness{stale: map[string]bool{}, since: map[string]time.Time{}, durs: map[string][]time.Duration{}}
	for _, n := range names {
		s.durs[n] = nil
	}
	return s
}

// begin starts the phase at `at`: a Deployment stale at that moment opens an interval there.
func (s *staleness) begin(at time.Time) {
	if s.begun {
		return
	}
	s.begun, s.beginAt = true, at
	for n, st := range s.stale {
		if st {
			s.since[n] = at
		}
	}
}

// set records that Deployment name is (or is not) stale from `at` on.
func (s *staleness) set(name string, stale bool, at time.Time) {
	if s.ended {
		return
	}
	if _, tracked := s.durs[name]; !tracked {
		return
	}
	was := s.stale[name]
	s.stale[name] = stale
	if !s.begun || was == stale {
		return
	}
	if at.Before(s.beginAt) {
		at = s.beginAt
	}
	if stale {
		s.since[name] = at
		return
	}
	if from, ok := s.since[name]; ok {
		s.close(name, from, at)
		delete(s.since, name)
	}
}

// close records Deployment name's interval from `from` to `at`.
func (s *staleness) close(name string, from, at time.Time) {
	d := max(0, at.Sub(from))
	s.durs[name] = append(s.durs[name], d)
	if d >= slowInterval {
		s.slow = append(s.slow, StaleInterval{Deployment: name, At: from.Sub(s.beginAt).Seconds(),
			Seconds: d.Seconds(), Nth: len(s.durs[name])})
	}
}

// end closes the open intervals at `at` and summarises.
func (s *staleness) end(at time.Time) Freshness {
	f := Freshness{Deployments: len(s.durs), PerDeployment: map[string]float64{}}
	if !s.begun {
		s.begin(at)
	}
	if !s.ended {
		s.ended = true
		for n, from := range s.since {
			s.close(n, from, at)
			f.Open++
		}
		s.since = map[string]time.Time{}
	}
	f.PhaseSeconds = max(0, at.Sub(s.beginAt).Seconds())
	var totals []float64
	for n, ds := range s.durs {
		var total time.Duration
		for _, d := range ds {
			total += d
			f.Durations = append(f.Durations, d.Seconds())
		}
		f.PerDeployment[n] = total.Seconds()
		totals = append(totals, total.Seconds())
	}
	sort.Float64s(f.Durations)
	sort.Float64s(totals)
	f.Slow = append([]StaleInterval(nil), s.slow...)
	sort.Slice(f.Slow, func(i, j int) bool { return f.Slow[i].At < f.Slow[j].At })
	f.Intervals = len(f.Durations)
	f.P50, f.P99, f.Max = quantile(f.Durations, 0.50), quantile(f.Durations, 0.99), quantile(f.Durations, 1)
	f.TotalMedian, f.TotalMax = quantile(totals, 0.50), quantile(totals, 1)
	return f
}

// quantile is the nearest-rank q-quantile of sorted xs (0 for none).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// statusCounts are the three status counts the freshness metric compares.
type statusCounts struct{ replicas, updated, available int32 }

// expectedStatus is what a Deployment's status counts should say given its ReplicaSets'
// status: Σ replicas, the new ReplicaSet's replicas, Σ available. The new ReplicaSet is the
// oldest whose pod template equals the Deployment's, ignoring the pod-template-hash label
// (upstream's rule).
func expectedStatus(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) statusCounts {
	var c statusCounts
	var newRS *appsv1.ReplicaSet
	for _, rs := range rss {
		c.replicas += rs.Status.Replicas
		c.available += rs.Status.AvailableReplicas
		if k8s.EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) && (newRS == nil || olderRS(rs, newRS)) {
			newRS = rs
		}
	}
	if newRS != nil {
		c.updated = newRS.Status.Replicas
	}
	return c
}

func actualStatus(d *appsv1.Deployment) statusCounts {
	return statusCounts{d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas}
}

func olderRS(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// rsOwner is the Deployment a ReplicaSet belongs to: its controller, or else its app label.
func rsOwner(rs *appsv1.ReplicaSet) string {
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if ref.Kind == "Deployment" {
			return ref.Name
		}
		return ""
	}
	return rs.Labels["app"]
}

// freshnessState holds the Deployments and ReplicaSets seen so far and recomputes a
// Deployment's agreement on every change to it or to one of its ReplicaSets.
type freshnessState struct {
	deps   map[string]*appsv1.Deployment
	rsDep  map[string]string                        // ReplicaSet -> Deployment
	rss    map[string]map[string]*appsv1.ReplicaSet // Deployment -> ReplicaSets by name
	s      *staleness
	tl     *timelineState
	events int
}

// newFreshnessState follows the named Deployments; want, when set, is the generation each
// must reach, for the phase's Timeline.
func newFreshnessState(names []string, want map[string]int64) *freshnessState {
	return &freshnessState{deps: map[string]*appsv1.Deployment{}, rsDep: map[string]string{},
		rss: map[string]map[string]*appsv1.ReplicaSet{}, s: newStaleness(names), tl: newTimelineState(want)}
}

func (f *freshnessState) onDeployment(typ watch.EventType, d *appsv1.Deployment, at time.Time) {
	f.events++
	if typ == watch.Deleted {
		delete(f.deps, d.Name)
		f.s.set(d.Name, false, at)
		return
	}
	f.deps[d.Name] = d
	f.recompute(d.Name, at)
}

func (f *freshnessState) onReplicaSet(typ watch.EventType, rs *appsv1.ReplicaSet, at time.Time) {
	f.events++
	dep := rsOwner(rs)
	if prev, ok := f.rsDep[rs.Name]; ok && prev != dep {
		delete(f.rss[prev], rs.Name)
		f.recompute(prev, at)
	}
	if typ == watch.Deleted || dep == "" {
		delete(f.rsDep, rs.Name)
		if m := f.rss[dep]; m != nil {
			delete(m, rs.Name)
		}
	} else {
		f.rsDep[rs.Name] = dep
		if f.rss[dep] == nil {
			f.rss[dep] = map[string]*appsv1.ReplicaSet{}
		}
		f.rss[dep][rs.Name] = rs
		f.tl.onReplicaSet(dep, rs, at)
	}
	if dep != "" {
		f.recompute(dep, at)
	}
}

func (f *freshnessState) recompute(dep string, at time.Time) {
	d := f.deps[dep]
	if _, tracked := f.s.durs[dep]; !tracked || d == nil {
		return
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(f.rss[dep]))
	for _, rs := range f.rss[dep] {
		rss = append(rss, rs)
	}
	f.s.set(dep, expectedStatus(d, rss) != actualStatus(d), at)
	f.tl.onChange(dep, d, rss, at)
}

// freshness watches a namespace's Deployments and ReplicaSets (list, then watch from the
// list's resourceVersion) and keeps the stale intervals of the named Deployments.
type freshness struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	st  *freshnessState
	err error
	res *Freshness
}

func watchFreshness(ctx context.Context, kube kubernetes.Interface, ns string, want map[string]int64) (*freshness, error) {
	ctx, cancel := context.WithCancel(ctx)
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	f := &freshness{cancel: cancel, done: make(chan struct{}), st: newFreshnessState(names, want)}
	now := time.Now()
	rsList, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	depList, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	for i := range rsList.Items {
		f.st.onReplicaSet(watch.Added, &rsList.Items[i], now)
	}
	for i := range depList.Items {
		f.st.onDeployment(watch.Added, &depList.Items[i], now)
	}
	f.st.events = 0 // count what the watches bring
	rsw, err := watchtools.NewRetryWatcherWithContext(ctx, rsList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.AppsV1().ReplicaSets(ns).Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		return nil, err
	}
	dw, err := watchtools.NewRetryWatcherWithContext(ctx, depList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.AppsV1().Deployments(ns).Watch(ctx, o)
		}})
	if err != nil {
		rsw.Stop()
		cancel()
		return nil, err
	}
	go func() {
		defer close(f.done)
		defer rsw.Stop()
		defer dw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rsw.ResultChan():
				if !ok {
					f.fail(fmt.Errorf("replicaset watch ended"))
					return
				}
				if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok && ev.Type != watch.Bookmark {
					f.mu.Lock()
					f.st.onReplicaSet(ev.Type, rs, time.Now())
					f.mu.Unlock()
				} else if ev.Type == watch.Error {
					f.fail(fmt.Errorf("replicaset watch error: %v", ev.Object))
				}
			case ev, ok := <-dw.ResultChan():
				if !ok {
					f.fail(fmt.Errorf("deployment watch ended"))
					return
				}
				if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Bookmark {
					f.mu.Lock()
					f.st.onDeployment(ev.Type, d, time.Now())
					f.mu.Unlock()
				} else if ev.Type == watch.Error {
					f.fail(fmt.Errorf("deployment watch error: %v", ev.Object))
				}
			}
		}
	}()
	return f, nil
}

func (f *freshness) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// begin marks the start of the phase; call it just before the writes that start it.
func (f *freshness) begin(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.s.begin(at)
	f.st.tl.begin(at)
}

// timeline is the phase's Timeline, once this watch has seen every Deployment complete (its
// events may trail the harness's own watch), or as it is after `bound`.
func (f *freshness) timeline(ctx context.Context, bound time.Duration) Timeline {
	deadline := time.Now().Add(bound)
	for {
		f.mu.Lock()
		t := f.st.tl.summary()
		f.mu.Unlock()
		if t.Deployments == len(f.st.tl.want) || time.Now().After(deadline) || ctx.Err() != nil {
			return t
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// stop closes the phase at `at` (intervals still open end there), ends the watch and returns
// the figures. Later calls return the first call's figures.
func (f *freshness) stop(at time.Time) Freshness {
	f.mu.Lock()
	if f.res == nil {
		res := f.st.s.end(at)
		f.res = &res
	}
	f.mu.Unlock()
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	res := *f.res
	res.Events = f.st.events
	if f.err != nil {
		res.Err = f.err.Error()
	}
	return res
}
