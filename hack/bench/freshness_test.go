package main

import (
	"math"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// step is one call on the staleness bookkeeping, at t0 + ms.
type step struct {
	ms    int
	op    string // "set", "begin", "end"
	name  string
	stale bool
}

func TestStaleness(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		steps []step // the last must be "end"
		// want is each Deployment's intervals, in ms.
		want map[string][]int
		open int
	}{{
		name:  "never stale",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": nil},
	}, {
		name:  "one interval",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "a", true}, {350, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {250}},
	}, {
		name:  "repeated stale events do not restart the interval",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "a", true}, {200, "set", "a", true}, {300, "set", "a", true}, {400, "set", "a", false}, {450, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {300}},
	}, {
		name:  "several intervals",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "a", true}, {110, "set", "a", false}, {500, "set", "a", true}, {800, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {10, 300}},
	}, {
		name:  "open at the end is closed at the end",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {600, "set", "a", true}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {400}},
		open:  1,
	}, {
		name:  "stale before the phase starts opens at the start",
		names: []string{"a"},
		steps: []step{{-500, "set", "a", true}, {0, "begin", "", false}, {200, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {200}},
	}, {
		name:  "an interval that ends before the phase does not count",
		names: []string{"a"},
		steps: []step{{-500, "set", "a", true}, {-400, "set", "a", false}, {0, "begin", "", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": nil},
	}, {
		name:  "an event stamped before the start counts from the start",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {-5, "set", "a", true}, {100, "set", "a", false}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {100}},
	}, {
		name:  "after the end nothing counts",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "a", true}, {200, "set", "a", false}, {1000, "end", "", false}, {1100, "set", "a", true}, {1200, "set", "a", false}},
		want:  map[string][]int{"a": {100}},
	}, {
		name:  "untracked Deployments are ignored",
		names: []string{"a"},
		steps: []step{{0, "begin", "", false}, {100, "set", "other", true}, {1000, "end", "", false}},
		want:  map[string][]int{"a": nil},
	}, {
		name:  "several Deployments, one still stale",
		names: []string{"a", "b", "c"},
		steps: []step{{0, "begin", "", false}, {10, "set", "a", true}, {20, "set", "b", true}, {30, "set", "a", false}, {40, "set", "b", false}, {50, "set", "b", true}, {900, "set", "c", true}, {1000, "end", "", false}},
		want:  map[string][]int{"a": {20}, "b": {20, 950}, "c": {100}},
		open:  2,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStaleness(tc.names)
			var f Freshness
			ended := false
			for _, st := range tc.steps {
				switch st.op {
				case "begin":
					s.begin(at(st.ms))
				case "set":
					s.set(st.name, st.stale, at(st.ms))
				case "end":
					f, ended = s.end(at(st.ms)), true
				}
			}
			if !ended {
				t.Fatal("no end step")
			}
			got := map[string][]int{}
			for n, ds := range s.durs {
				var ms []int
				for _, d := range ds {
					ms = append(ms, int(d.Milliseconds()))
				}
				got[n] = ms
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("intervals %v, want %v", got, tc.want)
			}
			if f.Open != tc.open {
				t.Errorf("open %d, want %d", f.Open, tc.open)
			}
			if f.Deployments != len(tc.names) {
				t.Errorf("deployments %d, want %d", f.Deployments, len(tc.names))
			}
			n := 0
			for name, ms := range tc.want {
				n += len(ms)
				total := 0
				for _, m := range ms {
					total += m
				}
				if got := f.PerDeployment[name]; math.Abs(got-float64(total)/1000) > 1e-9 {
					t.Errorf("stale time of %s %.3fs, want %.3fs", name, got, float64(total)/1000)
				}
			}
			if f.Intervals != n || len(f.Durations) != n {
				t.Errorf("intervals %d (%d durations), want %d", f.Intervals, len(f.Durations), n)
			}
		})
	}
}

