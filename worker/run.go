package main

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/analysis"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/startup"
	"github.com/temporal-rollout/rollout/internal/zoneinfo"
	"github.com/temporal-rollout/rollout/kube"
	"github.com/temporal-rollout/rollout/watcher"
	"github.com/temporal-rollout/rollout/workflows"
)

// localWaitsPerSync: with --local-wait, a worker runs up to this many rollouts' waits for their
// next move inside a workflow task (local AwaitChange, a goroutine asleep on the informer
// cache) per sync slot; past that a rollout waits in the AwaitChange activity, which costs a
// round trip through the Temporal server per move. A local wait that sees a move syncs in its
// own workflow task, so at most (1 + localWaitsPerSync) × max-concurrent-syncs workflow tasks
// run at once. Without --local-wait, at most max-concurrent-syncs.
const localWaitsPerSync = 5

// commandQPS and commandBurst are the client budget of users' commands (pause, resume, a
// rollback's template): a few writes at a time, each a person or a script waiting for it.
const (
	commandQPS   = 10
	commandBurst = 20
)

// workflowTaskPollers and activityTaskPollers: concurrent long polls per worker (see
// worker.Options below).
//
// minWorkflowTaskPollers keeps the sticky queue's pollers at their maximum: the SDK's
// autoscaler lowers its target on every empty poll, so after an idle period a burst of signals
// (100 image updates at once) was picked a few tasks at a time (the last of 100 first tasks
// done 2.4 s and 2.3 s after the update with a minimum of 2, against 1.6 s and 2.0 s with 16).
// The minimum holds for the normal queue's pollers too, and each poll holds one of the
// --max-concurrent-syncs slots while it waits: with a minimum of 16 and nothing more, idle
// normal polls held most of them, and at QPS 20 users' signals waited 2.4 to 9.6 s for a slot
// (control benchmark). The slot supplier therefore lets only normalPollsInFlight polls of the
// normal queue run at once (worker/slots.go).
const (
	workflowTaskPollers    = 16
	minWorkflowTaskPollers = 16
	activityTaskPollers    = 4
)

