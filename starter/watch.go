package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/obs"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/workflows"
)

const (
	watchWorkers = 4
	rsByOwner    = "ownerUID"
)

// watcher turns informer events into signals. A Deployment's key waits in a deduplicating
// queue, so a burst of changes costs one signal, and the pacer spaces a Deployment's signals
// (see pacer), so a rollout's stream of ReplicaSet status changes costs a bounded number of
// syncs (and history events). Existing Deployments get
// signal-with-start, which is idempotent: several watchers cause extra trigger signals at
// most, and the workflow coalesces them into one sync.
type watcher struct {
	cfg      config.Config
	tc       client.Client
	log      *slog.Logger
	queue    workqueue.TypedDelayingInterface[string]
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	rsIndex  cache.Indexer
	podIndex cache.Indexer
	pacer    *pacer
}

func watch(ctx context.Context, cfg config.Config, opts client.Options, logger *slog.Logger) error {
	kube, _, err := k8s.NewClientset(cfg.Kubeconfig, cfg.KubeQPS, cfg.KubeBurst)
	if err != nil {
		return err
	}
	reg := obs.NewRegistry()
	sdkMetrics, closeMetrics := obs.SDKMetrics(reg)
	defer closeMetrics()
	opts.MetricsHandler = sdkMetrics
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()

	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(cfg.WatchNamespace))
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods()
	// ReplicaSets by controller UID, and orphans by namespace ("orphan/<ns>").
	if err := rsInf.Informer().AddIndexers(cache.Indexers{rsByOwner: func(obj any) ([]string, error) {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok {
			if ref := metav1.GetControllerOf(rs); ref != nil {
				return []string{string(ref.UID)}, nil
			}
			return []string{"orphan/" + rs.Namespace}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("index replicasets by owner: %w", err)
	}
	// Pods by controller UID, for the Recreate strategy's running-pod counts.
	if err := podInf.Informer().AddIndexers(cache.Indexers{rsByOwner: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(pod); ref != nil {
				return []string{string(ref.UID)}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("index pods by owner: %w", err)
	}
	w := &watcher{
		cfg: cfg, tc: tc, log: logger,
		queue:    workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "deployments"}),
		dLister:  dInf.Lister(),
		rsLister: rsInf.Lister(),
		rsIndex:  rsInf.Informer().GetIndexer(),
		podIndex: podInf.Informer().GetIndexer(),
		pacer:    newPacer(cfg.Coalesce, cfg.SignalInterval, cfg.MaxSignalInterval, cfg.StatusSignalInterval),
	}
	defer w.queue.ShutDown()

	if _, err := dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.enqueueDeployment(obj) },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			// Our worker's own writes (the revision annotations with a status write, pause,
			// rollback) are followed by a sync of the workflow that made them.
			if specChanged(o, n) && !writtenOnlyBy(o, n, activities.FieldManager) {
				w.enqueueDeployment(newObj)
			}
		},
		DeleteFunc: func(obj any) { w.enqueueDeployment(obj) },
	}); err != nil {
		return fmt.Errorf("watch deployments: %w", err)
	}
	if _, err := rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			// A ReplicaSet our worker created: the workflow that created it knows.
			if rs, ok := obj.(*appsv1.ReplicaSet); ok && writtenOnlyBy(&appsv1.ReplicaSet{}, rs, activities.FieldManager) {
				return
			}
			w.enqueueForReplicaSet(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.ReplicaSet), newObj.(*appsv1.ReplicaSet)
			if !replicaSetChanged(o, n) || writtenOnlyBy(o, n, activities.FieldManager) {
				return
			}
			if statusOnly(o, n) {
				w.enqueueForStatus(n)
				return
			}
			if oc, nc := metav1.GetControllerOf(o), metav1.GetControllerOf(n); !reflect.DeepEqual(oc, nc) && oc != nil {
				w.enqueue(n.Namespace, oc.Name)
			}
			w.enqueueForReplicaSet(n)
		},
		DeleteFunc: func(obj any) { w.enqueueForReplicaSet(obj) },
	}); err != nil {
		return fmt.Errorf("watch replicasets: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { w.enqueueForPod(obj) },
	}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced) {
		return fmt.Errorf("wait for watcher caches: %w", ctx.Err())
	}

	stopServer, err := obs.Server{Addr: cfg.MetricsAddress, Reg: reg, Logger: logger, Ready: obs.TemporalReady(ctx, tc)}.Start(ctx)
	if err != nil {
		return err
	}
	defer stopServer()

	logger.Info("Watcher running", "watchNamespace", cfg.WatchNamespace, "coalesce", cfg.Coalesce, "minSignalInterval", cfg.SignalInterval, "maxSignalInterval", cfg.MaxSignalInterval, "statusSignalInterval", cfg.StatusSignalInterval)
	var wg sync.WaitGroup
	for range watchWorkers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	logger.Info("Watcher stopped")
	return nil
}