func TestStalenessSummary(t *testing.T) {
	s := newStaleness([]string{"a", "b", "c"})
	s.begin(at(0))
	// a: 100 intervals of 1..100 ms; b: one of 5s; c: never.
	ms := 0
	for i := 1; i <= 100; i++ {
		s.set("a", true, at(ms))
		ms += i
		s.set("a", false, at(ms))
	}
	s.set("b", true, at(1000))
	s.set("b", false, at(6000))
	f := s.end(at(10000))
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s %.4f, want %.4f", what, got, want)
		}
	}
	if f.Intervals != 101 {
		t.Errorf("intervals %d, want 101", f.Intervals)
	}
	// Sorted durations: 0.001 ... 0.100, 5. Nearest rank: p50 is the 51st, p99 the 100th.
	near("p50", f.P50, 0.051)
	near("p99", f.P99, 0.100)
	near("max", f.Max, 5)
	// Totals: a 5.050s, b 5s, c 0.
	near("total median", f.TotalMedian, 5)
	near("total max", f.TotalMax, 5.050)
	near("phase", f.PhaseSeconds, 10)
	// Only b's interval is slow (a's longest is 100ms): it began 1s in, the first of b's.
	if want := []StaleInterval{{Deployment: "b", At: 1, Seconds: 5, Nth: 1}}; !reflect.DeepEqual(f.Slow, want) {
		t.Errorf("slow %+v, want %+v", f.Slow, want)
	}
}

func TestQuantile(t *testing.T) {
	tests := []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{3}, 0.5, 3},
		{[]float64{3}, 0.99, 3},
		{[]float64{1, 2}, 0.5, 1},
		{[]float64{1, 2, 3, 4}, 0.5, 2},
		{[]float64{1, 2, 3, 4}, 0.99, 4},
		{[]float64{1, 2, 3, 4}, 1, 4},
		{[]float64{1, 2, 3, 4}, 0, 1},
	}
	for _, tc := range tests {
		if got := quantile(tc.xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
		}
	}
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func dep(image string, replicas, updated, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "bench", UID: "uid-a"},
		Spec:       appsv1.DeploymentSpec{Template: template(image)},
		Status:     appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available},
	}
}

func rs(name, image, hash string, created int, replicas, available int32) *appsv1.ReplicaSet {
	tpl := template(image)
	tpl.Labels = map[string]string{"app": "a", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	yes := true
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", CreationTimestamp: metav1.NewTime(at(created * 1000)),
			Labels:          map[string]string{"app": "a", appsv1.DefaultDeploymentUniqueLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "a", UID: "uid-a", Controller: &yes}}},
		Spec:   appsv1.ReplicaSetSpec{Template: tpl},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: available},
	}
}

