package main

import (
	"context"

	sdklog "go.temporal.io/sdk/log"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/obs"
	"github.com/temporal-rollout/rollout/kube"
	"github.com/temporal-rollout/rollout/watcher"
)

// watch runs the watcher (package watcher) until ctx ends. Every start-up wait is bounded by
// --startup-timeout and every cleanup names itself to stopper (see lifecycle.Main).
func watch(ctx context.Context, cfg config.Config, stopper *lifecycle.Stopper) error {
	logger := cfg.Logger()
	if limit := lifecycle.SetMemoryLimit("/sys/fs/cgroup"); limit > 0 {
		logger.Info("Go soft memory limit set to 90% of the container's", "bytes", limit)
	}
	logger.Info("Starting watcher", "temporalAddress", cfg.TemporalAddress, "temporalNamespace", cfg.TemporalNamespace,
		"taskQueue", cfg.TaskQueue, "cluster", cfg.Cluster, "watchNamespace", cfg.WatchNamespace, "resync", cfg.Resync,
		"startupTimeout", cfg.StartupTimeout, "shutdownTimeout", cfg.ShutdownTimeout)
	opts, err := cfg.ClientOptions()
	if err != nil {
		return err
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	cd, err := cfg.Codec()
	if err != nil {
		return err
	}
	var digestKey []byte
	if cd != nil {
		digestKey = cd.DigestKey()
		logger.Info("Payloads to Temporal are encrypted", "keyID", cd.KeyID())
	}
	kc, restCfg, err := kube.NewClientset(cfg.Kubeconfig, cfg.KubeQPS, cfg.KubeBurst)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() { stopper.Step("cancel"); cancel() }()

	// Listen first: a taken address fails at once, not after the waits below.
	reg := obs.NewRegistry()
	var ready obs.ReadyAfter
	stopServer, err := obs.Server{Addr: cfg.MetricsAddress, Pprof: cfg.Pprof, Reg: reg, Logger: logger, Ready: ready.Check}.Start(ctx)
	if err != nil {
		return err
	}
	defer func() { stopper.Step("stop the metrics server"); stopServer() }()

	if err := lifecycle.WaitAPIServer(ctx, logger, kc, restCfg.Host, cfg.StartupTimeout); err != nil {
		return err
	}
	sdkMetrics, closeMetrics := obs.SDKMetrics(reg)
	defer closeMetrics()
	opts.MetricsHandler = sdkMetrics
	tc, err := lifecycle.DialTemporal(ctx, logger, opts, cfg.StartupTimeout)
	if err != nil {
		return err
	}
	defer func() { stopper.Step("close the Temporal client"); tc.Close() }()
	if cfg.SearchAttributes {
		// Without them every start the watcher makes is rejected, and it retries for ever.
		if err := lifecycle.CheckSearchAttributes(ctx, logger, tc.OperatorService(), cfg.TemporalNamespace, "--search-attributes", contract.SearchAttributes(), cfg.StartupTimeout); err != nil {
			return err
		}
	}

	c, err := kube.NewCache(kc, cfg.WatchNamespace)
	if err != nil {
		return err
	}
	w, err := watcher.New(c, tc, watcher.Options{
		TaskQueue: cfg.TaskQueue, Cluster: cfg.Cluster, SearchAttributes: cfg.SearchAttributes, Resync: cfg.Resync, Managed: cfg.Managed(), ManagedGuard: cfg.ManagedGuard,
		// Status-count refreshes of Deployments at rest go through the worker's write path.
		Status: &activities.Activities{Client: kc, Cache: c, Metrics: activities.NewMetrics(reg), SpecDigestKey: digestKey},
	}, logger)
	if err != nil {
		return err
	}
	// Cancel before Shutdown, or Shutdown waits for the informers forever.
	defer func() { stopper.Step("stop the informers"); cancel(); c.Shutdown() }()
	if err := c.StartWithin(ctx, cfg.StartupTimeout); err != nil {
		return err
	}
	ready.Set(obs.TemporalReady(ctx, tc))
	logger.Info("Watcher running", "watchNamespace", cfg.WatchNamespace, "resync", cfg.Resync)
	w.Run(ctx)
	logger.Info("Watcher stopped")
	return nil
}
