package activities

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

const podsByOwnerIndex = "ownerUID"

// Cache is the worker's informer cache of ReplicaSets and (trimmed) pods. Deployments are read
// live, so every sync starts from the latest spec and status.
type Cache struct {
	factory    informers.SharedInformerFactory
	rsLister   appslisters.ReplicaSetLister
	rsSynced   cache.InformerSynced
	podIndexer cache.Indexer
	podSynced  cache.InformerSynced
}

// NewCache builds the informers; namespace "" watches every namespace.
func NewCache(client kubernetes.Interface, namespace string) (*Cache, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	rsInf := factory.Apps().V1().ReplicaSets().Informer()
	if err := rsInf.SetTransform(stripManagedFields); err != nil {
		return nil, fmt.Errorf("set replicaset transform: %w", err)
	}
	podInf := factory.Core().V1().Pods().Informer()
	if err := podInf.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	if err := podInf.AddIndexers(cache.Indexers{podsByOwnerIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		if ref := metav1.GetControllerOf(pod); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("add pod owner index: %w", err)
	}
	return &Cache{
		factory:    factory,
		rsLister:   factory.Apps().V1().ReplicaSets().Lister(),
		rsSynced:   rsInf.HasSynced,
		podIndexer: podInf.GetIndexer(),
		podSynced:  podInf.HasSynced,
	}, nil
}

// Start runs the informers until ctx ends and waits for the first list.
func (c *Cache) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.rsSynced, c.podSynced) {
		return fmt.Errorf("wait for replicaset and pod caches: %w", ctx.Err())
	}
	return nil
}

// Shutdown stops the informers.
func (c *Cache) Shutdown() { c.factory.Shutdown() }

// ReplicaSets lists the namespace's ReplicaSets from the cache.
func (c *Cache) ReplicaSets(namespace string) ([]*appsv1.ReplicaSet, error) {
	return c.rsLister.ReplicaSets(namespace).List(everything)
}

// ReplicaSet returns one cached ReplicaSet.
func (c *Cache) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return c.rsLister.ReplicaSets(namespace).Get(name)
}

// RunningPods counts the pods owned by the ReplicaSet that are neither Succeeded nor Failed.
func (c *Cache) RunningPods(rsUID string) (int32, error) {
	objs, err := c.podIndexer.ByIndex(podsByOwnerIndex, rsUID)
	if err != nil {
		return 0, err
	}
	var n int32
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// trimPod keeps what the controller reads of a pod: identity, owner and phase.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			OwnerReferences: pod.OwnerReferences, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}

// waitFor polls cond every 20ms until it holds or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sortReplicaSets(rss []*appsv1.ReplicaSet) {
	sort.Slice(rss, func(i, j int) bool { return rss[i].Name < rss[j].Name })
}
