// Package watcher turns Kubernetes changes into Temporal signals: it starts the workflow of
// every Deployment (signal-with-start, idempotent) and wakes it when something changes that
// the workflow cannot see by itself.
//
// Who reacts to what:
//   - A rollout under way (the Deployment's status shows it progressing, not paused, not past
//     its deadline) is watched by the worker itself: its AwaitChange activity weighs every
//     ReplicaSet and pod change on the worker's informer cache, within milliseconds, and
//     refreshes status counts without a signal. The watcher leaves those changes alone.
//   - Everything else is the watcher's: Deployments created, deleted, or given a new
//     generation (by anyone but our worker); and, for Deployments at rest (complete, paused,
//     past their deadline), changes to their labels and annotations and to their ReplicaSets
//     (a pod of a complete Deployment dies; an orphan appears), which it signals only when
//     k8s.Decide, run on the same snapshot rule the worker uses, would write something.
//   - A periodic resync (and one at start) reconciles open workflows with the cluster: a
//     workflow whose Deployment is gone is signalled so it ends, a Deployment without a
//     workflow gets one, a Deployment at rest that Decide would change is signalled, and so
//     is a generation no sync has observed that this watcher did not see change (the first
//     resync) or that the previous resync found unobserved already. A watcher that was down
//     catches up on everything it missed.
//
// Several watchers may run at once: signal-with-start is idempotent, and a duplicate trigger
// costs one extra sync at most.
package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// Options configure a Watcher.
type Options struct {
	// TaskQueue the workflows run on.
	TaskQueue string
	// Cluster is this watcher's Kubernetes cluster (--cluster): the workflows it starts and
	// signals are that cluster's (contract.WorkflowIDIn); empty for a single cluster.
	Cluster string
	// SearchAttributes sets K8sNamespace/K8sDeployment on start (they must be registered).
	SearchAttributes bool
	// Resync is how often open workflows are reconciled with the cluster; 0 only at start.
	Resync time.Duration
	// Workers send signals (and write the status refreshes of Deployments at rest) in
	// parallel; 0 means DefaultWorkers.
	Workers int
	// Managed: managed mode (--mode managed), beside kube-controller-manager's Deployment
	// controller. Only Deployments that opted in (temporal-rollout.io/managed: "true") or are
	// still parked get a workflow or a signal; an opt-in or opt-out is always signalled.
	Managed bool
	// ManagedGuard: --managed-guard (see k8s.Request.ManagedGuard).
	ManagedGuard bool
	// Status, when set, writes the status-count refreshes of Deployments at rest at once
	// (k8s.NeedStatus at rest) instead of signalling a sync for them.
	Status StatusWriter
	// EagerStart: the watcher runs in the worker's process (worker --watch), so a Deployment
	// no controller has synced yet (status.observedGeneration 0) gets its workflow by a plain
	// start with eager execution: the Temporal server hands the first workflow task back in
	// the start's response, to this process's worker, instead of through matching and a
	// poll. The trigger travels in the input (contract.Input.Trigger). A workflow that
	// already runs gets the trigger by signal-with-start, as without the option.
	EagerStart bool
	// Pacer, when set, paces the trigger signals while the worker's client budget is
	// saturated (activities.Admission, in the worker's process): a signal becomes a sync that
	// writes, and a burst of them (an image update to 100 Deployments at QPS 20) queued in the
	// task queue ahead of users' commands for seconds.
	Pacer Pacer
}

// Pacer says how long a sync-causing signal should wait before it is sent (0: now).
type Pacer interface {
	Wait(now time.Time) time.Duration
}

// maxPace bounds how long one signal waits for the Pacer.
const maxPace = 30 * time.Second

// StatusWriter writes a Deployment's status; *activities.Activities is one.
type StatusWriter interface {
	UpdateDeploymentStatus(context.Context, activities.DeploymentWriteInput) (activities.DeploymentWriteResult, error)
}

// DefaultWorkers is how many signals are in flight at once. 32 was tried against 4 on
// rolling-100x10 at QPS 200 (two runs each, back to back): on a saturated 2-core machine the
// image update reached the workflows no sooner (first stale interval median 1.6s and 2.0s
// against 1.2s and 0.8s), as the signals' cost is the Temporal server's CPU, not their wait.
// 16 was tried for the creation of 20 Deployments, where each needs a signal-with-start: the
// bench's react time (create to the first ReplicaSet write) had medians of 762ms and 461ms
// (rolling-20x10, recreate-20x10) against 323ms to 800ms in three runs with 4. Every start
// waits on the same Temporal server.
const DefaultWorkers = 4