func run(ctx context.Context, cfg config.Config, stopper *lifecycle.Stopper) error {
	var (
		commands kubernetes.Interface
		dyn      dynamic.Interface
		prom     *analysis.Client
	)
	ctx, p, stop, err := startup.Start(ctx, cfg, stopper, startup.Options{
		Name: "worker", LogFields: []any{"kubeQPS", cfg.KubeQPS, "kubeBurst", cfg.KubeBurst},
		Clients: func(restCfg *rest.Config) (err error) {
			// Users' commands (pause, resume, rollback) write under a budget of their own, as
			// `kubectl rollout pause` does: on a saturated --kube-qps they do not queue behind
			// the rollouts' own writes.
			if commands, _, err = kube.NewClientset(cfg.Kubeconfig, commandQPS, commandBurst); err != nil {
				return err
			}
			// Traffic routing reads and writes HTTPRoutes (Gateway API) with the dynamic
			// client, on the rollouts' budget.
			if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
				return fmt.Errorf("build dynamic client: %w", err)
			}
			if cfg.PrometheusAddress != "" {
				prom, err = analysis.NewClient(cfg.PrometheusAddress, nil)
			}
			return err
		},
	})
	if err != nil {
		return err
	}
	defer stop()
	logger, kc, tc, cache := p.Logger, p.Kube, p.Temporal, p.Cache

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	defer func() { stopper.Step("flush the event recorder"); broadcaster.Shutdown() }()
	// In full mode our events come from the cluster's Deployment controller, as upstream's do;
	// in managed mode kube-controller-manager's runs too, so ours say who wrote them.
	component := "deployment-controller"
	if cfg.Managed() {
		component = kube.FieldManager
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
	logger.Info("Mode", "mode", cfg.Mode)

	// Every workflow at rest waits for a signal; with thousands of Deployments, keeping all of
	// them in memory costs tens of KiB each. Past the bound the least recently used is evicted
	// and replays its (short, continued-as-new) history on its next task.
	worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	metrics := activities.NewMetrics(p.Registry)
	localWaitSlots := 0
	if cfg.LocalWait > 0 {
		localWaitSlots = localWaitsPerSync * cfg.MaxSyncs
	}
	tuner, err := newTuner(cfg.MaxSyncs, localWaitSlots)
	if err != nil {
		return err
	}
	w := worker.New(tc, cfg.TaskQueue, worker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&activities.ErrorCounter{Metrics: metrics}},
		Tuner:        tuner,
		// The SDK's default of 2 pollers per kind caps how fast tasks leave the queue at two
		// in flight per round trip: with 10,000 Deployments created at once on the dev server
		// (polls answered in ~150ms under load) that was 13.6 workflow tasks/s against a
		// backlog of 8,000 while slots sat free. Pollers are cheap long polls.
		//
		// Workflow-task pollers autoscale, which keeps sticky and normal polls apart. With a
		// fixed maximum the SDK sends every poll to the sticky queue while its last sticky
		// poll reported a backlog: after 1000 Deployments were created at once, sticky tasks
		// that had timed out (5 s) moved to the normal queue, and every poller then
		// long-polled an empty sticky queue; the normal queue's tasks (those, and the first
		// task of every run continued as new) waited up to 80 s, until the next change
		// brought sticky tasks again. Autoscaling, 21 s at most, all inside the storm.
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: workflowTaskPollers, MinimumNumberOfPollers: minWorkflowTaskPollers, MaximumNumberOfPollers: workflowTaskPollers,
		}),
		MaxConcurrentActivityTaskPollers: activityTaskPollers,
		// StickyScheduleToStartTimeout stays at the SDK's 5s: a longer one delays recovery
		// after a worker dies with tasks queued on its sticky queue (tested by TestWorkerCrash),
		// and a status query to one of its workflows waits as long on the dead worker's
		// sticky queue. 20 s spared the server 693 timed-out tasks when 1000 Deployments were
		// created at once, but `temporal workflow query` failed right after a worker's
		// SIGKILL and restart (TestBlueGreen).
	})
	w.RegisterWorkflowWithOptions(workflows.DeploymentWorkflow, workflow.RegisterOptions{Name: contract.WorkflowType})
	acts := &activities.Activities{
		Client:        kc,
		Dynamic:       dyn,
		CommandClient: commands,
		Admission:     activities.NewAdmission(kube.BudgetOf(p.RestConfig)),
		Cache:         cache,
		Recorder:      recorder,
		Metrics:       metrics,
		LocalWaits:    make(chan struct{}, localWaitSlots),
		Managed:       cfg.Managed(),
		// The watcher (below, or starter watch) signals rollouts held at rest (activities.AwaitRest).
		RestWatched: cfg.Watch || cfg.HeldAtRest,

		ManagedGuard: cfg.ManagedGuard,
		LocalWait:    cfg.LocalWait,
		UIURL:        strings.TrimSuffix(cfg.UIURL, "/"),

		SpecDigestKey: p.DigestKey,
		Freeze:        &activities.FreezeSource{Client: tc},
	}
	if prom != nil {
		acts.Prometheus = prom
		logger.Info("Analysis steps query Prometheus", "address", prom.String())
	}
	w.RegisterActivity(acts)

	// The watcher's handlers go on the informers before they start.
	var wat *watcher.Watcher
	if cfg.Watch {
		opts := p.WatcherOptions()
		opts.Status = acts
		// This process's worker takes the first workflow task of the workflows it starts.
		opts.EagerStart = true
		// The syncs it causes share this worker's client budget.
		opts.Pacer = acts.Admission
		if wat, err = watcher.New(cache, tc, opts, logger.With("component", "watcher")); err != nil {
			return err
		}
	}
	if err := p.StartCache(ctx); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.TaskQueue, err)
	}
	// A rollout whose wait died with a worker (this one, before a restart) is woken now, not
	// at its wait's heartbeat timeout (watcher.TakeOver).
	go func() {
		if n, err := watcher.TakeOver(ctx, cache, tc, cfg.Cluster, cfg.Managed(), logger.With("component", "takeover")); err != nil {
			logger.Warn("Taking over rollouts under way failed; their waits time out instead", "error", err)
		} else {
			logger.Info("Rollouts under way signalled at start", "signalled", n)
		}
	}()
	if cfg.Releases {
		stopReleases, err := startReleases(tc, cfg.ReleasePolicy)
		if err != nil {
			return err
		}
		defer func() { stopper.Step("stop the releases worker"); stopReleases() }()
	}
	p.Ready(ctx)
	logger.Info("Worker running", "watch", cfg.Watch, "releases", cfg.Releases, "tzdata", zoneinfo.Version)
	watched := make(chan struct{})
	if wat != nil {
		go func() { defer close(watched); wat.Run(ctx) }()
	} else {
		close(watched)
	}
	<-ctx.Done()
	stopper.Step("stop the watcher")
	<-watched
	logger.Info("Stopping worker", "shutdownTimeout", cfg.ShutdownTimeout)
	stopper.Step("stop the Temporal worker (running activities end with the stop)")
	w.Stop()
	logger.Info("Worker stopped")
	return nil
}
