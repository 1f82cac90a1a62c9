package kube

import (
	"context"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/temporal-rollout/rollout/k8s"
)

// waitFor bounds every wait on the informers; the fake clientset delivers in milliseconds.
const waitFor = 5 * time.Second

func ptrTo[T any](v T) *T { return &v }

// deployment is namespace/name with the given UID, selector app=<name>, at resourceVersion rv.
func deployment(namespace, name string, uid types.UID, rv string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid, ResourceVersion: rv},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
		},
	}
}

func recreate(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// replicaSet is namespace/name labelled app=<app>, controlled by the Deployment owner (nil
// for an orphan), at resourceVersion rv.
func replicaSet(namespace, name string, uid types.UID, app string, owner *appsv1.Deployment, rv string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: uid, ResourceVersion: rv,
		Labels: map[string]string{"app": app},
	}}
	if owner != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
	}
	return rs
}

// pod is namespace/name controlled by the ReplicaSet owner (nil for a bare pod).
func pod(namespace, name string, owner *appsv1.ReplicaSet, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1"}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

// startCache serves objs from a fake clientset and starts a cache of namespace on it; both
// stop with the test.
func startCache(t *testing.T, namespace string, objs ...runtime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	c, err := NewCache(client, namespace)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c, client
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rsNames(rss []*appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, rs.Name)
	}
	return out
}

