// Package startup is the start-up sequence the worker and `starter watch` share: the logger
// and memory limit, the Kubernetes and Temporal clients, the metrics server, the waits for the
// API server and for Temporal (each bounded by --startup-timeout), the search-attribute checks
// and the informer cache. Each binary then adds its own parts (the worker its Temporal worker,
// activities and, with --watch, the watcher; `starter watch` the watcher alone), starts the
// cache and declares itself ready.
package startup

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/obs"
	"github.com/temporal-rollout/rollout/kube"
	"github.com/temporal-rollout/rollout/release"
	"github.com/temporal-rollout/rollout/watcher"
)

// Options are what differs between the two binaries' start-ups.
type Options struct {
	// Name is the process's role in its logs: "worker" or "watcher".
	Name string
	// LogFields are the settings of this role's "Starting" line beside the shared ones.
	LogFields []any
	// Clients builds the role's further clients from the Kubernetes REST config, before any
	// wait: a setting that is wrong fails at once (nil: none).
	Clients func(*rest.Config) error
}

// searchAttributeCheck is what one setting needs registered on the Temporal namespace.
type searchAttributeCheck struct {
	flag string
	want []contract.SearchAttribute
}

// searchAttributeChecks lists the search attributes the settings need before the process
// starts: every one for --search-attributes (the watcher sets them on its starts), and the
// release workflow's (ReleaseName, which it upserts on its first workflow task) for the
// worker's --releases. Without them every start the watcher makes is rejected and it retries
// for ever, and a release's first workflow task fails for ever: the process exits at start,
// naming the commands.
func searchAttributeChecks(searchAttributes, releases bool) []searchAttributeCheck {
	var out []searchAttributeCheck
	if searchAttributes {
		out = append(out, searchAttributeCheck{"--search-attributes", contract.SearchAttributes()})
	}
	if releases {
		out = append(out, searchAttributeCheck{"--releases", release.SearchAttributes()})
	}
	return out
}

// Process is what the shared start-up built.
type Process struct {
	Logger     *slog.Logger
	Kube       kubernetes.Interface
	RestConfig *rest.Config
	Temporal   client.Client
	// Cache is the informer cache, not started: handlers go on its informers first (see
	// StartCache).
	Cache    *kube.Cache
	Registry *prometheus.Registry
	// DigestKey is the codec's key for spec digests (activities.Activities.SpecDigestKey);
	// nil without a codec.
	DigestKey []byte

	cfg   config.Config
	ready obs.ReadyAfter
}

// Start runs the shared start-up sequence. It returns a context that stop cancels, and stop,
// which the caller defers at once: it undoes what Start did in reverse order (the informers,
// the Temporal client, the metrics server, the context), naming each step to stopper (see
// lifecycle.Main). On error Start has undone it already.
func Start(ctx context.Context, cfg config.Config, stopper *lifecycle.Stopper, o Options) (_ context.Context, _ *Process, _ func(), err error) {
	p := &Process{cfg: cfg, Logger: cfg.Logger()}
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	logger := p.Logger
	if limit := lifecycle.SetMemoryLimit("/sys/fs/cgroup"); limit > 0 {
		logger.Info("Go soft memory limit set to 90% of the container's", "bytes", limit)
	}
	fields := append([]any{"temporalAddress", cfg.TemporalAddress, "temporalNamespace", cfg.TemporalNamespace,
		"taskQueue", cfg.TaskQueue, "cluster", cfg.Cluster, "watchNamespace", cfg.WatchNamespace}, o.LogFields...)
	logger.Info("Starting "+o.Name, append(fields, "startupTimeout", cfg.StartupTimeout, "shutdownTimeout", cfg.ShutdownTimeout)...)

	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	// The watcher of worker --watch shares the worker's client, and so the codec.
	cd, err := cfg.Codec()
	if err != nil {
		return nil, nil, nil, err
	}
	if cd != nil {
		p.DigestKey = cd.DigestKey()
		logger.Info("Payloads to Temporal are encrypted", "keyID", cd.KeyID())
	}
	if p.Kube, p.RestConfig, err = kube.NewClientset(cfg.Kubeconfig, cfg.KubeQPS, cfg.KubeBurst); err != nil {
		return nil, nil, nil, err
	}
	if o.Clients != nil {
		if err := o.Clients(p.RestConfig); err != nil {
			return nil, nil, nil, err
		}
	}
	// Stop everything started below on every way out; each cleanup names itself, so that a
	// stop past --shutdown-timeout says where it is stuck.
	ctx, cancel := context.WithCancel(ctx)
	undo = append(undo, func() { stopper.Step("cancel"); cancel() })

	// Listen first: a taken address fails at once, not after the waits below.
	p.Registry = obs.NewRegistry()
	stopServer, err := obs.Server{Addr: cfg.MetricsAddress, Pprof: cfg.Pprof, Reg: p.Registry, Logger: logger, Ready: p.ready.Check}.Start(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, func() { stopper.Step("stop the metrics server"); stopServer() })

	if err := lifecycle.WaitAPIServer(ctx, logger, p.Kube, p.RestConfig.Host, cfg.StartupTimeout); err != nil {
		return nil, nil, nil, err
	}
	sdkMetrics, closeMetrics := obs.SDKMetrics(p.Registry)
	undo = append(undo, closeMetrics)
	opts.MetricsHandler = sdkMetrics
	if p.Temporal, err = lifecycle.DialTemporal(ctx, logger, opts, cfg.StartupTimeout); err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, func() { stopper.Step("close the Temporal client"); p.Temporal.Close() })
	for _, c := range searchAttributeChecks(cfg.SearchAttributes, cfg.Releases) {
		if err := lifecycle.CheckSearchAttributes(ctx, logger, p.Temporal.OperatorService(), cfg.TemporalNamespace, c.flag, c.want, cfg.StartupTimeout); err != nil {
			return nil, nil, nil, err
		}
	}

	if p.Cache, err = kube.NewCache(p.Kube, cfg.WatchNamespace); err != nil {
		return nil, nil, nil, err
	}
	// Cancel before Shutdown, or Shutdown waits for the informers forever.
	undo = append(undo, func() { stopper.Step("stop the informers"); cancel(); p.Cache.Shutdown() })
	return ctx, p, stop, nil
}

// WatcherOptions are the watcher's settings from the configuration, as both binaries run it;
// each adds what its process offers (the status writer, eager starts, a pacer).
func (p *Process) WatcherOptions() watcher.Options {
	c := p.cfg
	return watcher.Options{
		TaskQueue: c.TaskQueue, Cluster: c.Cluster, SearchAttributes: c.SearchAttributes, Resync: c.Resync,
		Managed: c.Managed(), ManagedGuard: c.ManagedGuard,
	}
}

// StatusWriter is the write path of the watcher's status refreshes without a worker in the
// process (`starter watch`): the worker's own (activities.Activities.UpdateDeploymentStatus),
// on this process's clients, cache and metrics.
func (p *Process) StatusWriter() *activities.Activities {
	return &activities.Activities{Client: p.Kube, Cache: p.Cache, Metrics: activities.NewMetrics(p.Registry), SpecDigestKey: p.DigestKey}
}

// StartCache starts the informers and waits, at most --startup-timeout, for their first lists.
func (p *Process) StartCache(ctx context.Context) error {
	return p.Cache.StartWithin(ctx, p.cfg.StartupTimeout)
}

// Ready declares the process started: /readyz answers from now on by Temporal's health.
func (p *Process) Ready(ctx context.Context) {
	p.ready.Set(obs.TemporalReady(ctx, p.Temporal))
}