// startWorkers start the workflows of new Deployments in parallel (with EagerStart): each start
// is a round trip to the Temporal server whose first workflow task comes back with it, and
// they are paced on the client budget like the signals. Creating 1000 Deployments at once at
// QPS 200, with the starts among the 4 signal workers: the starts reached 18.3 s (median) and
// 37.1 s (max) after the creates, while the budget had tokens to spare; with 32 of their own,
// 8.4 s and 22.0 s, the rest waiting for the budget.
const startWorkers = 32

// templateWorkers write the status refreshes of new pod templates in parallel: each is one
// small write that waits little for the client budget, and a template change to every
// Deployment of an app at once is common.
const templateWorkers = 32

// templateBudgetWait is how long a template refresh may wait for the client budget: less than
// the sync it anticipates takes to write its own status (a workflow task and two writes: at
// QPS 20 with 20 Deployments changed at once, 1.5-2.5 s), or it only takes a token from it.
// Sent at once, 13 of 20 such refreshes got a token before the syncs took the burst.
const templateBudgetWait = time.Second

// statusKey prefixes the queue keys of status refreshes.
const statusKey = "status:"

// Watcher signals Deployment workflows; see the package doc.
type Watcher struct {
	opts  Options
	cache *kube.Cache
	tc    client.Client
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string]
	// templates: Deployments whose new pod template calls for a status refresh before their
	// sync (see refreshTemplate), a queue of its own so that the writes never wait behind
	// the signals, nor the signals behind them.
	templates workqueue.TypedInterface[string]
	// starts: new Deployments whose workflow starts eagerly, with workers of their own
	// (startWorkers); a start that fails is retried on queue.
	starts workqueue.TypedInterface[string]
	// written: by namespace/name, the Deployment version of the watcher's last status
	// refresh, until its cache shows it (see trigger).
	written sync.Map
	// unobserved: by namespace/name, the generations the last resync found no sync had
	// observed; nil until a resync completes (see Reconcile).
	mu         sync.Mutex
	unobserved map[string]generation
	// unsettled: the held Deployments (Progressing CanaryPaused) the last resync found not at
	// rest (k8s.HeldAtRest); see Reconcile.
	unsettled map[string]generation
}

// generation is a Deployment's spec version: the generation of one UID (a Deployment created
// again under the same name starts over at 1).
type generation struct {
	uid types.UID
	gen int64
}

// unobservedGeneration is d's generation, and whether no sync may have acted on it yet: its
// status has not observed it. A parked Deployment's (managed mode) status is no witness:
// kube-controller-manager's own Deployment controller writes observedGeneration for it at once
// (its paused sync), so a spec change made there while no watcher ran looks observed. For it,
// a rollout under way by its user's terms (WorkerCovers) counts: its workflow may be at rest,
// waiting for a signal nobody sent.
func unobservedGeneration(d *appsv1.Deployment) (generation, bool) {
	g := generation{uid: d.UID, gen: d.Generation}
	if _, parked, err := k8s.Parked(d); parked && err == nil {
		return g, WorkerCovers(d)
	}
	return g, d.Status.ObservedGeneration < d.Generation
}

