package k8s

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// snapshotRS is a ReplicaSet in prod named name, with the given UID, controller UID (""
// for an orphan) and app label.
func snapshotRS(name string, uid, controller types.UID, app string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "prod", UID: uid,
		Labels: map[string]string{"app": app, hashKey: name},
	}}
	if controller != "" {
		rs.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: controller, Controller: ptrTo(true),
		}}
	}
	return rs
}

// snapshotPod is a pod in prod controlled by the ReplicaSet with UID owner ("" for none).
func snapshotPod(name string, owner types.UID, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"},
		Status:     corev1.PodStatus{Phase: phase},
	}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: owner, Controller: ptrTo(true)}}
	}
	return p
}

func namesOf(rss []*appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, rs.Name)
	}
	return out
}

func TestNewSnapshot(t *testing.T) {
	d := webDeployment(3, "nginx:1") // prod/web, UID web-uid, selector app=web
	const uid = types.UID("web-uid")
	// Names and UIDs run in opposite orders, so sorting by either shows.
	owned := snapshotRS("web-b", "uid-2", uid, "web")
	ownedNotMatching := snapshotRS("web-c", "uid-1", uid, "other")
	orphan := snapshotRS("web-a", "uid-3", "", "web")
	orphanNotMatching := snapshotRS("db-a", "uid-4", "", "db")
	othersMatching := snapshotRS("web-x", "uid-5", "other-uid", "web")
	otherNamespace := snapshotRS("web-z", "uid-6", uid, "web")
	otherNamespace.Namespace = "staging"
	nonController := snapshotRS("web-n", "uid-7", "", "other")
	nonController.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: uid}}
	all := []*appsv1.ReplicaSet{othersMatching, owned, orphanNotMatching, otherNamespace, ownedNotMatching, orphan, nonController}

	tests := []struct {
		name     string
		give     *appsv1.Deployment
		giveRSs  []*appsv1.ReplicaSet
		want     []string
		wantPods bool // Pods filled (Recreate)
	}{
		{
			name:    "owned whatever the labels, matching orphans, sorted by name",
			give:    d,
			giveRSs: all,
			want:    []string{"web-a", "web-b", "web-c"},
		},
		{
			name:    "owned but not matching is kept",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{ownedNotMatching},
			want:    []string{"web-c"},
		},
		{
			name:    "orphan matching is kept",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{orphan},
			want:    []string{"web-a"},
		},
		{
			name:    "orphan not matching is dropped",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{orphanNotMatching},
		},
		{
			name:    "owned by another UID is dropped even when matching",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{othersMatching},
		},
		{
			name:    "other namespace is dropped even when owned",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{otherNamespace},
		},
		{
			name:    "a non-controller owner reference does not make it owned",
			give:    d,
			giveRSs: []*appsv1.ReplicaSet{nonController},
		},
		{
			name: "empty selector adopts no orphan but keeps the owned",
			give: func() *appsv1.Deployment {
				d := d.DeepCopy()
				d.Spec.Selector = &metav1.LabelSelector{}
				return d
			}(),
			giveRSs: all,
			want:    []string{"web-b", "web-c"},
		},
		{
			name: "nil selector adopts no orphan but keeps the owned",
			give: func() *appsv1.Deployment {
				d := d.DeepCopy()
				d.Spec.Selector = nil
				return d
			}(),
			giveRSs: all,
			want:    []string{"web-b", "web-c"},
		},
		{
			name: "invalid selector adopts no orphan but keeps the owned",
			give: func() *appsv1.Deployment {
				d := d.DeepCopy()
				d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
				return d
			}(),
			giveRSs: all,
			want:    []string{"web-b", "web-c"},
		},
		{
			name:     "Recreate fills pod counts",
			give:     useRecreate(d.DeepCopy()),
			giveRSs:  all,
			want:     []string{"web-a", "web-b", "web-c"},
			wantPods: true,
		},
		{
			name: "nothing given",
			give: d,
		},
	}
	pods := []*corev1.Pod{snapshotPod("p1", "uid-2", corev1.PodRunning)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewSnapshot(tt.give, tt.giveRSs, pods)
			if got.Deployment != tt.give {
				t.Errorf("Deployment = %p, want the given %p", got.Deployment, tt.give)
			}
			if names := namesOf(got.ReplicaSets); !reflect.DeepEqual(names, tt.want) {
				t.Errorf("ReplicaSets = %q, want %q", names, tt.want)
			}
			if gotPods := got.Pods != nil; gotPods != tt.wantPods {
				t.Errorf("Pods = %+v, want filled %t", got.Pods, tt.wantPods)
			}
		})
	}
}

