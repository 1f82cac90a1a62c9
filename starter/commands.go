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
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/watcher"
	"github.com/temporal-rollout/rollout/workflows"
)

// cmdOpts are the command-specific flags.
type cmdOpts struct {
	toRevision int64
	full       bool
	reason     string
}

// run runs a one-shot command (every command but watch).
func run(ctx context.Context, cfg config.Config, cmd string, args []string, opts cmdOpts) error {
	logger := cfg.Logger()
	copts, err := cfg.ClientOptions()
	if err != nil {
		return err
	}
	copts.Logger = sdklog.NewStructuredLogger(logger)
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
	tc, err := lifecycle.DialTemporal(ctx, logger, copts, cfg.StartupTimeout)
	if err != nil {
		return err
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
		if opts.toRevision < 0 {
			return fmt.Errorf("--to-revision must be >= 0, got %d", opts.toRevision)
		}
		return signalWithStart(ctx, tc, cfg, in, workflows.SignalRollback, workflows.RollbackRequest{Revision: &opts.toRevision})
	case "promote":
		return update(ctx, tc, id, workflows.UpdatePromote, workflows.PromoteRequest{Full: opts.full})
	case "abort":
		return update(ctx, tc, id, workflows.UpdateAbort, workflows.AbortRequest{Reason: opts.reason})
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

// update runs a Workflow Update on the Deployment's workflow and prints the resulting status.
// A rejected update (nothing to promote or abort) is an error that says why.
func update(ctx context.Context, tc client.Client, id, name string, payload any) error {
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: name, Args: []any{payload}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, id, err)
	}
	var st workflows.Status
	if err := h.Get(ctx, &st); err != nil {
		return fmt.Errorf("%s %s: %w", name, id, err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(st)
}

// signalWithStart signals the Deployment's workflow, starting it first if none is open.
func signalWithStart(ctx context.Context, tc client.Client, cfg config.Config, in workflows.Input, signal string, payload any) error {
	_, err := tc.SignalWithStartWorkflow(ctx, workflows.WorkflowID(in.Namespace, in.Name), signal, payload, watcher.StartOptions(cfg.TaskQueue, cfg.SearchAttributes, in), workflows.WorkflowType, in)
	if err != nil {
		return fmt.Errorf("signal %s to %s: %w", signal, workflows.WorkflowID(in.Namespace, in.Name), err)
	}
	return nil
}