// New registers the watcher's handlers on the cache's informers. Call it before the cache
// starts, then Run.
func New(c *kube.Cache, tc client.Client, opts Options, logger *slog.Logger) (*Watcher, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	w := &Watcher{
		opts: opts, cache: c, tc: tc, log: logger,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployments"}),
		templates: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "templates"}),
		starts:    workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "starts"}),
	}
	if _, err := c.DeploymentInformer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			// The first resync weighs the initial list (most have a workflow already).
			if d, ok := obj.(*appsv1.Deployment); ok && !initial && w.involved(d) {
				if w.startsEagerly(d) {
					w.starts.Add(d.Namespace + "/" + d.Name)
					return
				}
				w.enqueue(d.Namespace, d.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			if w.opts.Managed && (k8s.WantsManaged(o) != k8s.WantsManaged(n) || k8s.ManagedInvolved(o) != k8s.ManagedInvolved(n)) {
				// Opted in or out: the workflow parks it or hands it back.
				w.log.Debug("Deployment opted in or out", "namespace", n.Namespace, "deployment", n.Name, "managed", k8s.WantsManaged(n))
				w.enqueue(n.Namespace, n.Name)
				return
			}
			if !w.involved(n) {
				return
			}
			switch {
			case specChanged(o, n) && !writtenOnlyBy(o, n, kube.FieldManager):
				// A new generation (or UID, or deletion): always the workflow's to see.
				w.log.Debug("Deployment changed", "namespace", n.Namespace, "deployment", n.Name, "generation", n.Generation)
				w.enqueue(n.Namespace, n.Name)
				if w.opts.Status != nil && !w.opts.Managed &&
					!equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template) {
					w.templates.Add(n.Namespace + "/" + n.Name)
				}
			case w.involved(o) && w.heldAtRest(o) && !writtenOnlyBy(o, n, kube.FieldManager):
				// Held at rest, its workflow waiting with no activity (activities.AwaitRest):
				// an edit of its annotations or labels (steps changed, say) is its to weigh.
				w.log.Debug("Held rollout's Deployment changed at rest", "namespace", n.Namespace, "deployment", n.Name)
				w.enqueue(n.Namespace, n.Name)
			case WorkerCovers(o) && !WorkerCovers(n):
				// The rollout ended (or paused): changes the worker's wait skipped until now
				// are the watcher's again.
				w.enqueueIfDecided(n, "rollout ended")
			case metaChanged(o, n):
				// Labels or annotations (a deprecated rollback request, annotations to copy).
				w.weigh(n, "Deployment metadata changed")
			case !equality.Semantic.DeepEqual(o.Status, n.Status):
				// A status written at rest: two writers (a sync of the worker and a refresh
				// here) may race, and the one decided on older ReplicaSet counts may land
				// last. Weighing it again on the cache rewrites counts the ReplicaSets no
				// longer show; a current status weighs to nothing.
				w.weigh(n, "Deployment status written")
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if d, ok := obj.(*appsv1.Deployment); ok && w.involved(d) {
				w.enqueue(d.Namespace, d.Name)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch deployments: %w", err)
	}
	if _, err := c.ReplicaSetInformer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if rs, ok := obj.(*appsv1.ReplicaSet); ok && !initial {
				w.weighReplicaSet(rs, nil)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.ReplicaSet), newObj.(*appsv1.ReplicaSet)
			if replicaSetChanged(o, n) {
				w.weighReplicaSet(n, o)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if rs, ok := obj.(*appsv1.ReplicaSet); ok {
				w.weighReplicaSet(rs, nil)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch replicasets: %w", err)
	}
	return w, nil
}

// Run sends signals until ctx ends. The cache must be started and synced.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	if w.opts.EagerStart {
		for range startWorkers {
			wg.Go(func() {
				for w.processStart(ctx) {
				}
			})
		}
	}
	if w.opts.Status != nil {
		for range templateWorkers {
			wg.Go(func() {
				for w.processTemplate(ctx) {
				}
			})
		}
	}
	wg.Go(func() { w.resyncLoop(ctx) })
	<-ctx.Done()
	w.queue.ShutDown()
	w.templates.ShutDown()
	w.starts.ShutDown()
	wg.Wait()
}

// WorkerCovers reports whether the Deployment's last written status shows a rollout under way,
// which the worker's AwaitChange watches: not complete, not paused, and not past its progress
// deadline. A spec change not yet observed counts (it is incomplete by `kubectl rollout status`
// rules): a running watcher signalled the change itself, and the sync it wakes goes on to wait
// in the worker. One made while no watcher ran was signalled by no one: Reconcile signals those
// (see there), not the event handlers, which would signal again on every ReplicaSet change
// until the sync writes its status.
//
// A parked Deployment (managed mode) is weighed as its user wrote it (k8s.Effective).
func WorkerCovers(d *appsv1.Deployment) bool {
	d = k8s.Effective(d)
	if d.Spec.Paused || k8s.DeploymentComplete(d, &d.Status) {
		return false
	}
	c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
	return c == nil || c.Reason != k8s.TimedOutReason
}

func (w *Watcher) enqueue(namespace, name string) { w.queue.Add(namespace + "/" + name) }

// involved reports whether the Deployment is ours to signal: every one in full mode; in
// managed mode one that opted in or is still parked.
func (w *Watcher) involved(d *appsv1.Deployment) bool {
	return !w.opts.Managed || k8s.ManagedInvolved(d)
}

// request is what the watcher weighs a Deployment with: the worker's chained sync, in the
// watcher's mode.
func (w *Watcher) request() k8s.Request {
	return k8s.Request{Managed: w.opts.Managed, ManagedGuard: w.opts.Managed && w.opts.ManagedGuard}
}

