package activities

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// Cache is the worker's informer cache of ReplicaSets. Observe uses it only to find owned
// ReplicaSets whose labels no longer match (to release them); everything a decision rests on
// is read live.
type Cache struct {
	factory  informers.SharedInformerFactory
	rsLister appslisters.ReplicaSetLister
	rsSynced cache.InformerSynced
}

// NewCache builds the informers; namespace "" watches every namespace.
func NewCache(client kubernetes.Interface, namespace string) (*Cache, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	rsInf := factory.Apps().V1().ReplicaSets().Informer()
	if err := rsInf.SetTransform(stripManagedFields); err != nil {
		return nil, fmt.Errorf("set replicaset transform: %w", err)
	}
	return &Cache{
		factory:  factory,
		rsLister: factory.Apps().V1().ReplicaSets().Lister(),
		rsSynced: rsInf.HasSynced,
	}, nil
}

// Start runs the informers until ctx ends and waits for the first list.
func (c *Cache) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.rsSynced) {
		return fmt.Errorf("wait for replicaset cache: %w", ctx.Err())
	}
	return nil
}

// Shutdown stops the informers.
func (c *Cache) Shutdown() { c.factory.Shutdown() }

// ReplicaSets lists the namespace's ReplicaSets from the cache.
func (c *Cache) ReplicaSets(namespace string) ([]*appsv1.ReplicaSet, error) {
	return c.rsLister.ReplicaSets(namespace).List(everything)
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
