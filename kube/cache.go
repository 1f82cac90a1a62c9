package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/temporal-rollout/rollout/k8s"
)

// byOwner indexes ReplicaSets and pods by their controller's UID, and orphan ReplicaSets by
// "orphan/<namespace>", so a snapshot reads one Deployment's objects, not a namespace's.
const byOwner = "ownerUID"

// Cache is an informer view of Deployments, ReplicaSets and pods: what the worker decides on
// (as upstream's controller reads its listers, a sync costs no API reads) and what the watcher
// weighs changes with. Snapshot applies k8s.NewSnapshot, the one rule of what a sync sees.
//
// Subscribe lets a caller wait for any change that concerns one Deployment: the worker's
// AwaitChange activity sleeps on it and wakes within the informer's latency.
type Cache struct {
	factory  informers.SharedInformerFactory
	dInf     cache.SharedIndexInformer
	rsInf    cache.SharedIndexInformer
	podInf   cache.SharedIndexInformer
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // by namespace/name

	// rsSeen is the highest resourceVersion of a ReplicaSet event handled (the indexer held
	// it by then); see ReplicaSetsSeen.
	rsSeen atomic.Uint64

	// deleted: by kind/namespace/name, the Deployments and ReplicaSets the informers saw
	// deleted (see CaughtUp); goneUIDs: the UIDs of the Deployments among them (see
	// DeploymentDeleted). Each is kept for deletionMemory.
	delMu     sync.Mutex
	deleted   map[string]deletion
	goneUIDs  map[types.UID]time.Time
	lastPrune time.Time
	now       func() time.Time
}

// deletion is an object the informers saw deleted: at its last resourceVersion, when, and (a
// ReplicaSet) the UID of the Deployment that controlled it.
type deletion struct {
	rv    string
	owner types.UID
	at    time.Time
}

// deletionMemory is how long the cache remembers a deletion. Its readers wait for a version
// seconds at most (AwaitChange's catch-up, Observe's), on versions written or seen a sync
// before: five minutes covers a workflow task held up behind a busy worker, and past it a wait
// only falls back to its bound. At 1,000 deletions a minute that is ~5,000 small entries.
const deletionMemory = 5 * time.Minute

// NewCache builds the informers; namespace "" watches every namespace. Deployments keep their
// managedFields slimmed to manager, operation and time (the watcher reads who wrote them),
// ReplicaSets none, and pods only what a snapshot reads (owner, phase, deletion).
func NewCache(client kubernetes.Interface, namespace string) (*Cache, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	c := &Cache{
		factory:  factory,
		dInf:     factory.Apps().V1().Deployments().Informer(),
		rsInf:    factory.Apps().V1().ReplicaSets().Informer(),
		podInf:   factory.Core().V1().Pods().Informer(),
		dLister:  factory.Apps().V1().Deployments().Lister(),
		rsLister: factory.Apps().V1().ReplicaSets().Lister(),
		subs:     map[string]map[chan struct{}]struct{}{},
		deleted:  map[string]deletion{},
		goneUIDs: map[types.UID]time.Time{},
		now:      time.Now,
	}
	if err := c.dInf.SetTransform(slimManagedFields); err != nil {
		return nil, fmt.Errorf("set deployment transform: %w", err)
	}
	if err := c.rsInf.SetTransform(slimManagedFields); err != nil {
		return nil, fmt.Errorf("set replicaset transform: %w", err)
	}
	if err := c.podInf.SetTransform(slimPod); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	if err := c.rsInf.AddIndexers(cache.Indexers{byOwner: func(obj any) ([]string, error) {
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return nil, nil
		}
		if ref := metav1.GetControllerOf(rs); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return []string{"orphan/" + rs.Namespace}, nil
	}}); err != nil {
		return nil, fmt.Errorf("index replicasets by owner: %w", err)
	}
	if err := c.podInf.AddIndexers(cache.Indexers{byOwner: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil {
				return []string{string(ref.UID)}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index pods by owner: %w", err)
	}
	handlers := []struct {
		inf  cache.SharedIndexInformer
		kind string // deletions CaughtUp remembers; "" for none
		fn   func(obj any)
	}{{c.dInf, k8s.KindDeployment, c.notifyDeployment}, {c.rsInf, k8s.KindReplicaSet, c.notifyReplicaSet}, {c.podInf, "", c.notifyPod}}
	for _, h := range handlers {
		kind, fn := h.kind, h.fn
		// Deletions are remembered before the wake-up, so a waiter it wakes finds them.
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: fn,
			UpdateFunc: func(old, obj any) {
				// A relist may deliver an object deleted and created again under its name
				// as one update: the old UID is gone all the same.
				if kind != "" {
					if o, n, ok := metaOf(old, obj); ok && o.GetUID() != n.GetUID() {
						c.sawDeleted(kind, old)
					}
				}
				fn(obj)
			},
			DeleteFunc: func(obj any) {
				if kind != "" {
					c.sawDeleted(kind, obj)
				}
				fn(obj)
			},
		}); err != nil {
			return nil, fmt.Errorf("add notification handler: %w", err)
		}
	}
	return c, nil
}