// enqueueIfDecided queues d when a sync would write something, by k8s.Decide on the cache's
// snapshot (the same rule the worker observes with) and k8s.SyncNeed (the same question the
// worker's wait asks): a status refresh (when a StatusWriter is set) as such, anything else as
// a signal. It reports whether it queued.
func (w *Watcher) enqueueIfDecided(d *appsv1.Deployment, why string) bool {
	plan, need := w.need(d)
	if need == k8s.NeedStatus && w.opts.Status != nil {
		w.queue.Add(statusKey + d.Namespace + "/" + d.Name)
		return true
	}
	if need != k8s.NeedNothing {
		w.log.Debug("Deployment needs a sync", "namespace", d.Namespace, "deployment", d.Name, "why", why, "steps", len(plan.Steps))
		w.enqueue(d.Namespace, d.Name)
		return true
	}
	return false
}

// need weighs d at rest on the cache: Decide's plan, and what it asks (k8s.SyncNeed). A plan
// that fails asks for a sync, which reports the error.
func (w *Watcher) need(d *appsv1.Deployment) (k8s.Plan, k8s.Need) {
	plan, err := k8s.Decide(w.cache.Snapshot(d), w.request(), time.Now())
	if err != nil {
		return plan, k8s.NeedSync
	}
	return plan, k8s.SyncNeed(plan, d, w.request(), k8s.AtRest)
}

// weigh leaves a Deployment whose rollout is under way to the worker's wait, and queues one
// at rest when a sync would write (see enqueueIfDecided). It reports whether it queued.
func (w *Watcher) weigh(d *appsv1.Deployment, why string) bool {
	return w.involved(d) && !WorkerCovers(d) && w.enqueueIfDecided(d, why)
}

// weighReplicaSet weighs a ReplicaSet change for the Deployment that controls it (and, when
// the controller changed, the one that did), or for an orphan every Deployment whose selector
// matches it. Which writer made the change does not matter: a change that calls for nothing
// (our own scaling, say) costs no signal.
func (w *Watcher) weighReplicaSet(rs, old *appsv1.ReplicaSet) {
	if w.log.Enabled(context.Background(), slog.LevelDebug) {
		// Every ReplicaSet update of the cluster passes here: build the record only when it is logged.
		w.log.Debug("ReplicaSet changed", "namespace", rs.Namespace, "replicaSet", rs.Name, "resourceVersion", rs.ResourceVersion,
			"replicas", rs.Status.Replicas, "available", rs.Status.AvailableReplicas, "terminating", deref(rs.Status.TerminatingReplicas))
	}
	owners := []*metav1.OwnerReference{metav1.GetControllerOf(rs)}
	if old != nil {
		if oc := metav1.GetControllerOf(old); !reflect.DeepEqual(oc, owners[0]) {
			owners = append(owners, oc)
		}
	}
	for _, ref := range owners {
		if ref == nil {
			continue
		}
		if ref.Kind != "Deployment" {
			continue
		}
		if d, err := w.cache.Deployment(rs.Namespace, ref.Name); err == nil && d.UID == ref.UID {
			if w.restedBefore(d, rs, old) {
				continue
			}
			w.weigh(d, "ReplicaSet "+rs.Name+" changed")
		}
	}
	if owners[0] != nil || len(rs.Labels) == 0 {
		return
	}
	ds, err := w.cache.Deployments(rs.Namespace)
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) && !w.restedBefore(d, rs, old) {
			w.weigh(d, "orphan ReplicaSet "+rs.Name+" changed")
		}
	}
}

// restedBefore signals d, and reports true, when its rollout was held at rest
// (k8s.HeldAtRest) before rs changed from old (nil: rs was added or deleted): its workflow
// waits with no activity (activities.AwaitRest), and this change is what would move it (a pod
// that died, a ReplicaSet scaled or deleted by someone else).
func (w *Watcher) restedBefore(d *appsv1.Deployment, rs, old *appsv1.ReplicaSet) bool {
	if !w.involved(d) || !heldCondition(d) {
		return false
	}

	if old != nil && writtenOnlyBy(old, rs, kube.FieldManager) {
		// Our own write (the workflow leaving its hold scales before it writes the status
		// that says so): the workflow that made it knows.
		return false
	}
	var before []*appsv1.ReplicaSet
	for _, x := range w.cache.Snapshot(d).ReplicaSets {
		if x.UID != rs.UID {
			before = append(before, x)
		}
	}
	if old != nil {
		before = append(before, old)
	}
	if !k8s.HeldAtRest(d, before) {
		return false
	}
	w.log.Debug("Held rollout moved at rest, signalling", "namespace", d.Namespace, "deployment", d.Name, "replicaSet", rs.Name)
	w.enqueue(d.Namespace, d.Name)
	return true
}