func TestExpectedStatus(t *testing.T) {
	tests := []struct {
		name string
		d    *appsv1.Deployment
		rss  []*appsv1.ReplicaSet
		want statusCounts
	}{{
		name: "no ReplicaSets",
		d:    dep("v1", 0, 0, 0),
		want: statusCounts{},
	}, {
		name: "one ReplicaSet, the new one despite its hash label",
		d:    dep("v1", 10, 10, 10),
		rss:  []*appsv1.ReplicaSet{rs("a-1", "v1", "h1", 1, 10, 9)},
		want: statusCounts{replicas: 10, updated: 10, available: 9},
	}, {
		name: "just updated: no new ReplicaSet yet",
		d:    dep("v2", 10, 10, 10),
		rss:  []*appsv1.ReplicaSet{rs("a-1", "v1", "h1", 1, 10, 10)},
		want: statusCounts{replicas: 10, updated: 0, available: 10},
	}, {
		name: "mid rollout",
		d:    dep("v2", 13, 5, 8),
		rss:  []*appsv1.ReplicaSet{rs("a-1", "v1", "h1", 1, 8, 8), rs("a-2", "v2", "h2", 2, 5, 2)},
		want: statusCounts{replicas: 13, updated: 5, available: 10},
	}, {
		name: "two ReplicaSets with the new template: the oldest is the new one",
		d:    dep("v2", 0, 0, 0),
		rss:  []*appsv1.ReplicaSet{rs("a-3", "v2", "h3", 3, 1, 1), rs("a-2", "v2", "h2", 2, 4, 4)},
		want: statusCounts{replicas: 5, updated: 4, available: 5},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := expectedStatus(tc.d, tc.rss); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// event is one watch event fed to freshnessState, at t0 + ms.
type event struct {
	ms  int
	typ watch.EventType
	d   *appsv1.Deployment
	rs  *appsv1.ReplicaSet
}

func TestFreshnessState(t *testing.T) {
	tests := []struct {
		name   string
		seed   []event // before the phase, at t0 − 1s
		events []event // the phase runs from 0 to 10s
		want   []int   // intervals of Deployment a, in ms
	}{{
		name: "a rolling update with a prompt controller",
		seed: []event{{0, watch.Added, nil, rs("a-1", "v1", "h1", 1, 4, 4)}, {0, watch.Added, dep("v1", 4, 4, 4), nil}},
		events: []event{
			{0, watch.Modified, dep("v2", 4, 4, 4), nil},                  // the update: no new ReplicaSet, status says 4 updated
			{20, watch.Added, nil, rs("a-2", "v2", "h2", 2, 0, 0)},        // still 4 ≠ 0
			{30, watch.Modified, dep("v2", 4, 0, 4), nil},                 // the controller catches up
			{100, watch.Modified, nil, rs("a-2", "v2", "h2", 2, 1, 0)},    // new RS grows
			{110, watch.Modified, dep("v2", 5, 1, 4), nil},                // status follows
			{1100, watch.Modified, nil, rs("a-2", "v2", "h2", 2, 1, 1)},   // a new pod is available
			{1150, watch.Modified, nil, rs("a-1", "v1", "h1", 1, 3, 3)},   // an old one goes
			{1160, watch.Modified, dep("v2", 4, 1, 4), nil},               // status follows both
			{2000, watch.Modified, nil, rs("a-1", "v1", "h1", 1, 0, 0)},   // the old RS is scaled away...
			{2001, watch.Modified, nil, rs("a-2", "v2", "h2", 2, 4, 4)},   // ...and the new one is complete
			{2500, watch.Modified, dep("v2", 4, 4, 4), nil},               // status follows
			{3000, watch.Deleted, nil, rs("a-1", "v1", "h1", 1, 0, 0)},    // nothing changes
			{3100, watch.Modified, nil, rs("a-2", "v2", "h2", 2, 4, 4)},   // a no-op update
			{9000, watch.Modified, nil, rs("a-2", "v2", "h2", 2, 4, 3)},   // a pod becomes unavailable, never reflected
			{9500, watch.Modified, dep("v2", 4, 4, 4), nil},               // a status write that still disagrees
			{9800, watch.Modified, nil, rs("other", "v1", "x", 1, 5, 5)},  // another Deployment's
			{9900, watch.Modified, nil, rs("orphan", "v9", "x", 1, 5, 5)}, // not ours after all (below)
		},
		want: []int{30, 10, 60, 500, 1000},
	}, {
		name: "a ReplicaSet deleted while counted makes the status stale",
		seed: []event{{0, watch.Added, nil, rs("a-1", "v1", "h1", 1, 2, 2)}, {0, watch.Added, nil, rs("a-0", "v0", "h0", 0, 1, 1)}, {0, watch.Added, dep("v1", 3, 2, 3), nil}},
		events: []event{
			{100, watch.Deleted, nil, rs("a-0", "v0", "h0", 0, 1, 1)},
			{400, watch.Modified, dep("v1", 2, 2, 2), nil},
		},
		want: []int{300},
	}, {
		name: "stale when the phase starts",
		seed: []event{{0, watch.Added, nil, rs("a-1", "v1", "h1", 1, 2, 1)}, {0, watch.Added, dep("v1", 2, 2, 2), nil}},
		events: []event{
			{700, watch.Modified, dep("v1", 2, 2, 1), nil},
		},
		want: []int{700},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFreshnessState([]string{"a"}, map[string]int64{"a": 1})
			feed := func(e event, when time.Time) {
				switch {
				case e.d != nil:
					f.onDeployment(e.typ, e.d, when)
				case e.rs.Name == "other":
					other := e.rs.DeepCopy()
					other.OwnerReferences[0].Name = "b"
					f.onReplicaSet(e.typ, other, when)
				case e.rs.Name == "orphan":
					orphan := e.rs.DeepCopy()
					orphan.OwnerReferences[0].Kind = "SomethingElse"
					f.onReplicaSet(e.typ, orphan, when)
				default:
					f.onReplicaSet(e.typ, e.rs, when)
				}
			}
			for _, e := range tc.seed {
				feed(e, at(-1000))
			}
			f.s.begin(at(0))
			for _, e := range tc.events {
				feed(e, at(e.ms))
			}
			res := f.s.end(at(10000))
			var got []int
			for _, d := range f.s.durs["a"] {
				got = append(got, int(d.Milliseconds()))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("intervals %v ms, want %v", got, tc.want)
			}
			if res.Intervals != len(tc.want) {
				t.Errorf("summary has %d intervals, want %d", res.Intervals, len(tc.want))
			}
		})
	}
}

func TestParseBudgets(t *testing.T) {
	tests := []struct {
		in      string
		want    []Budget
		wantErr bool
	}{
		{"20/30,200/300", []Budget{{20, 30}, {200, 300}}, false},
		{" 50 / 100 ", []Budget{{50, 100}}, false},
		{"20/30,20/30", []Budget{{20, 30}}, false},
		{"0.5/1", []Budget{{0.5, 1}}, false},
		{"20", nil, true},
		{"20/x", nil, true},
		{"0/30", nil, true},
		{"20/0", nil, true},
		{"", nil, true},
	}
	for _, tc := range tests {
		got, err := ParseBudgets(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseBudgets(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseFlags(t *testing.T) {
	names := func(c Config) []string {
		var out []string
		for _, w := range c.Workloads {
			out = append(out, w.Name)
		}
		return out
	}
	tests := []struct {
		args      []string
		budgets   []Budget
		workloads []string
		wantErr   bool
	}{
		{nil, []Budget{{20, 30}, {200, 300}}, []string{"rolling-20x10", "rolling-100x10", "recreate-20x10", "scale-1000"}, false},
		{[]string{"--quick"}, []Budget{{200, 300}}, []string{"rolling-1x2"}, false},
		{[]string{"--quick", "--budgets", "20/30,200/300"}, []Budget{{20, 30}, {200, 300}}, []string{"rolling-1x2"}, false},
		{[]string{"--qps", "50", "--burst", "100"}, []Budget{{50, 100}}, nil, false},
		{[]string{"--qps", "50"}, []Budget{{50, 30}}, nil, false},
		{[]string{"--budgets", "200/300", "--workloads", "rolling-20x10,recreate-20x10"}, []Budget{{200, 300}}, []string{"rolling-20x10", "recreate-20x10"}, false},
		{[]string{"--budgets", "200/300", "--qps", "20"}, nil, nil, true},
		{[]string{"--coalesce", "100ms"}, nil, nil, true},
		{[]string{"--workloads", "nope"}, nil, nil, true},
	}
	for _, tc := range tests {
		c, err := parseFlags(tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(c.Budgets, tc.budgets) {
			t.Errorf("%q: budgets %v, want %v", tc.args, c.Budgets, tc.budgets)
		}
		if tc.workloads != nil && !reflect.DeepEqual(names(c), tc.workloads) {
			t.Errorf("%q: workloads %v, want %v", tc.args, names(c), tc.workloads)
		}
	}
}

func TestOurArgs(t *testing.T) {
	got := ourArgs("/k", "127.0.0.1:7233", Budget{200, 300})
	want := []string{"--kubeconfig", "/k", "--temporal-address", "127.0.0.1:7233", "--kube-qps", "200", "--kube-burst", "300", "--metrics-address", "", "--log-format", "text"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