// replicaSetChanged reports whether an update touches anything a sync reads: spec, labels,
// annotations, owners, deletion, and the status counts and conditions. Updates that only move
// status.observedGeneration or fullyLabeledReplicas are skipped, each would cost the workflow a
// sync that changes nothing, except that observedGeneration still counts for a ReplicaSet at
// 0 replicas, which it gates the cleanup of.
func replicaSetChanged(o, n *appsv1.ReplicaSet) bool {
	if o.ResourceVersion == n.ResourceVersion {
		return false
	}
	if !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		!reflect.DeepEqual(o.Labels, n.Labels) ||
		!reflect.DeepEqual(o.Annotations, n.Annotations) ||
		!reflect.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
		!reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) {
		return true
	}
	os, ns := o.Status, n.Status
	if os.Replicas != ns.Replicas || os.ReadyReplicas != ns.ReadyReplicas || os.AvailableReplicas != ns.AvailableReplicas ||
		!reflect.DeepEqual(os.TerminatingReplicas, ns.TerminatingReplicas) || !equality.Semantic.DeepEqual(os.Conditions, ns.Conditions) {
		return true
	}
	return os.ObservedGeneration != ns.ObservedGeneration && n.Spec.Replicas != nil && *n.Spec.Replicas == 0
}

// statusOnly reports whether an update changed nothing but the ReplicaSet's status.
func statusOnly(o, n *appsv1.ReplicaSet) bool {
	return equality.Semantic.DeepEqual(o.Spec, n.Spec) &&
		reflect.DeepEqual(o.Labels, n.Labels) &&
		reflect.DeepEqual(o.Annotations, n.Annotations) &&
		reflect.DeepEqual(o.OwnerReferences, n.OwnerReferences) &&
		reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp)
}

// writtenOnlyBy reports whether the update came from manager alone (our worker scaling or
// annotating a ReplicaSet): the workflow that wrote it already knows, and a signal would only
// cost it a sync that changes nothing. It compares the managedFields entries.
func writtenOnlyBy(o, n metav1.Object, manager string) bool {
	before := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range o.GetManagedFields() {
		before[e.Manager+"|"+string(e.Operation)+"|"+e.Subresource] = e
	}
	writers := 0
	for _, e := range n.GetManagedFields() {
		b, ok := before[e.Manager+"|"+string(e.Operation)+"|"+e.Subresource]
		if ok && equality.Semantic.DeepEqual(b, e) {
			continue
		}
		if e.Manager != manager {
			return false
		}
		writers++
	}
	return writers > 0
}

// specChanged ignores status-only updates: only this controller writes Deployment status, and
// its own writes need no new sync.
func specChanged(o, n *appsv1.Deployment) bool {
	return o.Generation != n.Generation ||
		!reflect.DeepEqual(o.Annotations, n.Annotations) ||
		!reflect.DeepEqual(o.Labels, n.Labels) ||
		!reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) ||
		o.UID != n.UID
}

func (w *watcher) enqueue(namespace, name string) {
	key := namespace + "/" + name
	w.queue.AddAfter(key, w.pacer.delay(key, time.Now()))
}

// enqueueForStatus schedules the signal for a status change of a Deployment's ReplicaSet by
// how urgent a sync would be (see classify).
func (w *watcher) enqueueForStatus(rs *appsv1.ReplicaSet) {
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != "Deployment" {
		w.enqueueForReplicaSet(rs)
		return
	}
	d, err := w.dLister.Deployments(rs.Namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		w.enqueue(rs.Namespace, ref.Name)
		return
	}
	w.enqueueByUrgency(d, "ReplicaSet status changed", "replicaSet", rs.Name)
}

// enqueueByUrgency schedules d's signal by how urgent a sync would be (see classify).
func (w *watcher) enqueueByUrgency(d *appsv1.Deployment, msg string, kv ...any) {
	now := time.Now()
	key := d.Namespace + "/" + d.Name
	u := classify(w.snapshot(d), now)
	w.log.Debug(msg, append([]any{"namespace", d.Namespace, "deployment", d.Name, "urgency", u}, kv...)...)
	switch u {
	case urgencyNone:
	case urgencyStatus:
		w.queue.AddAfter(key, w.pacer.statusDelay(key, now))
	case urgencyNow:
		w.queue.AddAfter(key, w.pacer.coalesce)
	default:
		w.queue.AddAfter(key, w.pacer.delay(key, now))
	}
}