// heldAtRest reports whether d's rollout is held at rest on the cache (k8s.HeldAtRest).
func (w *Watcher) heldAtRest(d *appsv1.Deployment) bool {
	return heldCondition(d) && k8s.HeldAtRest(d, w.cache.Snapshot(d).ReplicaSets)
}

// heldCondition: d's last status says its rollout is held at a step (Progressing
// CanaryPaused).
func heldCondition(d *appsv1.Deployment) bool {
	c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
	return c != nil && c.Reason == k8s.CanaryPausedReason
}

func (w *Watcher) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if k, ok := strings.CutPrefix(key, statusKey); ok {
		w.refreshStatus(ctx, k)
		w.queue.Forget(key)
		return true
	}
	if w.send(ctx, key) {
		w.queue.Forget(key)
	}
	return true
}

// processStart starts a new Deployment's workflow (see startsEagerly), from the starts queue.
func (w *Watcher) processStart(ctx context.Context) bool {
	return processOne(ctx, w.starts, func(ctx context.Context, key string) { w.send(ctx, key) })
}

// processOne handles one key of q; false once q shuts down.
func processOne(ctx context.Context, q workqueue.TypedInterface[string], handle func(context.Context, string)) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	handle(ctx, key)
	return true
}

// send paces and sends key's signal (or start); one that fails goes on queue, to be retried
// with backoff. It reports whether it went.
func (w *Watcher) send(ctx context.Context, key string) bool {
	w.pace(ctx)
	if err := w.signal(ctx, key); err != nil {
		w.log.Warn("Signal failed, retrying", "key", key, "error", err)
		w.queue.AddRateLimited(key)
		return false
	}
	return true
}

// startsEagerly reports whether d's workflow starts eagerly (EagerStart, and no controller has
// synced it yet): the worker in this process takes its first workflow task with the start.
func (w *Watcher) startsEagerly(d *appsv1.Deployment) bool {
	return w.opts.EagerStart && d.Status.ObservedGeneration == 0
}

