package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/obs"
	"github.com/temporal-rollout/rollout/kube"
	"github.com/temporal-rollout/rollout/watcher"
)

// watch runs the watcher (package watcher) until ctx ends.
func watch(ctx context.Context, cfg config.Config, opts client.Options, logger *slog.Logger) error {
	kc, _, err := kube.NewClientset(cfg.Kubeconfig, cfg.KubeQPS, cfg.KubeBurst)
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

	c, err := kube.NewCache(kc, cfg.WatchNamespace)
	if err != nil {
		return err
	}
	w, err := watcher.New(c, tc, watcher.Options{
		TaskQueue: cfg.TaskQueue, SearchAttributes: cfg.SearchAttributes, Resync: cfg.Resync,
		// Status-count refreshes of Deployments at rest go through the worker's write path.
		Status: &activities.Activities{Client: kc, Cache: c, Metrics: activities.NewMetrics(reg)},
	}, logger)
	if err != nil {
		return err
	}
	// Stop the informers on every way out, or Shutdown would wait for them forever.
	ctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); c.Shutdown() }()
	if err := c.Start(ctx); err != nil {
		return err
	}
	stopServer, err := obs.Server{Addr: cfg.MetricsAddress, Reg: reg, Logger: logger, Ready: obs.TemporalReady(ctx, tc)}.Start(ctx)
	if err != nil {
		return err
	}
	defer stopServer()
	logger.Info("Watcher running", "watchNamespace", cfg.WatchNamespace, "resync", cfg.Resync)
	w.Run(ctx)
	logger.Info("Watcher stopped")
	return nil
}
