package kube

import (
	"context"
	"errors"

	"k8s.io/client-go/util/flowcontrol"
)

// ErrBudgetBusy: a request marked IfBudgetFree found the client budget spent, and was not sent.
var ErrBudgetBusy = errors.New("client budget busy: request not sent")

type ifFreeKey struct{}

// IfBudgetFree marks the requests made with ctx as worth sending only while the client budget
// (QPS, burst) has a token free at once: instead of queuing behind other requests they fail
// with ErrBudgetBusy, unsent. For writes another one makes redundant soon after: the watcher's
// status refresh of a new pod template, which the sync it wakes writes anyway. On a saturated
// budget (QPS 20, 100 Deployments given a new image at once) queuing them only delayed the
// syncs' own writes, and the statuses those carry.
func IfBudgetFree(ctx context.Context) context.Context {
	return context.WithValue(ctx, ifFreeKey{}, true)
}

// budget is client-go's token bucket, with IfBudgetFree requests let through only by TryAccept.
type budget struct {
	flowcontrol.RateLimiter
}

func newBudget(qps float32, burst int) *budget {
	return &budget{flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
}

// Wait waits for a token, or for an IfBudgetFree request takes one only if it is free now.
// (The token bucket counts tokens that waiting requests reserved as taken: with anyone waiting,
// none is free.)
func (b *budget) Wait(ctx context.Context) error {
	if free, _ := ctx.Value(ifFreeKey{}).(bool); free {
		if b.TryAccept() {
			return nil
		}
		return ErrBudgetBusy
	}
	return b.RateLimiter.Wait(ctx)
}
