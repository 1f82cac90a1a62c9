package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/contract"
)

// The fleet freeze: one durable workflow, freeze/fleet, holds the current freeze (until when,
// why, by whom). `starter freeze` and `starter thaw` update it (starting it if needed);
// releases ask it before each wave and each Deployment change and, while it holds, wait for
// its end.
const (
	// FleetFreezeID is the fleet freeze workflow's ID.
	FleetFreezeID = contract.FleetFreezeID
	// FleetFreezeType is its registered name.
	FleetFreezeType = "FleetFreezeWorkflow"
	// UpdateFreeze sets the freeze: {"until":"<RFC 3339>","reason":"...","by":"..."}.
	// Rejected without a reason, or with until not in the future.
	UpdateFreeze = "freeze"
	// UpdateThaw ends it: {"by":"..."}. Rejected when nothing is frozen.
	UpdateThaw = "thaw"
	// QueryFreeze returns the FleetFreeze.
	QueryFreeze = contract.QueryFleetFreeze
)

// FleetFreeze is the fleet freeze's state.
type FleetFreeze struct {
	Frozen bool      `json:"frozen"`
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	// Since is when it was set, or when the last freeze ended.
	Since time.Time `json:"since,omitzero"`
	// Last says how the last freeze ended (thawed by whom, or expired).
	Last string `json:"last,omitempty"`
}

// FreezeRequest is the freeze update's payload.
type FreezeRequest struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
}

// ThawRequest is the thaw update's payload.
type ThawRequest struct {
	By string `json:"by,omitempty"`
}

// FleetFreezeWorkflow holds the fleet freeze for ever. A freeze ends by thaw or at its until.
// It continues as new when Temporal suggests it (after many updates).
func FleetFreezeWorkflow(ctx workflow.Context, state FleetFreeze) error {
	st := state
	version := 0
	memo := func() {
		_ = workflow.UpsertMemo(ctx, map[string]any{
			"frozen": st.Frozen, "until": st.Until, "reason": st.Reason, "by": st.By, "last": st.Last,
		})
	}
	if err := workflow.SetQueryHandler(ctx, QueryFreeze, func() (FleetFreeze, error) { return st, nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateFreeze,
		func(ctx workflow.Context, req FreezeRequest) (FleetFreeze, error) {
			st = FleetFreeze{Frozen: true, Until: req.Until, Reason: strings.TrimSpace(req.Reason), By: req.By, Since: workflow.Now(ctx), Last: st.Last}
			version++
			memo()
			workflow.GetLogger(ctx).Info("Fleet frozen", "until", req.Until, "reason", req.Reason, "by", req.By)
			return st, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req FreezeRequest) error {
			switch {
			case strings.TrimSpace(req.Reason) == "":
				return errors.New(`freeze needs a reason: {"until":"<RFC 3339>","reason":"..."}`)
			case !req.Until.After(workflow.Now(ctx)):
				return fmt.Errorf("until %s is not in the future", req.Until.UTC().Format(time.RFC3339))
			}
			return nil
		}})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateThaw,
		func(ctx workflow.Context, req ThawRequest) (FleetFreeze, error) {
			st = FleetFreeze{Since: workflow.Now(ctx), Last: fmt.Sprintf("thawed by %s (frozen until %s: %s)", req.By, st.Until.UTC().Format(time.RFC3339), st.Reason)}
			version++
			memo()
			workflow.GetLogger(ctx).Info("Fleet thawed", "by", req.By)
			return st, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, ThawRequest) error {
			if !st.Frozen {
				return errors.New("the fleet is not frozen")
			}
			return nil
		}})
	if err != nil {
		return err
	}
	memo()
	for {
		seen := version
		if st.Frozen {
			ok, err := workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: st.Until.Sub(workflow.Now(ctx)), TimerOptions: workflow.TimerOptions{
				Summary: fmt.Sprintf("fleet freeze until %s: %s", st.Until.UTC().Format(time.RFC3339), st.Reason),
			}}, func() bool { return version != seen })
			if err != nil {
				return err
			}
			if !ok && st.Frozen {
				st = FleetFreeze{Since: workflow.Now(ctx), Last: fmt.Sprintf("expired at %s (%s)", st.Until.UTC().Format(time.RFC3339), st.Reason)}
				memo()
			}
		} else if err := workflow.Await(ctx, func() bool { return version != seen }); err != nil {
			return err
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, FleetFreezeType, st)
		}
	}
}

// Activities are the release workflow's own, on the releases task queue: they ask the fleet
// freeze workflow.
type Activities struct {
	Client client.Client
	// Poll is how often AwaitThaw asks (default 2s).
	Poll time.Duration
	// Policy is the worker's approval policy (nil: none configured, ReleasePolicy answers
	// "unsigned, no rules"); PolicySource says where it was read.
	Policy       *Policy
	PolicySource string
}

// FleetFreezeState returns the fleet freeze; no freeze workflow is no freeze.
func (a *Activities) FleetFreezeState(ctx context.Context) (FleetFreeze, error) {
	var f FleetFreeze
	v, err := a.Client.QueryWorkflow(ctx, FleetFreezeID, "", QueryFreeze)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("query %s: %w", FleetFreezeID, err)
	}
	if err := v.Get(&f); err != nil {
		return f, fmt.Errorf("decode %s state: %w", FleetFreezeID, err)
	}
	return f, nil
}

// AwaitThaw returns once the fleet freeze has ended, heartbeating as it polls.
func (a *Activities) AwaitThaw(ctx context.Context) error {
	poll := a.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		f, err := a.FleetFreezeState(ctx)
		if err == nil && !f.Frozen {
			return nil
		}
		activity.RecordHeartbeat(ctx, f)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

var freezeCheckOptions = workflow.ActivityOptions{
	TaskQueue:              TaskQueue,
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
}

var thawOptions = workflow.ActivityOptions{
	TaskQueue:           TaskQueue,
	StartToCloseTimeout: 366 * 24 * time.Hour,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
}
