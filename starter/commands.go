package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/watcher"
	"github.com/temporal-rollout/rollout/workflows"
)

func run(ctx context.Context, cfg config.Config, cmd string, args []string, toRevision int64) error {
	logger := cfg.Logger()
	opts, err := cfg.ClientOptions()
	if err != nil {
		return err
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	if cmd == "watch" {
		return watch(ctx, cfg, opts, logger)
	}
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one NAMESPACE/NAME argument, got %d", cmd, len(args))
	}
	ns, name, ok := strings.Cut(args[0], "/")
	in := workflows.Input{Namespace: ns, Name: name}
	if !ok {
		return fmt.Errorf("argument %q is not NAMESPACE/NAME", args[0])
	}
	if err := in.Validate(); err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	id := workflows.WorkflowID(ns, name)

	switch cmd {
	case "sync":
		return signalWithStart(ctx, tc, cfg, in, workflows.SignalTrigger, nil)
	case "pause":
		return signalWithStart(ctx, tc, cfg, in, workflows.SignalPause, nil)
	case "resume":
		return signalWithStart(ctx, tc, cfg, in, workflows.SignalResume, nil)
	case "rollback":
		if toRevision < 0 {
			return fmt.Errorf("--to-revision must be >= 0, got %d", toRevision)
		}
		return signalWithStart(ctx, tc, cfg, in, workflows.SignalRollback, workflows.RollbackRequest{Revision: &toRevision})
	case "status":
		v, err := tc.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err != nil {
			return fmt.Errorf("query status of %s: %w", id, err)
		}
		var st workflows.Status
		if err := v.Get(&st); err != nil {
			return fmt.Errorf("decode status of %s: %w", id, err)
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// signalWithStart signals the Deployment's workflow, starting it first if none is open.
func signalWithStart(ctx context.Context, tc client.Client, cfg config.Config, in workflows.Input, signal string, payload any) error {
	_, err := tc.SignalWithStartWorkflow(ctx, workflows.WorkflowID(in.Namespace, in.Name), signal, payload, watcher.StartOptions(cfg.TaskQueue, cfg.SearchAttributes, in), workflows.WorkflowType, in)
	if err != nil {
		return fmt.Errorf("signal %s to %s: %w", signal, workflows.WorkflowID(in.Namespace, in.Name), err)
	}
	return nil
}
