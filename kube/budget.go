package kube

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// ErrBudgetBusy: a request marked IfBudgetWithin would have waited longer than it was worth
// for the client budget, and was not sent.
var ErrBudgetBusy = errors.New("client budget busy: request not sent")

type withinKey struct{}

// IfBudgetWithin marks the requests made with ctx as worth sending only if the client budget
// (QPS, burst) grants them a token within d: otherwise they fail at once with ErrBudgetBusy,
// unsent, and reserve nothing. For writes that another one makes redundant soon after: the
// watcher's status refresh of a new pod template, which the sync it wakes writes anyway. On a
// saturated budget (QPS 20, 100 Deployments given a new image at once) a refresh that queued
// only delayed the syncs' own writes, and the statuses those carry.
func IfBudgetWithin(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, withinKey{}, d)
}

// budget is client-go's token bucket, which takes IfBudgetWithin into account.
type budget struct {
	flowcontrol.RateLimiter
}

func newBudget(qps float32, burst int) *budget {
	return &budget{flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
}

// Wait waits for a token. A request marked IfBudgetWithin waits only if its token comes within
// the mark's time: the token bucket (golang.org/x/time/rate) tells at once, from the
// deadline, and then reserves nothing.
func (b *budget) Wait(ctx context.Context) error {
	d, ok := ctx.Value(withinKey{}).(time.Duration)
	if !ok {
		return b.RateLimiter.Wait(ctx)
	}
	if d <= 0 {
		if b.TryAccept() {
			return nil
		}
		return ErrBudgetBusy
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := b.RateLimiter.Wait(wctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrBudgetBusy
	}
	return nil
}