// Start runs the informers until ctx ends and waits for their first lists.
func (c *Cache) Start(ctx context.Context) error { return c.StartWithin(ctx, 0) }

// StartWithin is Start with the wait for the first lists bounded by timeout (0: unbounded);
// past it, it fails naming the caches still unsynced. The informers run until ctx ends either
// way.
func (c *Cache) StartWithin(ctx context.Context, timeout time.Duration) error {
	c.factory.Start(ctx.Done())
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if !cache.WaitForCacheSync(wctx.Done(), c.dInf.HasSynced, c.rsInf.HasSynced, c.podInf.HasSynced) {
		var unsynced []string
		for name, inf := range map[string]cache.SharedIndexInformer{"deployments": c.dInf, "replicasets": c.rsInf, "pods": c.podInf} {
			if !inf.HasSynced() {
				unsynced = append(unsynced, name)
			}
		}
		sort.Strings(unsynced)
		if ctx.Err() != nil {
			return fmt.Errorf("wait for the informer caches (%s unsynced): %w", strings.Join(unsynced, ", "), ctx.Err())
		}
		return fmt.Errorf("the informer caches' first lists (%s) did not complete within %s (--startup-timeout; can the credentials list and watch them?)", strings.Join(unsynced, ", "), timeout)
	}
	// The first list holds the ReplicaSets as of its resourceVersion, which may be past every
	// listed ReplicaSet's own.
	c.sawReplicaSets(c.rsInf.LastSyncResourceVersion())
	return nil
}

// sawReplicaSets raises rsSeen to rv.
func (c *Cache) sawReplicaSets(rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	for seen := c.rsSeen.Load(); v > seen && !c.rsSeen.CompareAndSwap(seen, v); seen = c.rsSeen.Load() {
	}
}

// Shutdown stops the informers and waits for them. Cancel Start's context first.
func (c *Cache) Shutdown() { c.factory.Shutdown() }

// DeploymentInformer, ReplicaSetInformer and PodInformer let the watcher add its own event
// handlers. Objects from them are the cache's: read only.
func (c *Cache) DeploymentInformer() cache.SharedIndexInformer { return c.dInf }

// ReplicaSetInformer: see DeploymentInformer.
func (c *Cache) ReplicaSetInformer() cache.SharedIndexInformer { return c.rsInf }

// PodInformer: see DeploymentInformer.
func (c *Cache) PodInformer() cache.SharedIndexInformer { return c.podInf }

// Deployment returns the cached Deployment (read only).
func (c *Cache) Deployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.dLister.Deployments(namespace).Get(name)
}

// Deployments lists the cached Deployments of a namespace ("" for all; read only).
func (c *Cache) Deployments(namespace string) ([]*appsv1.Deployment, error) {
	if namespace == "" {
		return c.dLister.List(labels.Everything())
	}
	return c.dLister.Deployments(namespace).List(labels.Everything())
}

// ReplicaSet returns the cached ReplicaSet (read only).
func (c *Cache) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return c.rsLister.ReplicaSets(namespace).Get(name)
}