// NewSnapshot does not copy: the snapshot holds the given objects.
func TestNewSnapshotKeepsObjects(t *testing.T) {
	d := webDeployment(1, "nginx:1")
	rs := snapshotRS("web-a", "uid-a", "web-uid", "web")
	got := NewSnapshot(d, []*appsv1.ReplicaSet{rs}, nil)
	if len(got.ReplicaSets) != 1 || got.ReplicaSets[0] != rs {
		t.Errorf("ReplicaSets = %v, want the given object %p", got.ReplicaSets, rs)
	}
}

// The snapshot reads the same whatever order the objects were listed in.
func TestNewSnapshotOrderIndependent(t *testing.T) {
	d := useRecreate(webDeployment(3, "nginx:1"))
	a := snapshotRS("web-a", "uid-9", "web-uid", "web")
	b := snapshotRS("web-b", "uid-1", "", "web")
	c := snapshotRS("web-c", "uid-5", "web-uid", "other")
	pods := []*corev1.Pod{
		snapshotPod("p1", "uid-9", corev1.PodRunning),
		snapshotPod("p2", "uid-1", corev1.PodRunning),
		snapshotPod("p3", "uid-5", corev1.PodPending),
	}
	want := NewSnapshot(d, []*appsv1.ReplicaSet{a, b, c}, pods)
	tests := []struct {
		name string
		give []*appsv1.ReplicaSet
	}{
		{name: "reversed", give: []*appsv1.ReplicaSet{c, b, a}},
		{name: "rotated", give: []*appsv1.ReplicaSet{b, c, a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reversed := []*corev1.Pod{pods[2], pods[1], pods[0]}
			if got := NewSnapshot(d, tt.give, reversed); !reflect.DeepEqual(got, want) {
				t.Errorf("NewSnapshot = %+v, want %+v", got, want)
			}
		})
	}
	if got := namesOf(want.ReplicaSets); !reflect.DeepEqual(got, []string{"web-a", "web-b", "web-c"}) {
		t.Errorf("ReplicaSets = %q, want sorted by name", got)
	}
	wantPods := []PodCount{{ReplicaSetUID: "uid-1", Running: 1}, {ReplicaSetUID: "uid-5", Running: 1}, {ReplicaSetUID: "uid-9", Running: 1}}
	if !reflect.DeepEqual(want.Pods, wantPods) {
		t.Errorf("Pods = %+v, want %+v (sorted by UID)", want.Pods, wantPods)
	}
}

