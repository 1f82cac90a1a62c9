package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/watcher"
)

// parseTarget reads a NAMESPACE/NAME argument into the workflow's input.
func parseTarget(arg string) (contract.Input, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		return contract.Input{}, fmt.Errorf("argument %q is not NAMESPACE/NAME", arg)
	}
	in := contract.Input{Namespace: ns, Name: name}
	if err := in.Validate(); err != nil {
		return contract.Input{}, err
	}
	return in, nil
}

// dial connects to Temporal, retrying for up to --startup-timeout.
func dial(ctx context.Context, cfg config.Config) (client.Client, error) {
	logger := cfg.Logger()
	copts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	copts.Logger = sdklog.NewStructuredLogger(logger)
	return lifecycle.DialTemporal(ctx, logger, copts, cfg.StartupTimeout)
}

// queryStatus asks the Deployment's workflow (its latest run) for its status.
func queryStatus(ctx context.Context, tc client.Client, id string) (contract.Status, error) {
	return query[contract.Status](ctx, tc, id, contract.QueryStatus)
}

// query runs query name on workflow id (its latest run) and decodes the answer. Errors name
// the workflow.
func query[T any](ctx context.Context, tc client.Client, id, name string) (T, error) {
	var out T
	v, err := tc.QueryWorkflow(ctx, id, "", name)
	if err != nil {
		return out, fmt.Errorf("query %s of %s: %w", name, id, err)
	}
	if err := v.Get(&out); err != nil {
		return out, fmt.Errorf("decode %s of %s: %w", name, id, err)
	}
	return out, nil
}

// update runs a Workflow Update on the Deployment's workflow and prints the resulting status
// as JSON. A rejected update (nothing to promote or abort) is an error that says why.
func update(ctx context.Context, tc client.Client, w io.Writer, id, name string, payload any) error {
	st, err := runUpdate[contract.Status](ctx, tc, id, name, payload)
	if err != nil {
		return err
	}
	return writeJSON(w, st)
}

// runUpdate runs Workflow Update name on workflow id and waits for its result.
func runUpdate[T any](ctx context.Context, tc client.Client, id, name string, payload any) (T, error) {
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: name, Args: []any{payload}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	return updateResult[T](ctx, h, err, id, name)
}

// updateResult waits for the result of an update sent (h, or the error err of sending it; of
// UpdateWorkflow or UpdateWithStartWorkflow). Errors name the update and the workflow.
func updateResult[T any](ctx context.Context, h client.WorkflowUpdateHandle, err error, id, name string) (T, error) {
	var out T
	if err == nil {
		err = h.Get(ctx, &out)
	}
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", name, id, err)
	}
	return out, nil
}

// signalWithStart signals the Deployment's workflow, starting it first if none is open.
func signalWithStart(ctx context.Context, tc client.Client, cfg config.Config, in contract.Input, signal string, payload any) error {
	_, err := tc.SignalWithStartWorkflow(ctx, in.WorkflowID(), signal, payload, watcher.StartOptions(cfg.TaskQueue, cfg.SearchAttributes, in), contract.WorkflowType, in)
	if err != nil {
		return fmt.Errorf("signal %s to %s: %w", signal, in.WorkflowID(), err)
	}
	return nil
}

// probe GETs url and fails unless it answers 200 within 3 seconds.
func probe(url string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d", url, resp.StatusCode)
	}
	return nil
}