// snapshot is what a sync of d would see, from the watcher's caches: the Deployment, its
// ReplicaSets and, for Recreate, the running pods of each (as the worker's Observe counts them).
func (w *watcher) snapshot(d *appsv1.Deployment) k8s.Snapshot {
	s := k8s.Snapshot{Deployment: d, ReplicaSets: w.replicaSetsFor(d)}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return s
	}
	for _, rs := range s.ReplicaSets {
		pods, _ := w.podIndex.ByIndex(rsByOwner, string(rs.UID))
		var n int32
		for _, o := range pods {
			if p := o.(*corev1.Pod); p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				n++
			}
		}
		if n > 0 {
			s.Pods = append(s.Pods, k8s.PodCount{ReplicaSetUID: rs.UID, Running: n})
		}
	}
	sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].ReplicaSetUID < s.Pods[j].ReplicaSetUID })
	return s
}

func (w *watcher) enqueueDeployment(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		w.enqueue(d.Namespace, d.Name)
	}
}

func (w *watcher) enqueueForReplicaSet(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if ref.Kind == "Deployment" {
			w.enqueue(rs.Namespace, ref.Name)
		}
		return
	}
	// An orphan: every Deployment whose selector matches may adopt it.
	if len(rs.Labels) == 0 {
		return
	}
	ds, err := w.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		w.enqueue(d.Namespace, d.Name)
	}
}

// enqueueForPod wakes a Recreate Deployment when one of its old pods is gone, as upstream.
func (w *watcher) enqueueForPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := w.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	dref := metav1.GetControllerOf(rs)
	if dref == nil || dref.Kind != "Deployment" {
		return
	}
	d, err := w.dLister.Deployments(rs.Namespace).Get(dref.Name)
	if err != nil || d.UID != dref.UID || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return
	}
	w.enqueueByUrgency(d, "Pod deleted", "pod", pod.Name)
}

func (w *watcher) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	// Recorded before the signal goes, so a change that comes in while it is on its way is
	// paced from it.
	w.pacer.signalled(key, time.Now())
	if err := w.signal(ctx, key); err != nil {
		w.log.Warn("Signal failed, retrying", "key", key, "error", err)
		w.queue.AddAfter(key, time.Second)
	}
	return true
}

// signal sends the trigger: signal-with-start while the Deployment exists, a plain signal (so
// the workflow can end) once it is gone.
func (w *watcher) signal(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	in := workflows.Input{Namespace: ns, Name: name}
	id := workflows.WorkflowID(ns, name)
	d, err := w.dLister.Deployments(ns).Get(name)
	if err != nil {
		err := w.tc.SignalWorkflow(ctx, id, "", workflows.SignalTrigger, nil)
		if _, ok := err.(*serviceerror.NotFound); ok {
			return nil
		}
		return err
	}
	_, err = w.tc.SignalWithStartWorkflow(ctx, id, workflows.SignalTrigger, w.trigger(d), startOptions(w.cfg, in), workflows.WorkflowType, in)
	return err
}

// trigger carries the versions this watcher has seen of the Deployment and its ReplicaSets,
// so the sync waits for the worker's cache to have them too.
func (w *watcher) trigger(d *appsv1.Deployment) workflows.Trigger {
	t := workflows.Trigger{Versions: []k8s.ObjectVersion{{Kind: "Deployment", Name: d.Name, ResourceVersion: d.ResourceVersion}}}
	for _, rs := range w.replicaSetsFor(d) {
		t.Versions = append(t.Versions, k8s.ObjectVersion{Kind: "ReplicaSet", Name: rs.Name, ResourceVersion: rs.ResourceVersion})
	}
	return t
}

// replicaSetsFor lists what a sync of d looks at, from the watcher's cache: the ReplicaSets it
// owns and the orphans its selector matches. They are the cache's objects: read only.
func (w *watcher) replicaSetsFor(d *appsv1.Deployment) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	owned, _ := w.rsIndex.ByIndex(rsByOwner, string(d.UID))
	for _, o := range owned {
		out = append(out, o.(*appsv1.ReplicaSet))
	}
	orphans, _ := w.rsIndex.ByIndex(rsByOwner, "orphan/"+d.Namespace)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	for _, o := range orphans {
		rs := o.(*appsv1.ReplicaSet)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
			out = append(out, rs)
		}
	}
	return out
}