// Snapshot is what a sync of d sees, from the cache (see k8s.NewSnapshot). The objects are the
// cache's: read only.
func (c *Cache) Snapshot(d *appsv1.Deployment) k8s.Snapshot {
	var rss []*appsv1.ReplicaSet
	for _, key := range []string{string(d.UID), "orphan/" + d.Namespace} {
		objs, _ := c.rsInf.GetIndexer().ByIndex(byOwner, key)
		for _, o := range objs {
			rss = append(rss, o.(*appsv1.ReplicaSet))
		}
	}
	var pods []*corev1.Pod
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, rs := range rss {
			objs, _ := c.podInf.GetIndexer().ByIndex(byOwner, string(rs.UID))
			for _, o := range objs {
				pods = append(pods, o.(*corev1.Pod))
			}
		}
	}
	return k8s.NewSnapshot(d, rss, pods)
}

// CaughtUp reports whether the cache holds every named object at (at least) its version, and
// none of those named gone. An object the cache does not hold is not caught up unless it was
// named gone, or the cache saw it deleted past the version named (below): a Deployment or
// ReplicaSet that was just created (or deleted and created again) may not have reached this
// informer yet, and taking it for deleted would end a workflow.
//
// A deletion seen is as good as a newer version, for a Deployment, and for a ReplicaSet whose
// Deployment the cache saw deleted too (the garbage collector's work). A sync that wrote web
// at resourceVersion 10 and its ReplicaSet web-abc at 12 waits for the cache to hold both; the
// user deletes web (the delete event carries its last version, 10 or later) and the garbage
// collector web-abc (12 or later): both are answered at once, rather than after the caller's
// bound, and so is a web created again since (a new UID, at a version past 10). A deletion at
// 9 does not answer a wait for 10: that object was created again since, and the cache has not
// seen it yet. Nor does a ReplicaSet's deletion while the cache still holds its Deployment:
// the ReplicaSet informer may be ahead of the Deployment informer, and a sync deciding on a
// Deployment that is gone with none of its ReplicaSets would create one for it.
func (c *Cache) CaughtUp(namespace string, want []k8s.ObjectVersion) bool {
	for _, w := range want {
		var (
			rv  string
			err error
		)
		switch w.Kind {
		case k8s.KindDeployment:
			var d *appsv1.Deployment
			if d, err = c.dLister.Deployments(namespace).Get(w.Name); err == nil {
				rv = d.ResourceVersion
			}
		case k8s.KindReplicaSet:
			var rs *appsv1.ReplicaSet
			if rs, err = c.rsLister.ReplicaSets(namespace).Get(w.Name); err == nil {
				rv = rs.ResourceVersion
			}
		default:
			return false
		}
		switch {
		case apierrors.IsNotFound(err) && (w.Gone || c.deletedSince(namespace, w)):
			continue
		case err != nil, w.Gone, !w.SeenBy(rv):
			return false
		}
	}
	return true
}

// deletedSince reports whether the informers saw the object w names deleted, within
// deletionMemory, at or past w's version (which must be named); for a ReplicaSet, with its
// Deployment (see CaughtUp).
func (c *Cache) deletedSince(namespace string, w k8s.ObjectVersion) bool {
	if w.ResourceVersion == "" {
		return false
	}
	now := c.now()
	c.delMu.Lock()
	defer c.delMu.Unlock()
	del, ok := c.deleted[w.Kind+"/"+namespace+"/"+w.Name]
	if !ok || now.Sub(del.at) >= deletionMemory || !w.SeenBy(del.rv) {
		return false
	}
	if w.Kind == k8s.KindReplicaSet {
		at, gone := c.goneUIDs[del.owner]
		return del.owner != "" && gone && now.Sub(at) < deletionMemory
	}
	return true
}

// DeploymentDeleted reports whether the informer saw the Deployment of that UID deleted (or
// replaced under its name by another) within deletionMemory. UIDs are never reused: that
// Deployment is gone for good, whatever else the cache holds or lacks.
func (c *Cache) DeploymentDeleted(uid types.UID) bool {
	if uid == "" {
		return false
	}
	now := c.now()
	c.delMu.Lock()
	defer c.delMu.Unlock()
	at, ok := c.goneUIDs[uid]
	return ok && now.Sub(at) < deletionMemory
}

