package main

import (
	"context"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/startup"
	"github.com/temporal-rollout/rollout/watcher"
)

// watch runs the watcher (package watcher) until ctx ends, after the start-up it shares with
// the worker (package startup): every start-up wait is bounded by --startup-timeout and every
// cleanup names itself to stopper (see lifecycle.Main).
func watch(ctx context.Context, cfg config.Config, stopper *lifecycle.Stopper) error {
	ctx, p, stop, err := startup.Start(ctx, cfg, stopper, startup.Options{Name: "watcher", LogFields: []any{"resync", cfg.Resync}})
	if err != nil {
		return err
	}
	defer stop()
	opts := p.WatcherOptions()
	// Status-count refreshes of Deployments at rest go through the worker's write path.
	opts.Status = p.StatusWriter()
	w, err := watcher.New(p.Cache, p.Temporal, opts, p.Logger)
	if err != nil {
		return err
	}
	if err := p.StartCache(ctx); err != nil {
		return err
	}
	p.Ready(ctx)
	p.Logger.Info("Watcher running", "watchNamespace", cfg.WatchNamespace, "resync", cfg.Resync)
	w.Run(ctx)
	p.Logger.Info("Watcher stopped")
	return nil
}