// pace waits until the Pacer lets a signal go (at most maxPace).
func (w *Watcher) pace(ctx context.Context) {
	if w.opts.Pacer == nil {
		return
	}
	for start := time.Now(); time.Since(start) < maxPace; {
		d := w.opts.Pacer.Wait(time.Now())
		if d <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// refreshStatus writes a Deployment at rest's status counts, weighed again on the cache as it is
// now (as upstream rewrites them on every ReplicaSet status change, within milliseconds), with
// the Deployment's resourceVersion as precondition. Anything more than that, or a failed write,
// becomes a signal: the workflow syncs and records it.
func (w *Watcher) refreshStatus(ctx context.Context, key string) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	d, err := w.cache.Deployment(ns, name)
	if err != nil {
		w.queue.Add(key)
		return
	}
	plan, need := w.need(d)
	switch {
	case need == k8s.NeedSync:
		w.queue.Add(key)
	case need == k8s.NeedNothing:
	case !w.cache.ReplicaSetsSeen(d.ResourceVersion):
		// The ReplicaSet informer has handled nothing since the Deployment's last write, so
		// its counts may be older than the ones that write was decided on (the informers lag
		// each other; on a starved machine, for seconds). Rewriting the status from them
		// could undo a newer one, and the workflow would not be told. The workflow decides
		// instead, on the worker's cache.
		w.log.Debug("ReplicaSets older than the Deployment's last write, signalling a sync", "namespace", ns, "deployment", name)
		w.queue.Add(key)
	default:
		next := plan.Steps[0].Deployment
		res, err := w.opts.Status.UpdateDeploymentStatus(ctx, activities.DeploymentWriteInput{Deployment: next})
		if err != nil {
			w.log.Debug("Status refresh failed, signalling a sync", "namespace", ns, "deployment", name, "error", err)
			w.queue.Add(key)
			return
		}
		// A signal sent before the informer shows this write still names it, so the sync
		// does not decide on a Deployment from before it.
		for _, v := range res.Wrote {
			if v.Kind == k8s.KindDeployment {
				w.written.Store(key, v)
			}
		}
		w.log.Debug("Status refreshed", "namespace", ns, "deployment", name, "replicas", next.Status.Replicas,
			"available", next.Status.AvailableReplicas, "terminating", deref(next.Status.TerminatingReplicas))
		if WorkerCovers(next) {
			// The refresh takes the Deployment out of rest (a complete Deployment lost
			// available pods): from now on its changes are the worker's to weigh, so wake
			// the workflow, whose sync then waits for the next move in the worker.
			w.log.Debug("Deployment left rest, signalling a sync", "namespace", ns, "deployment", name)
			w.queue.Add(key)
		}
	}
}

// processTemplate writes one template change's status refresh, from the templates queue.
func (w *Watcher) processTemplate(ctx context.Context) bool {
	return processOne(ctx, w.templates, w.refreshTemplate)
}

// refreshTemplate writes the status a new pod template calls for at once
// (k8s.TemplateChangeStatus: updatedReplicas 0 while no ReplicaSet runs it), beside the signal
// that wakes the workflow, as the template change reaches this cache: `kubectl get deploy`
// shows no pod up to date from the change on, not from the sync's first writes, which wait for
// a workflow task and may queue behind other Deployments' writes on the client budget.
//
// The write keeps observedGeneration and the conditions (the sync writes those once it has
// acted) and is strict: its precondition is the resourceVersion it was decided on, with no
// retry, so it never lands over a status the sync wrote meanwhile. A sync that wrote first
// makes it stale, and it is dropped; one that writes after it retries its own status write
// on a fresh read (UpdateDeploymentStatus). It is sent only if the client budget grants it a
// token within templateBudgetWait (kube.IfBudgetWithin): on a saturated budget the syncs'
// writes, their statuses among them, go first. Nothing is signalled: the change itself was.
func (w *Watcher) refreshTemplate(ctx context.Context, key string) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	d, err := w.cache.Deployment(ns, name)
	if err != nil {
		return
	}
	next := k8s.TemplateChangeStatus(w.cache.Snapshot(d))
	if next == nil {
		return
	}
	if _, err := w.opts.Status.UpdateDeploymentStatus(kube.IfBudgetWithin(ctx, templateBudgetWait), activities.DeploymentWriteInput{Deployment: next, Strict: true}); err != nil {
		w.log.Debug("Template change's status refresh not written", "namespace", ns, "deployment", name, "error", err)
		return
	}
	w.log.Debug("Template change's status written", "namespace", ns, "deployment", name, "generation", d.Generation)
}

// signal sends the trigger: signal-with-start while the Deployment exists, a plain signal (so
// the workflow confirms the deletion live and ends) once it is gone.
func (w *Watcher) signal(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	id := contract.WorkflowIDIn(w.opts.Cluster, ns, name)
	d, err := w.cache.Deployment(ns, name)
	if apierrors.IsNotFound(err) {
		w.written.Delete(key)
		err := w.tc.SignalWorkflow(ctx, id, "", contract.SignalTrigger, nil)
		if _, ok := err.(*serviceerror.NotFound); ok {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	in := contract.Input{Namespace: ns, Name: name, Cluster: w.opts.Cluster}
	opts := StartOptionsFor(w.opts.TaskQueue, w.opts.SearchAttributes, in, d)
	trigger := w.trigger(d)
	if w.startsEagerly(d) {
		eager := in
		eager.Trigger = &trigger
		o := opts
		o.EnableEagerStart, o.WorkflowExecutionErrorWhenAlreadyStarted = true, true
		_, err := w.tc.ExecuteWorkflow(ctx, o, contract.WorkflowType, eager)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if !errors.As(err, &started) {
			return err
		}
		// Its workflow runs already (a Deployment recreated under the same name, or one
		// created before its workflow's last sync): signal it.
	}
	_, err = w.tc.SignalWithStartWorkflow(ctx, id, contract.SignalTrigger, trigger, opts, contract.WorkflowType, in)
	return err
}

// trigger carries the versions this watcher has seen of the Deployment and its ReplicaSets,
// so the sync waits for the worker's cache to have them too; for the Deployment, the
// watcher's own last status write when its cache does not show it yet.
func (w *Watcher) trigger(d *appsv1.Deployment) contract.Trigger {
	dv := k8s.DeploymentVersion(d)
	key := d.Namespace + "/" + d.Name
	if v, ok := w.written.Load(key); ok {
		if wv := v.(k8s.ObjectVersion); !wv.SeenBy(d.ResourceVersion) {
			dv = wv
		} else {
			w.written.CompareAndDelete(key, v)
		}
	}
	t := contract.Trigger{Versions: []k8s.ObjectVersion{dv}}
	for _, rs := range w.cache.Snapshot(d).ReplicaSets {
		t.Versions = append(t.Versions, k8s.ReplicaSetVersion(rs))
	}
	return t
}

// StartOptionsFor are StartOptions with the run's summary and details in the Temporal UI
// (StartSummary): what the Deployment rolls out, and how.
func StartOptionsFor(taskQueue string, searchAttributes bool, in contract.Input, d *appsv1.Deployment) client.StartWorkflowOptions {
	o := StartOptions(taskQueue, searchAttributes, in)
	o.StaticSummary, o.StaticDetails = StartSummary(in, d)
	return o
}

// StartSummary is a run's summary and details at its start, from the Deployment as the
// watcher sees it: "shop/web: app=nginx:1.27, canary in 4 steps, traffic on httproute web",
// and a Markdown list of the images, the strategy, the replicas and the revision. A run
// continued as new has none (the SDK's continue-as-new takes no summary): its current details
// say what it carries.
func StartSummary(in contract.Input, d *appsv1.Deployment) (summary, details string) {
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Name+"="+c.Image)
	}
	how := "rolling update"
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		how = "recreate"
	}
	if _, ok := d.Annotations[k8s.BlueGreenAnnotation]; ok {
		how = "blue-green"
	} else if steps, err := k8s.ParseSteps(d.Annotations); err == nil && len(steps) > 0 {
		how = fmt.Sprintf("canary in %d steps", len(steps))
	}
	if t, err := k8s.ParseTraffic(d.Annotations); err == nil && t != nil {
		how += ", traffic on httproute " + t.HTTPRoute.Name
	}
	summary = fmt.Sprintf("%s/%s: %s, %s", in.Namespace, in.Name, strings.Join(images, " "), how)
	if in.Cluster != "" {
		summary += " in cluster " + in.Cluster
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	rev := d.Annotations[k8s.RevisionAnnotation]
	if rev == "" {
		rev = "none yet"
	}
	details = fmt.Sprintf("- images: `%s`\n- strategy: %s\n- replicas: %d\n- revision at this run's start: %s",
		strings.Join(images, "`, `"), how, replicas, rev)
	return summary, details
}