// sawDeleted remembers a deletion the informer of kind delivered (a DeletedFinalStateUnknown
// after a relist carries the last version the cache held, an older one, which answers less),
// and forgets those older than deletionMemory, at most once per deletionMemory.
func (c *Cache) sawDeleted(kind string, obj any) {
	m, ok := unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	del := deletion{rv: m.GetResourceVersion(), at: c.now()}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil && kind == k8s.KindReplicaSet && ref.Kind == "Deployment" {
		del.owner = ref.UID
	}
	c.delMu.Lock()
	defer c.delMu.Unlock()
	c.deleted[kind+"/"+m.GetNamespace()+"/"+m.GetName()] = del
	if kind == k8s.KindDeployment && m.GetUID() != "" {
		c.goneUIDs[m.GetUID()] = del.at
	}
	if del.at.Sub(c.lastPrune) < deletionMemory {
		return
	}
	for key, d := range c.deleted {
		if del.at.Sub(d.at) >= deletionMemory {
			delete(c.deleted, key)
		}
	}
	for uid, at := range c.goneUIDs {
		if del.at.Sub(at) >= deletionMemory {
			delete(c.goneUIDs, uid)
		}
	}
	c.lastPrune = del.at
}

// metaOf is the object metadata of an update's two objects.
func metaOf(old, obj any) (metav1.Object, metav1.Object, bool) {
	o, ok1 := unwrap(old).(metav1.Object)
	n, ok2 := unwrap(obj).(metav1.Object)
	return o, n, ok1 && ok2
}

// Subscribe returns a channel that receives (without blocking the informer; one pending
// wake-up at most) whenever the Deployment namespace/name, one of its ReplicaSets or pods, or
// an orphan ReplicaSet in its namespace changes. Call the returned func to stop.
func (c *Cache) Subscribe(namespace, name string) (<-chan struct{}, func()) {
	key := namespace + "/" + name
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	if c.subs[key] == nil {
		c.subs[key] = map[chan struct{}]struct{}{}
	}
	c.subs[key][ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs[key], ch)
		if len(c.subs[key]) == 0 {
			delete(c.subs, key)
		}
		c.mu.Unlock()
	}
}

func (c *Cache) notify(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// ReplicaSetsSeen reports whether the ReplicaSet informer has handled an event at
// resourceVersion rv or later (resourceVersions are etcd revisions, compared as numbers; one
// that does not parse is never seen). It is how a writer tells that the cache's ReplicaSets
// are not older than another object written at rv, say a Deployment status decided on
// ReplicaSet counts: the informers of two kinds lag each other independently. It can say no
// while the cache is current (no ReplicaSet changed since rv); callers then defer to a reader
// that knows more.
func (c *Cache) ReplicaSetsSeen(rv string) bool {
	v, err := strconv.ParseUint(rv, 10, 64)
	return err == nil && c.rsSeen.Load() >= v
}

func (c *Cache) subscribed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs) > 0
}

func (c *Cache) notifyDeployment(obj any) {
	if d, ok := unwrap(obj).(*appsv1.Deployment); ok {
		c.notify(d.Namespace + "/" + d.Name)
	}
}

func (c *Cache) notifyReplicaSet(obj any) {
	rs, ok := unwrap(obj).(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	c.sawReplicaSets(rs.ResourceVersion)
	if !c.subscribed() {
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if ref.Kind == "Deployment" {
			c.notify(rs.Namespace + "/" + ref.Name)
		}
		return
	}
	// An orphan: any Deployment of its namespace may adopt it.
	prefix := rs.Namespace + "/"
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, chans := range c.subs {
		if len(key) > len(prefix) && key[:len(prefix)] == prefix {
			for ch := range chans {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (c *Cache) notifyPod(obj any) {
	p, ok := unwrap(obj).(*corev1.Pod)
	if !ok || !c.subscribed() {
		return
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(p.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
		c.notify(p.Namespace + "/" + dref.Name)
	}
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// slimManagedFields keeps who wrote an object last and when (the watcher tells our worker's
// writes from everyone else's by it) but drops the field sets, most of an entry's size.
func slimManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		meta := m.GetObjectMeta()
		entries := meta.GetManagedFields()
		for i := range entries {
			entries[i].FieldsV1 = nil
		}
		meta.SetManagedFields(entries)
	}
	return obj, nil
}

// slimPod keeps what a snapshot and the notifications read of a pod: its identity, owner,
// deletion and phase. At 10,000 pods that is a few MiB, not the hundreds a full pod costs.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}
