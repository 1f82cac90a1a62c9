package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
)

// The fleet freeze, as a stepped rollout sees it (docs/releases.md). The freeze lives in one
// workflow, release.FleetFreezeID on the releases task queue; a DeploymentWorkflow asks for it
// through the FleetFreeze local activity, so the answer it acts on is in its history. The IDs
// are the contract's (release imports this package, and names its freeze by them too).
const (
	// FleetFreezeID is contract.FleetFreezeID, release.FleetFreezeID.
	FleetFreezeID = contract.FleetFreezeID
	// QueryFleetFreeze is contract.QueryFleetFreeze, release.QueryFreeze.
	QueryFleetFreeze = contract.QueryFleetFreeze
	// defaultFreezeTTL is how long FreezeSource keeps an answer.
	defaultFreezeTTL = 2 * time.Second
)

// FleetFreezeResult is the fleet freeze: the fields of release.FleetFreeze a rollout needs.
type FleetFreezeResult struct {
	Frozen bool      `json:"frozen"`
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
}

// FreezeSource answers FleetFreeze by querying the fleet freeze workflow, and keeps the answer
// for TTL, so many rollouts stepping at once cost one query.
type FreezeSource struct {
	Client client.Client
	// TTL: how long an answer is kept; 0 is 2s.
	TTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu   sync.Mutex
	last FleetFreezeResult
	at   time.Time
	ok   bool
}

// Get returns the fleet freeze: a cached answer younger than TTL, or a fresh one. No freeze
// workflow is no freeze.
func (s *FreezeSource) Get(ctx context.Context) (FleetFreezeResult, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ttl := s.TTL
	if ttl <= 0 {
		ttl = defaultFreezeTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok && now().Sub(s.at) < ttl {
		return s.last, nil
	}
	var f FleetFreezeResult
	v, err := s.Client.QueryWorkflow(ctx, FleetFreezeID, "", QueryFleetFreeze)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return f, fmt.Errorf("query %s: %w", FleetFreezeID, err)
	default:
		if err := v.Get(&f); err != nil {
			return f, fmt.Errorf("decode %s state: %w", FleetFreezeID, err)
		}
	}
	s.last, s.at, s.ok = f, now(), true
	return f, nil
}

// FleetFreeze returns the fleet freeze (a local activity; a worker without a FreezeSource
// knows of no freeze).
func (a *Activities) FleetFreeze(ctx context.Context) (FleetFreezeResult, error) {
	if a.Freeze == nil || a.Freeze.Client == nil {
		return FleetFreezeResult{}, nil
	}
	return a.Freeze.Get(ctx)
}