// StartOptions are the options every start of a Deployment's workflow uses: its ID in its
// cluster (in.Cluster), and with searchAttributes K8sNamespace, K8sDeployment and, for a
// named cluster, RolloutCluster.
func StartOptions(taskQueue string, searchAttributes bool, in contract.Input) client.StartWorkflowOptions {
	o := client.StartWorkflowOptions{
		ID:            in.WorkflowID(),
		TaskQueue:     taskQueue,
		StaticSummary: "Deployment " + in.Namespace + "/" + in.Name,
	}
	if in.Cluster != "" {
		o.StaticSummary += " in cluster " + in.Cluster
	}
	if searchAttributes {
		attrs := []temporal.SearchAttributeUpdate{
			temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrNamespace).ValueSet(in.Namespace),
			temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrDeployment).ValueSet(in.Name),
		}
		if in.Cluster != "" {
			attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrCluster).ValueSet(in.Cluster))
		}
		o.TypedSearchAttributes = temporal.NewSearchAttributes(attrs...)
	}
	return o
}

// resyncLoop reconciles at start and then every Resync.
func (w *Watcher) resyncLoop(ctx context.Context) {
	for {
		n, err := w.Reconcile(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("Resync failed", "error", err)
		} else if ctx.Err() == nil {
			w.log.Info("Resync done", "signalled", n)
		}
		if w.opts.Resync <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.opts.Resync):
		}
	}
}

