package activities

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/temporal-rollout/rollout/k8s"
)

// Cache is the worker's informer cache of Deployments and ReplicaSets, the way the upstream
// controller reads them: a sync costs no API reads. Observe only uses it once it holds at
// least the versions the sync must see (the watcher's and our own last writes).
type Cache struct {
	factory  informers.SharedInformerFactory
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	synced   []cache.InformerSynced
}

// NewCache builds the informers; namespace "" watches every namespace.
func NewCache(client kubernetes.Interface, namespace string) (*Cache, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	dInf := factory.Apps().V1().Deployments().Informer()
	rsInf := factory.Apps().V1().ReplicaSets().Informer()
	for _, inf := range []cache.SharedIndexInformer{dInf, rsInf} {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return nil, fmt.Errorf("set transform: %w", err)
		}
	}
	return &Cache{
		factory:  factory,
		dLister:  factory.Apps().V1().Deployments().Lister(),
		rsLister: factory.Apps().V1().ReplicaSets().Lister(),
		synced:   []cache.InformerSynced{dInf.HasSynced, rsInf.HasSynced},
	}, nil
}

// Start runs the informers until ctx ends and waits for the first list.
func (c *Cache) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("wait for deployment and replicaset caches: %w", ctx.Err())
	}
	return nil
}

// Shutdown stops the informers.
func (c *Cache) Shutdown() { c.factory.Shutdown() }

// ReplicaSets lists the namespace's ReplicaSets from the cache.
func (c *Cache) ReplicaSets(namespace string) ([]*appsv1.ReplicaSet, error) {
	return c.rsLister.ReplicaSets(namespace).List(everything)
}

// Deployment returns the cached Deployment.
func (c *Cache) Deployment(namespace, name string) (*appsv1.Deployment, error) {
	return c.dLister.Deployments(namespace).Get(name)
}

// CaughtUp reports whether the cache holds every object at (at least) the given version, and
// none of those expected gone. resourceVersions are etcd revisions, compared as numbers; one
// that does not parse never counts as caught up, so the caller reads live.
func (c *Cache) CaughtUp(namespace string, want []k8s.ObjectVersion) bool {
	for _, w := range want {
		var (
			rv  string
			err error
		)
		switch w.Kind {
		case "Deployment":
			var d *appsv1.Deployment
			if d, err = c.dLister.Deployments(namespace).Get(w.Name); err == nil {
				rv = d.ResourceVersion
			}
		case "ReplicaSet":
			var rs *appsv1.ReplicaSet
			if rs, err = c.rsLister.ReplicaSets(namespace).Get(w.Name); err == nil {
				rv = rs.ResourceVersion
			}
		default:
			return false
		}
		switch {
		case apierrors.IsNotFound(err):
			// Gone, which is newer than any version it had.
			continue
		case err != nil, w.Gone, !atLeast(rv, w.ResourceVersion):
			return false
		}
	}
	return true
}

func atLeast(have, want string) bool {
	if want == "" {
		return true
	}
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}

func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

func sortReplicaSets(rss []*appsv1.ReplicaSet) {
	sort.Slice(rss, func(i, j int) bool { return rss[i].Name < rss[j].Name })
}
