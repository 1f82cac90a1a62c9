package kube

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
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

// budget is client-go's token bucket (golang.org/x/time/rate, as flowcontrol's
// NewTokenBucketRateLimiter builds it), which takes IfBudgetWithin into account and tells how
// deep its queue is (Backlog).
type budget struct {
	limiter *rate.Limiter
	qps     float32
}

func newBudget(qps float32, burst int) *budget {
	return &budget{limiter: rate.NewLimiter(rate.Limit(qps), burst), qps: qps}
}

// TryAccept takes a token if one is free now.
func (b *budget) TryAccept() bool { return b.limiter.Allow() }

// Accept waits for a token.
func (b *budget) Accept() {
	r := b.limiter.Reserve()
	time.Sleep(r.Delay())
}

// Stop does nothing: the bucket holds no goroutine.
func (b *budget) Stop() {}

// QPS is the budget's rate.
func (b *budget) QPS() float32 { return b.qps }

// Backlog is how long a request sent now would wait for its token: 0 while the bucket has one
// free; with requests queued, their tokens' time. QPS 20, burst 30, 40 requests waiting: 2s.
func (b *budget) Backlog() time.Duration {
	t := b.limiter.Tokens()
	if t >= 1 || b.qps <= 0 {
		return 0
	}
	return time.Duration((1 - t) / float64(b.qps) * float64(time.Second))
}

// Wait waits for a token. A request marked IfBudgetWithin waits only if its token comes within
// the mark's time: the token bucket tells at once, from the deadline, and then reserves
// nothing.
func (b *budget) Wait(ctx context.Context) error {
	d, ok := ctx.Value(withinKey{}).(time.Duration)
	if !ok {
		return b.limiter.Wait(ctx)
	}
	if d <= 0 {
		if b.TryAccept() {
			return nil
		}
		return ErrBudgetBusy
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := b.limiter.Wait(wctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrBudgetBusy
	}
	return nil
}

// Budget is a clientset's client budget, as BudgetOf finds it.
type Budget interface {
	// Backlog is how long a request sent now would wait for its token.
	Backlog() time.Duration
	// QPS is the budget's rate.
	QPS() float32
}

// BudgetOf is the budget of a rest.Config made by NewClientset (nil for any other).
func BudgetOf(cfg *rest.Config) Budget {
	if cfg == nil {
		return nil
	}
	if b, ok := cfg.RateLimiter.(*budget); ok {
		return b
	}
	return nil
}