// Reconcile compares the open workflows with the cache and queues a signal for each
// Deployment that needs one: a workflow whose Deployment is gone (it confirms live and ends),
// a Deployment without a workflow, a Deployment at rest that a sync would change, and a
// generation no sync has observed (below). It returns how many it queued.
//
// A generation not observed (`kubectl set image` took web to generation 2, its status says 1)
// may be a change made while no watcher ran (every worker pod restarting together): its
// workflow rests, waiting for a signal nobody sent, and WorkerCovers leaves it to a worker
// that is not waiting for it. Or it may be one a running watcher signalled a moment ago, whose
// sync has yet to write its status; signalling that again costs an extra sync. So the first
// resync of this watcher, which saw none of the changes before it started, signals every
// unobserved generation; a later one signals those the previous resync found unobserved too
// (same UID and generation: a sync writes observedGeneration within seconds of its signal, so
// one still unobserved a resync later, 10 minutes by default, had its signal lost). A
// Deployment that stays unobserved is signalled once per resync, no more.
func (w *Watcher) Reconcile(ctx context.Context) (int, error) {
	open, err := w.openWorkflows(ctx)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	last, lastUnsettled := w.unobserved, w.unsettled
	w.mu.Unlock()
	unobserved, unsettled := map[string]generation{}, map[string]generation{}
	ds, err := w.cache.Deployments("")
	if err != nil {
		return 0, fmt.Errorf("list cached deployments: %w", err)
	}
	queued := 0
	present := map[string]bool{}
	for _, d := range ds {
		key := d.Namespace + "/" + d.Name
		if !w.involved(d) {
			// Managed mode: kube-controller-manager's; an open workflow of it is signalled
			// below, and ends.
			continue
		}
		present[key] = true
		g, pending := unobservedGeneration(d)
		if pending {
			unobserved[key] = g
		}
		held := !pending && heldCondition(d) && !w.heldAtRest(d)
		if held {
			unsettled[key] = generation{uid: d.UID, gen: d.Generation}
		}
		switch {
		case !open[key] && w.opts.Managed && w.unsupported(d):
			// Its strategy cannot be parked: the workflow that warned about it ended.
		case !open[key]:
			w.queue.Add(key)
			queued++
		case pending && (last == nil || last[key] == g):
			w.log.Info("Generation not observed, signalling", "namespace", d.Namespace, "deployment", d.Name,
				"generation", d.Generation, "observedGeneration", d.Status.ObservedGeneration, "firstResync", last == nil)
			w.queue.Add(key)
			queued++
		case held && (last == nil || lastUnsettled[key] == unsettled[key]):
			// Held but not at rest: its workflow may wait at rest for a change made while no
			// watcher ran (the first resync), or whose signal was lost (still unsettled a
			// resync later). A rollout still moving (its wait running) takes one sync more.
			w.log.Info("Held rollout not at rest, signalling", "namespace", d.Namespace, "deployment", d.Name, "firstResync", last == nil)
			w.queue.Add(key)
			queued++
		case w.weigh(d, "resync"):
			queued++
		}
	}
	for key := range open {
		if !present[key] {
			w.queue.Add(key)
			queued++
		}
	}
	w.mu.Lock()
	w.unobserved, w.unsettled = unobserved, unsettled
	w.mu.Unlock()
	return queued, nil
}

// unsupported reports whether a managed-mode decision leaves the Deployment to
// kube-controller-manager with nothing to write (k8s.PhaseReleased): no workflow to start.
func (w *Watcher) unsupported(d *appsv1.Deployment) bool {
	plan, err := k8s.Decide(w.cache.Snapshot(d), w.request(), time.Now())
	return err == nil && plan.Phase == k8s.PhaseReleased && len(plan.Steps) == 0
}

// openWorkflows lists the running Deployment workflows of this task queue and cluster, by
// "namespace/name".
func (w *Watcher) openWorkflows(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s'", contract.WorkflowType, w.opts.TaskQueue)
	var token []byte
	for {
		resp, err := w.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list open workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if cluster, ns, name, ok := contract.ParseWorkflowIDIn(e.GetExecution().GetWorkflowId()); ok && cluster == w.opts.Cluster {
				out[ns+"/"+name] = true
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// replicaSetChanged reports whether an update touches anything a sync reads: spec, labels,
// annotations, owners, deletion, and the status counts and conditions. Updates that only move
// status.observedGeneration or fullyLabeledReplicas are skipped, except that
// observedGeneration still counts for a ReplicaSet at 0 replicas, which gates its cleanup.
func replicaSetChanged(o, n *appsv1.ReplicaSet) bool {
	if o.ResourceVersion == n.ResourceVersion {
		return false
	}
	if !statusOnly(o, n) {
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
// annotating a ReplicaSet): the workflow that wrote it already knows. It compares the
// managedFields entries.
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

// specChanged reports a new generation, UID or deletion: a change the workflow must see.
func specChanged(o, n *appsv1.Deployment) bool {
	return o.Generation != n.Generation ||
		!reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) ||
		o.UID != n.UID
}

// metaChanged reports changed labels or annotations (our own status writes change the
// revision annotation; weighing with Decide tells those apart).
func metaChanged(o, n *appsv1.Deployment) bool {
	return !reflect.DeepEqual(o.Annotations, n.Annotations) || !reflect.DeepEqual(o.Labels, n.Labels)
}

// deref is *p, or -1 for nil (the field is unset), for logs.
func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}