func TestRunningPods(t *testing.T) {
	rsA := snapshotRS("web-a", "uid-b", "web-uid", "web")
	rsB := snapshotRS("web-b", "uid-a", "web-uid", "web")
	rss := []*appsv1.ReplicaSet{rsA, rsB}
	terminating := snapshotPod("term", "uid-b", corev1.PodRunning)
	terminating.DeletionTimestamp = ptrTo(metav1.NewTime(planNow.Add(-time.Second)))
	nonController := snapshotPod("nc", "", corev1.PodRunning)
	nonController.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-a", UID: "uid-b"}}

	tests := []struct {
		name string
		give []*corev1.Pod
		want []PodCount
	}{
		{name: "no pods", want: nil},
		{
			name: "pending, running and unknown count",
			give: []*corev1.Pod{
				snapshotPod("p1", "uid-b", corev1.PodPending),
				snapshotPod("p2", "uid-b", corev1.PodRunning),
				snapshotPod("p3", "uid-b", corev1.PodUnknown),
				snapshotPod("p4", "uid-b", ""),
			},
			want: []PodCount{{ReplicaSetUID: "uid-b", Running: 4}},
		},
		{
			name: "succeeded and failed do not count",
			give: []*corev1.Pod{
				snapshotPod("p1", "uid-b", corev1.PodSucceeded),
				snapshotPod("p2", "uid-b", corev1.PodFailed),
				snapshotPod("p3", "uid-a", corev1.PodRunning),
			},
			want: []PodCount{{ReplicaSetUID: "uid-a", Running: 1}},
		},
		{
			name: "terminating pods count",
			give: []*corev1.Pod{terminating},
			want: []PodCount{{ReplicaSetUID: "uid-b", Running: 1}},
		},
		{
			name: "pods of other ReplicaSets, bare pods and non-controller owners do not count",
			give: []*corev1.Pod{
				snapshotPod("p1", "uid-other", corev1.PodRunning),
				snapshotPod("p2", "", corev1.PodRunning),
				nonController,
			},
			want: nil,
		},
		{
			name: "sorted by ReplicaSet UID, not name",
			give: []*corev1.Pod{
				snapshotPod("p1", "uid-b", corev1.PodRunning),
				snapshotPod("p2", "uid-a", corev1.PodRunning),
				snapshotPod("p3", "uid-a", corev1.PodRunning),
			},
			want: []PodCount{{ReplicaSetUID: "uid-a", Running: 2}, {ReplicaSetUID: "uid-b", Running: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RunningPods(rss, tt.give); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RunningPods = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// NewSnapshot counts pods only for Recreate (RollingUpdate does not wait for old pods), and
// only for the ReplicaSets in the snapshot.
func TestNewSnapshotPods(t *testing.T) {
	owned := snapshotRS("web-a", "uid-a", "web-uid", "web")
	others := snapshotRS("web-x", "uid-x", "other-uid", "web")
	terminating := snapshotPod("p-term", "uid-a", corev1.PodRunning)
	terminating.DeletionTimestamp = ptrTo(metav1.NewTime(planNow))
	pods := []*corev1.Pod{
		snapshotPod("p-run", "uid-a", corev1.PodRunning),
		snapshotPod("p-done", "uid-a", corev1.PodSucceeded),
		snapshotPod("p-failed", "uid-a", corev1.PodFailed),
		terminating,
		snapshotPod("p-x", "uid-x", corev1.PodRunning),
	}
	tests := []struct {
		name string
		give *appsv1.Deployment
		want []PodCount
	}{
		{
			name: "Recreate counts pods not Succeeded or Failed, terminating included",
			give: useRecreate(webDeployment(1, "nginx:1")),
			want: []PodCount{{ReplicaSetUID: "uid-a", Running: 2}},
		},
		{
			name: "RollingUpdate has no pod counts",
			give: webDeployment(1, "nginx:1"),
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewSnapshot(tt.give, []*appsv1.ReplicaSet{owned, others}, pods)
			if !reflect.DeepEqual(got.Pods, tt.want) {
				t.Errorf("Pods = %+v, want %+v", got.Pods, tt.want)
			}
		})
	}
}

func TestSnapshotHolds(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "10"}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", ResourceVersion: "8"}}
	s := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}}
	tests := []struct {
		name string
		want []ObjectVersion
		held bool
	}{
		{"nothing asked", nil, true},
		{"the Deployment at its version", []ObjectVersion{DeploymentVersion(d)}, true},
		{"an older Deployment", []ObjectVersion{{Kind: KindDeployment, Name: "web", ResourceVersion: "9"}}, true},
		{"a newer Deployment", []ObjectVersion{{Kind: KindDeployment, Name: "web", ResourceVersion: "11"}}, false},
		{"another Deployment", []ObjectVersion{{Kind: KindDeployment, Name: "api", ResourceVersion: "1"}}, false},
		{"the ReplicaSet", []ObjectVersion{ReplicaSetVersion(rs)}, true},
		{"a newer ReplicaSet", []ObjectVersion{{Kind: KindReplicaSet, Name: "web-1", ResourceVersion: "12"}}, false},
		{"a ReplicaSet it does not hold", []ObjectVersion{{Kind: KindReplicaSet, Name: "web-2", ResourceVersion: "1"}}, false},
		{"a ReplicaSet gone", []ObjectVersion{ReplicaSetGone("web-2")}, true},
		{"a ReplicaSet that should be gone", []ObjectVersion{ReplicaSetGone("web-1")}, false},
		{"an unparsable version", []ObjectVersion{{Kind: KindDeployment, Name: "web", ResourceVersion: "x"}}, false},
		{"an unknown kind", []ObjectVersion{{Kind: "Pod", Name: "web"}}, false},
	}
	for _, tt := range tests {
		if got := s.Holds(tt.want); got != tt.held {
			t.Errorf("%s: Holds = %t, want %t", tt.name, got, tt.held)
		}
	}
}