func TestCacheCaughtUp(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "10")
	rs := replicaSet("prod", "web-a", "web-a-uid", "web", web, "20")
	c, _ := startCache(t, "prod", web, rs)

	tests := []struct {
		name string
		give []k8s.ObjectVersion
		want bool
	}{
		{name: "nothing to wait for", want: true},
		{name: "same versions", give: []k8s.ObjectVersion{k8s.DeploymentVersion(web), k8s.ReplicaSetVersion(rs)}, want: true},
		{name: "older versions", give: []k8s.ObjectVersion{
			{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "9"},
			{Kind: k8s.KindReplicaSet, Name: "web-a", ResourceVersion: "3"},
		}, want: true},
		{name: "no version named", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web"}}, want: true},
		{name: "newer deployment", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "11"}}, want: false},
		{name: "newer replicaset", give: []k8s.ObjectVersion{k8s.DeploymentVersion(web), {Kind: k8s.KindReplicaSet, Name: "web-a", ResourceVersion: "21"}}, want: false},
		{name: "unparseable version", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "x"}}, want: false},
		{name: "named gone but cached", give: []k8s.ObjectVersion{k8s.ReplicaSetGone("web-a")}, want: false},
		{name: "named gone and absent", give: []k8s.ObjectVersion{k8s.ReplicaSetGone("web-old")}, want: true},
		{name: "deployment named gone and absent", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "api", Gone: true}}, want: true},
		// The fix: an object the cache does not hold is not taken for deleted.
		{name: "absent replicaset not named gone", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web-new", ResourceVersion: "5"}}, want: false},
		{name: "absent deployment not named gone", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "api", ResourceVersion: "5"}}, want: false},
		{name: "absent without a version", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web-new"}}, want: false},
		{name: "one lagging object is enough", give: []k8s.ObjectVersion{k8s.DeploymentVersion(web), k8s.ReplicaSetGone("web-old"), {Kind: k8s.KindReplicaSet, Name: "web-new", ResourceVersion: "5"}}, want: false},
		{name: "unknown kind", give: []k8s.ObjectVersion{{Kind: "Pod", Name: "p"}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.CaughtUp("prod", tt.give); got != tt.want {
				t.Errorf("CaughtUp(%+v) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

// ReplicaSetsSeen: the ReplicaSet informer has handled an event at that resourceVersion or
// later, and moves on as ReplicaSet events arrive.
func TestCacheReplicaSetsSeen(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "10")
	rs := replicaSet("prod", "web-a", "web-a-uid", "web", web, "20")
	c, client := startCache(t, "prod", web, rs)
	eventually(t, "the listed ReplicaSet handled", func() bool { return c.ReplicaSetsSeen("20") })
	for _, tt := range []struct {
		give string
		want bool
	}{{"19", true}, {"20", true}, {"21", false}, {"x", false}, {"", false}} {
		if got := c.ReplicaSetsSeen(tt.give); got != tt.want {
			t.Errorf("ReplicaSetsSeen(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}
	next := rs.DeepCopy()
	next.ResourceVersion = "30"
	if _, err := client.AppsV1().ReplicaSets("prod").Update(context.Background(), next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update handled", func() bool { return c.ReplicaSetsSeen("25") })
}

// A Deployment created after the cache started is not caught up (not taken for deleted)
// until the informer delivers it.
func TestCacheCaughtUpWaitsForNewDeployment(t *testing.T) {
	c, client := startCache(t, "prod")
	want := []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "30"}}
	if got := c.CaughtUp("prod", want); got {
		t.Fatalf("CaughtUp before the create = %t, want false", got)
	}
	if _, err := client.AppsV1().Deployments("prod").Create(context.Background(), deployment("prod", "web", "web-uid", "30"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CaughtUp after the create", func() bool { return c.CaughtUp("prod", want) })
}

func TestCacheSnapshot(t *testing.T) {
	web := recreate(deployment("prod", "web", "web-uid", "1"))
	old := deployment("prod", "web", "old-web-uid", "1") // an earlier Deployment of the same name
	api := deployment("prod", "api", "api-uid", "1")
	owned := replicaSet("prod", "web-b", "uid-b", "web", web, "1")
	ownedNotMatching := replicaSet("prod", "web-c", "uid-c", "other", web, "1")
	orphan := replicaSet("prod", "web-a", "uid-a", "web", nil, "1")
	orphanNotMatching := replicaSet("prod", "db-a", "uid-db", "db", nil, "1")
	orphanElsewhere := replicaSet("staging", "web-s", "uid-s", "web", nil, "1")
	ownedElsewhere := replicaSet("staging", "web-t", "uid-t", "web", web, "1")
	ofOldUID := replicaSet("prod", "web-o", "uid-o", "web", old, "1")
	ofAPI := replicaSet("prod", "api-a", "uid-api", "web", api, "1")
	terminating := pod("prod", "b-term", owned, corev1.PodRunning)
	terminating.DeletionTimestamp = ptrTo(metav1.Now())
	objs := []runtime.Object{
		web, api, owned, ownedNotMatching, orphan, orphanNotMatching, orphanElsewhere, ownedElsewhere, ofOldUID, ofAPI,
		pod("prod", "b-run", owned, corev1.PodRunning),
		pod("prod", "b-pending", owned, corev1.PodPending),
		pod("prod", "b-done", owned, corev1.PodSucceeded),
		pod("prod", "b-failed", owned, corev1.PodFailed),
		terminating,
		pod("prod", "a-run", orphan, corev1.PodRunning),
		pod("prod", "c-run", ownedNotMatching, corev1.PodRunning),
		pod("prod", "api-run", ofAPI, corev1.PodRunning),
		pod("prod", "bare", nil, corev1.PodRunning),
	}
	c, _ := startCache(t, "", objs...)

	tests := []struct {
		name     string
		give     *appsv1.Deployment
		want     []string
		wantPods []k8s.PodCount
	}{
		{
			name: "Recreate: owned whatever the labels and matching orphans of its namespace, with running pods",
			give: web,
			want: []string{"web-a", "web-b", "web-c"},
			wantPods: []k8s.PodCount{
				{ReplicaSetUID: "uid-a", Running: 1},
				{ReplicaSetUID: "uid-b", Running: 3},
				{ReplicaSetUID: "uid-c", Running: 1},
			},
		},
		{
			name: "RollingUpdate: the same ReplicaSets, no pod counts",
			give: deployment("prod", "web", "web-uid", "1"),
			want: []string{"web-a", "web-b", "web-c"},
		},
		{
			name: "another UID of the same name sees only its own and the orphans",
			give: old,
			want: []string{"web-a", "web-o"},
		},
		{
			name: "another Deployment of the namespace",
			give: recreate(api.DeepCopy()),
			want: []string{"api-a"},
			wantPods: []k8s.PodCount{
				{ReplicaSetUID: "uid-api", Running: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Snapshot(tt.give)
			if got.Deployment != tt.give {
				t.Errorf("Deployment = %p, want the given %p", got.Deployment, tt.give)
			}
			if names := rsNames(got.ReplicaSets); !reflect.DeepEqual(names, tt.want) {
				t.Errorf("ReplicaSets = %q, want %q", names, tt.want)
			}
			if !reflect.DeepEqual(got.Pods, tt.wantPods) {
				t.Errorf("Pods = %+v, want %+v", got.Pods, tt.wantPods)
			}
		})
	}
}

// The cache applies the same rule as k8s.NewSnapshot over everything it holds: what a live
// read hands NewSnapshot and what the cache serves agree.
func TestCacheSnapshotAgreesWithNewSnapshot(t *testing.T) {
	web := recreate(deployment("prod", "web", "web-uid", "1"))
	rss := []*appsv1.ReplicaSet{
		replicaSet("prod", "web-b", "uid-b", "web", web, "1"),
		replicaSet("prod", "web-a", "uid-a", "web", nil, "1"),
		replicaSet("prod", "web-c", "uid-c", "other", web, "1"),
		replicaSet("prod", "db-a", "uid-db", "db", nil, "1"),
	}
	pods := []*corev1.Pod{
		pod("prod", "p1", rss[0], corev1.PodRunning),
		pod("prod", "p2", rss[1], corev1.PodFailed),
		pod("prod", "p3", rss[2], corev1.PodPending),
	}
	objs := []runtime.Object{web}
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	c, _ := startCache(t, "prod", objs...)

	got := c.Snapshot(web)
	want := k8s.NewSnapshot(web, rss, pods)
	if g, w := rsNames(got.ReplicaSets), rsNames(want.ReplicaSets); !reflect.DeepEqual(g, w) {
		t.Errorf("cached ReplicaSets = %q, want %q", g, w)
	}
	if !reflect.DeepEqual(got.Pods, want.Pods) {
		t.Errorf("cached Pods = %+v, want %+v", got.Pods, want.Pods)
	}
}

// The cache keeps of a Deployment's managedFields who wrote it and when (the watcher tells our
// writes from others' by it) but not the field sets; of a ReplicaSet none; of a pod only what
// a snapshot and the notifications read.
func TestCacheSlimsObjects(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at,
			Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
	}
	web := deployment("prod", "web", "web-uid", "1")
	web.ManagedFields = managed
	rs := replicaSet("prod", "web-a", "uid-a", "web", web, "1")
	rs.ManagedFields = managed
	p := pod("prod", "p1", rs, corev1.PodRunning)
	p.ManagedFields = managed
	p.ResourceVersion = "7"
	p.DeletionTimestamp = ptrTo(metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	c, _ := startCache(t, "prod", web, rs, p)

	d, err := c.Deployment("prod", "web")
	if err != nil {
		t.Fatal(err)
	}
	wantManaged := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at, FieldsType: "FieldsV1"},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at, Subresource: "status", FieldsType: "FieldsV1"},
	}
	if !reflect.DeepEqual(d.ManagedFields, wantManaged) {
		t.Errorf("cached deployment managedFields = %+v, want %+v (writers kept, field sets dropped)", d.ManagedFields, wantManaged)
	}
	cachedRS, err := c.ReplicaSet("prod", "web-a")
	if err != nil {
		t.Fatal(err)
	}
	// A ReplicaSet's writers are kept too: the watcher tells our worker's scaling of a rollout
	// held at rest from anyone else's by them (watcher.restedBefore).
	if !reflect.DeepEqual(cachedRS.ManagedFields, wantManaged) {
		t.Errorf("cached replicaset managedFields = %+v, want %+v (writers kept, field sets dropped)", cachedRS.ManagedFields, wantManaged)
	}
	obj, ok, err := c.PodInformer().GetStore().GetByKey("prod/p1")
	if err != nil || !ok {
		t.Fatalf("cached pod: %v, found %t", err, ok)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p1", Namespace: "prod", UID: "p1-uid", ResourceVersion: "7",
			OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if got := obj.(*corev1.Pod); !reflect.DeepEqual(got, want) {
		t.Errorf("cached pod = %+v, want %+v", got, want)
	}
}

func TestCacheDeployments(t *testing.T) {
	c, _ := startCache(t, "",
		deployment("prod", "web", "u1", "1"), deployment("prod", "api", "u2", "1"), deployment("staging", "web", "u3", "1"))
	tests := []struct {
		give string
		want []string
	}{
		{give: "", want: []string{"prod/api", "prod/web", "staging/web"}},
		{give: "prod", want: []string{"prod/api", "prod/web"}},
		{give: "dev", want: nil},
	}
	for _, tt := range tests {
		t.Run("namespace "+tt.give, func(t *testing.T) {
			ds, err := c.Deployments(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.Namespace+"/"+d.Name)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Deployments(%q) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

// A namespaced cache sees nothing of other namespaces.
func TestCacheNamespaced(t *testing.T) {
	c, _ := startCache(t, "prod", deployment("prod", "web", "u1", "1"), deployment("staging", "web", "u2", "1"))
	if _, err := c.Deployment("staging", "web"); err == nil {
		t.Errorf("Deployment(staging/web) error = nil, want not found in a cache of prod")
	}
	if d, err := c.Deployment("prod", "web"); err != nil || d.UID != "u1" {
		t.Errorf("Deployment(prod/web) = %v, %v, want uid u1", d, err)
	}
}

// notified reports whether ch has a pending wake-up, draining it.
func notified(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitNotified waits up to waitFor for a wake-up on ch.
func waitNotified(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("%s: no notification after %s", what, waitFor)
	}
}

func TestCacheSubscribe(t *testing.T) {
	ctx := context.Background()
	// prod/web is the subscriber. prod/witness, with its ReplicaSet and pod, is a second
	// subscriber: a change to one of its objects, made after the change under test, shows
	// that the informer's handler got past the change under test (each handler sees the
	// events of one informer in order), so "not notified" is not a race.
	web := deployment("prod", "web", "web-uid", "1")
	witness := deployment("prod", "witness", "witness-uid", "1")
	witnessRS := replicaSet("prod", "witness-a", "witness-a-uid", "witness", witness, "1")
	witnessPod := pod("prod", "witness-p", witnessRS, corev1.PodRunning)
	api := deployment("prod", "api", "api-uid", "1")
	webRS := replicaSet("prod", "web-a", "web-a-uid", "web", web, "1")
	apiRS := replicaSet("prod", "api-a", "api-a-uid", "api", api, "1")
	staleRS := replicaSet("prod", "web-old", "web-old-uid", "web", deployment("prod", "web", "earlier-uid", "1"), "1")
	stagingWeb := deployment("staging", "web", "staging-web-uid", "1")
	stagingWitness := deployment("staging", "witness", "staging-witness-uid", "1")
	base := func() []runtime.Object {
		return []runtime.Object{
			web.DeepCopy(), witness.DeepCopy(), witnessRS.DeepCopy(), witnessPod.DeepCopy(), api.DeepCopy(),
			webRS.DeepCopy(), apiRS.DeepCopy(), staleRS.DeepCopy(), stagingWeb.DeepCopy(), stagingWitness.DeepCopy(),
			pod("prod", "web-p", webRS, corev1.PodRunning), pod("prod", "api-p", apiRS, corev1.PodRunning),
			pod("prod", "stale-p", staleRS, corev1.PodRunning),
		}
	}
	relabel := func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels["touched"] = time.Now().Format("150405.000000000")
	}
	touchDeployment := func(client *fake.Clientset, ns, name string) error {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		relabel(&d.ObjectMeta)
		_, err = client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
	touchRS := func(client *fake.Clientset, ns, name string) error {
		rs, err := client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		relabel(&rs.ObjectMeta)
		_, err = client.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		return err
	}
	touchPod := func(client *fake.Clientset, ns, name string) error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		relabel(&p.ObjectMeta)
		_, err = client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	}

	tests := []struct {
		name string
		give func(*fake.Clientset) error
		// giveWitness touches the witness object handled by the same informer as give; with
		// giveWitnessNS "staging" the witness subscriber is staging/witness.
		giveWitness   string // "deployment", "replicaset" or "pod"
		giveWitnessNS string
		want          bool
	}{
		{
			name:        "the Deployment changes",
			give:        func(c *fake.Clientset) error { return touchDeployment(c, "prod", "web") },
			giveWitness: "deployment",
			want:        true,
		},
		{
			name: "the Deployment is deleted",
			give: func(c *fake.Clientset) error {
				return c.AppsV1().Deployments("prod").Delete(ctx, "web", metav1.DeleteOptions{})
			},
			giveWitness: "deployment",
			want:        true,
		},
		{
			name: "a Deployment of another name is created",
			give: func(c *fake.Clientset) error {
				_, err := c.AppsV1().Deployments("prod").Create(ctx, deployment("prod", "web2", "web2-uid", "1"), metav1.CreateOptions{})
				return err
			},
			giveWitness: "deployment",
		},
		{
			name:        "another Deployment of the namespace changes",
			give:        func(c *fake.Clientset) error { return touchDeployment(c, "prod", "api") },
			giveWitness: "deployment",
		},
		{
			name:          "a Deployment of the same name in another namespace changes",
			give:          func(c *fake.Clientset) error { return touchDeployment(c, "staging", "web") },
			giveWitness:   "deployment",
			giveWitnessNS: "staging",
		},
		{
			name:        "its ReplicaSet changes",
			give:        func(c *fake.Clientset) error { return touchRS(c, "prod", "web-a") },
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name: "its ReplicaSet is created",
			give: func(c *fake.Clientset) error {
				_, err := c.AppsV1().ReplicaSets("prod").Create(ctx, replicaSet("prod", "web-b", "web-b-uid", "web", web, "1"), metav1.CreateOptions{})
				return err
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name: "its ReplicaSet is deleted",
			give: func(c *fake.Clientset) error {
				return c.AppsV1().ReplicaSets("prod").Delete(ctx, "web-a", metav1.DeleteOptions{})
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name:        "another Deployment's ReplicaSet changes",
			give:        func(c *fake.Clientset) error { return touchRS(c, "prod", "api-a") },
			giveWitness: "replicaset",
		},
		{
			name: "an orphan of its namespace is created",
			give: func(c *fake.Clientset) error {
				_, err := c.AppsV1().ReplicaSets("prod").Create(ctx, replicaSet("prod", "db-a", "db-a-uid", "db", nil, "1"), metav1.CreateOptions{})
				return err
			},
			giveWitness: "replicaset",
			want:        true,
		},
		{
			name: "an orphan of another namespace is created",
			give: func(c *fake.Clientset) error {
				_, err := c.AppsV1().ReplicaSets("staging").Create(ctx, replicaSet("staging", "web-s", "web-s-uid", "web", nil, "1"), metav1.CreateOptions{})
				return err
			},
			giveWitness:   "replicaset",
			giveWitnessNS: "staging",
		},
		{
			name:        "a pod of its ReplicaSet changes",
			give:        func(c *fake.Clientset) error { return touchPod(c, "prod", "web-p") },
			giveWitness: "pod",
			want:        true,
		},
		{
			name: "a pod of its ReplicaSet is deleted",
			give: func(c *fake.Clientset) error {
				return c.CoreV1().Pods("prod").Delete(ctx, "web-p", metav1.DeleteOptions{})
			},
			giveWitness: "pod",
			want:        true,
		},
		{
			name:        "a pod of another Deployment's ReplicaSet changes",
			give:        func(c *fake.Clientset) error { return touchPod(c, "prod", "api-p") },
			giveWitness: "pod",
		},
		{
			name: "a pod naming a ReplicaSet the cache does not hold",
			give: func(c *fake.Clientset) error {
				ghost := replicaSet("prod", "web-ghost", "ghost-uid", "web", web, "1")
				_, err := c.CoreV1().Pods("prod").Create(ctx, pod("prod", "ghost-p", ghost, corev1.PodRunning), metav1.CreateOptions{})
				return err
			},
			giveWitness: "pod",
		},
		{
			name: "a pod whose owner UID is not the cached ReplicaSet's",
			give: func(c *fake.Clientset) error {
				impostor := replicaSet("prod", "web-a", "another-uid", "web", web, "1")
				_, err := c.CoreV1().Pods("prod").Create(ctx, pod("prod", "impostor-p", impostor, corev1.PodRunning), metav1.CreateOptions{})
				return err
			},
			giveWitness: "pod",
		},
		{
			name:        "a pod of a ReplicaSet of an earlier Deployment of the same name",
			give:        func(c *fake.Clientset) error { return touchPod(c, "prod", "stale-p") },
			giveWitness: "pod",
			// Notifications go by name: web looks once more, and its snapshot (by UID) leaves
			// web-old out.
			want: true,
		},
		{
			name: "a bare pod",
			give: func(c *fake.Clientset) error {
				_, err := c.CoreV1().Pods("prod").Create(ctx, pod("prod", "bare", nil, corev1.PodRunning), metav1.CreateOptions{})
				return err
			},
			giveWitness: "pod",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := startCache(t, "", base()...)
			wake, stop := c.Subscribe("prod", "web")
			defer stop()
			seen, stopWitness := c.Subscribe("prod", "witness")
			defer stopWitness()
			touchWitness := map[string]func() error{
				"deployment": func() error { return touchDeployment(client, "prod", "witness") },
				"replicaset": func() error { return touchRS(client, "prod", "witness-a") },
				"pod":        func() error { return touchPod(client, "prod", "witness-p") },
			}
			// Settle: the handlers may still be delivering the initial list.
			for _, kind := range []string{"deployment", "replicaset", "pod"} {
				if err := touchWitness[kind](); err != nil {
					t.Fatal(err)
				}
				waitNotified(t, "settle "+kind, seen)
			}
			notified(wake)
			if tt.giveWitnessNS == "staging" {
				var stopStaging func()
				seen, stopStaging = c.Subscribe("staging", "witness")
				defer stopStaging()
				touchWitness["deployment"] = func() error { return touchDeployment(client, "staging", "witness") }
				touchWitness["replicaset"] = func() error {
					// An orphan of staging wakes every subscriber of staging.
					_, err := client.AppsV1().ReplicaSets("staging").Create(ctx, replicaSet("staging", "x", "x-uid", "x", nil, "1"), metav1.CreateOptions{})
					return err
				}
			}

			if err := tt.give(client); err != nil {
				t.Fatal(err)
			}
			if tt.want {
				select {
				case <-wake:
				case <-time.After(waitFor):
					t.Fatalf("no notification after %s, want one", waitFor)
				}
				return
			}
			if err := touchWitness[tt.giveWitness](); err != nil {
				t.Fatal(err)
			}
			waitNotified(t, "witness", seen)
			if got := notified(wake); got {
				t.Errorf("notified = %t, want false", got)
			}
		})
	}
}

// After stop the channel gets nothing more and the subscription is forgotten.
func TestCacheSubscribeStop(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "1")
	c, client := startCache(t, "prod", web)
	wake, stop := c.Subscribe("prod", "web")
	wake2, stop2 := c.Subscribe("prod", "web")
	defer stop2()
	stop()
	if got := c.subscribed(); !got {
		t.Fatalf("subscribed() after one of two stops = %t, want true", got)
	}
	notified(wake)
	d := web.DeepCopy()
	d.Labels = map[string]string{"x": "y"}
	if _, err := client.AppsV1().Deployments("prod").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNotified(t, "the remaining subscriber", wake2)
	if got := notified(wake); got {
		t.Errorf("stopped subscriber notified = %t, want false", got)
	}
	stop2()
	if got := c.subscribed(); got {
		t.Errorf("subscribed() after every stop = %t, want false", got)
	}
}

// Wake-ups do not block the informer: a subscriber that does not read still lets later
// changes through to the others, and holds one pending wake-up.
func TestCacheSubscribeDoesNotBlock(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "1")
	witness := deployment("prod", "witness", "witness-uid", "1")
	c, client := startCache(t, "prod", web, witness)
	wake, stop := c.Subscribe("prod", "web")
	defer stop()
	seen, stopWitness := c.Subscribe("prod", "witness")
	defer stopWitness()
	update := func(d *appsv1.Deployment, label string) {
		d = d.DeepCopy()
		d.Labels = map[string]string{"n": label}
		if _, err := client.AppsV1().Deployments("prod").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, label := range []string{"a", "b", "c", "d", "e"} {
		update(web, label)
	}
	update(witness, "x")
	waitNotified(t, "the witness after five unread wake-ups", seen)
	waitNotified(t, "the unread subscriber", wake)
}

// A named object the cache saw deleted at (or past) the version named is caught up: the cache
// is past that version, and holds its absence; a ReplicaSet only once its Deployment is seen
// deleted too. A deletion is not taken for a later version of the object (one re-created
// since, not delivered yet), nor remembered past deletionMemory.
func TestCacheCaughtUpAfterDelete(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "10")
	rs := replicaSet("prod", "web-a", "web-a-uid", "web", web, "20")
	api := deployment("prod", "api", "api-uid", "11")
	apiRS := replicaSet("prod", "api-a", "api-a-uid", "api", api, "21")
	c, client := startCache(t, "prod", web, rs, api, apiRS)
	var now atomic.Int64
	now.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	c.now = func() time.Time { return time.Unix(0, now.Load()) }
	ctx := context.Background()
	if err := client.AppsV1().ReplicaSets("prod").Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.AppsV1().Deployments("prod").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Someone deletes api's ReplicaSet; api lives.
	if err := client.AppsV1().ReplicaSets("prod").Delete(ctx, "api-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletions delivered", func() bool {
		_, errD := c.Deployment("prod", "web")
		_, errRS := c.ReplicaSet("prod", "web-a")
		_, errAPI := c.ReplicaSet("prod", "api-a")
		return apierrors.IsNotFound(errD) && apierrors.IsNotFound(errRS) && apierrors.IsNotFound(errAPI)
	})
	for _, tt := range []struct {
		give types.UID
		want bool
	}{{"web-uid", true}, {"api-uid", false}, {"web-a-uid", false}, {"", false}} {
		if got := c.DeploymentDeleted(tt.give); got != tt.want {
			t.Errorf("DeploymentDeleted(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}

	tests := []struct {
		name string
		give []k8s.ObjectVersion
		want bool
	}{
		{name: "deployment deleted at the version named", give: []k8s.ObjectVersion{k8s.DeploymentVersion(web)}, want: true},
		{name: "deployment deleted past the version named", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "9"}}, want: true},
		{name: "replicaset deleted at the version named", give: []k8s.ObjectVersion{k8s.ReplicaSetVersion(rs)}, want: true},
		{name: "both", give: []k8s.ObjectVersion{k8s.DeploymentVersion(web), k8s.ReplicaSetVersion(rs)}, want: true},
		{name: "named gone", give: []k8s.ObjectVersion{k8s.ReplicaSetGone("web-a")}, want: true},
		// The deletion seen was of version 10: one written at 11 was created again since.
		{name: "deployment deleted before the version named", give: []k8s.ObjectVersion{{Kind: k8s.KindDeployment, Name: "web", ResourceVersion: "11"}}, want: false},
		{name: "replicaset deleted before the version named", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web-a", ResourceVersion: "21"}}, want: false},
		{name: "deleted, no version named", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web-a"}}, want: false},
		{name: "another name never held", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web-b", ResourceVersion: "5"}}, want: false},
		{name: "a deployment's deletion is not a replicaset's", give: []k8s.ObjectVersion{{Kind: k8s.KindReplicaSet, Name: "web", ResourceVersion: "5"}}, want: false},
		// The ReplicaSet informer may run ahead of the Deployment informer: a sync must not
		// decide on a Deployment without the ReplicaSets it had.
		{name: "replicaset deleted, its deployment still held", give: []k8s.ObjectVersion{k8s.ReplicaSetVersion(apiRS)}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.CaughtUp("prod", tt.give); got != tt.want {
				t.Errorf("CaughtUp(%+v) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}

	// Past deletionMemory the deletion is forgotten: the wait falls back to its bound.
	now.Add(int64(deletionMemory + time.Second))
	if got := c.CaughtUp("prod", []k8s.ObjectVersion{k8s.DeploymentVersion(web)}); got {
		t.Errorf("CaughtUp(deleted %s ago) = %t, want false", deletionMemory+time.Second, got)
	}
	if got := c.DeploymentDeleted("web-uid"); got {
		t.Errorf("DeploymentDeleted(deleted %s ago) = %t, want false", deletionMemory+time.Second, got)
	}
}

// A Deployment deleted and created again under the same name (a new UID): the cache holds the
// new one, past every version of the old one, and the old one's ReplicaSets, deleted by the
// garbage collector, are caught up too.
func TestCacheCaughtUpRecreated(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "10")
	rs := replicaSet("prod", "web-a", "web-a-uid", "web", web, "20")
	c, client := startCache(t, "prod", web, rs)
	ctx := context.Background()
	if err := client.AppsV1().Deployments("prod").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.AppsV1().ReplicaSets("prod").Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().Deployments("prod").Create(ctx, deployment("prod", "web", "web-uid-2", "30"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new Deployment delivered", func() bool {
		d, err := c.Deployment("prod", "web")
		return err == nil && d.UID == "web-uid-2"
	})
	eventually(t, "the old ReplicaSet's deletion delivered", func() bool {
		_, err := c.ReplicaSet("prod", "web-a")
		return apierrors.IsNotFound(err)
	})
	want := []k8s.ObjectVersion{k8s.DeploymentVersion(web), k8s.ReplicaSetVersion(rs)}
	if got := c.CaughtUp("prod", want); !got {
		t.Errorf("CaughtUp(%+v) = %t, want true", want, got)
	}
}

// A relist may hand the informer a Deployment deleted and created again as one update (the
// same name, a new UID): the old UID is deleted all the same.
func TestCacheDeploymentReplacedInOneUpdate(t *testing.T) {
	web := deployment("prod", "web", "web-uid", "10")
	c, client := startCache(t, "prod", web)
	if _, err := client.AppsV1().Deployments("prod").Update(context.Background(), deployment("prod", "web", "web-uid-2", "30"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new UID delivered", func() bool {
		d, err := c.Deployment("prod", "web")
		return err == nil && d.UID == "web-uid-2"
	})
	for _, tt := range []struct {
		give types.UID
		want bool
	}{{"web-uid", true}, {"web-uid-2", false}} {
		if got := c.DeploymentDeleted(tt.give); got != tt.want {
			t.Errorf("DeploymentDeleted(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}
}
