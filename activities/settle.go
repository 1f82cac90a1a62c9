package activities

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// SettleInput names a Deployment whose plain rollout has converged, at the generation it
// converged at.
type SettleInput struct {
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid,omitempty"`
	Generation int64     `json:"generation,omitempty"`
	// Max bounds the wait.
	Max time.Duration `json:"max"`
}

// Settle reasons: why Settle returned.
const (
	// SettleQuiet: no other plain rollout of this worker is under way, or the worker's writes
	// to the cluster have stopped for settleQuiet.
	SettleQuiet = "Quiet"
	// SettleChanged: the Deployment is at another generation, or gone.
	SettleChanged = "Changed"
	// SettleMax: Max passed.
	SettleMax = "Max"
)

// SettleResult says why Settle returned and how long it waited.
type SettleResult struct {
	Reason string        `json:"reason"`
	Waited time.Duration `json:"waited"`
}

// settleQuiet: the worker's writes stopped this long count as the wave's end.
const settleQuiet = 200 * time.Millisecond

// Settle waits, after a plain rollout converged while other plain rollouts of this worker were
// under way (AwaitResult.OthersMoving), until they are done: none is under way, or the
// worker's writes to the cluster have stopped for settleQuiet. It also returns once its
// Deployment is at another generation or gone, and after Max. The rollout is complete on the
// cluster and in the workflow's status; what waits is only the workflow's continue-as-new and
// the next run's first task, two writes of the Temporal server's that would otherwise take CPU
// from the other rollouts' moves on a machine the server shares. See the workflow's
// settleBeforeContinue.
//
// It sends no heartbeat (a wait of at most Max): a worker that dies meanwhile is found by the
// activity's start-to-close timeout, and the run continues as new then.
func (a *Activities) Settle(ctx context.Context, in SettleInput) (SettleResult, error) {
	if in.Namespace == "" || in.Name == "" {
		return SettleResult{}, nonRetryable(ErrInvalid, "settle: namespace and name are required, got %q/%q", in.Namespace, in.Name)
	}
	start := time.Now()
	var wake <-chan struct{}
	if a.Cache != nil {
		w, stop := a.Cache.Subscribe(in.Namespace, in.Name)
		defer stop()
		wake = w
	}
	deadline := time.NewTimer(max(in.Max, 0))
	defer deadline.Stop()
	seen, at := a.writes.Load(), start
	done := func(reason string) (SettleResult, error) {
		return SettleResult{Reason: reason, Waited: time.Since(start).Round(time.Millisecond)}, nil
	}
	for {
		now := time.Now()
		if w := a.writes.Load(); w != seen {
			seen, at = w, now
		}
		quiet := now.Sub(at)
		if a.moving.Load() <= 0 || quiet >= settleQuiet {
			return done(SettleQuiet)
		}
		if a.settleChanged(in) {
			return done(SettleChanged)
		}
		t := time.NewTimer(settleQuiet - quiet)
		select {
		case <-ctx.Done():
			t.Stop()
			return SettleResult{}, ctx.Err()
		case <-deadline.C:
			t.Stop()
			return done(SettleMax)
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// settleChanged: the cache holds in's Deployment at another generation, or not at all.
func (a *Activities) settleChanged(in SettleInput) bool {
	if a.Cache == nil {
		return false
	}
	if a.Cache.DeploymentDeleted(in.UID) {
		return true
	}
	d, err := a.Cache.Deployment(in.Namespace, in.Name)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && ((in.UID != "" && d.UID != in.UID) || (in.Generation != 0 && d.Generation != in.Generation))
}
