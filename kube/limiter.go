package kube

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
)

// urgentKey marks a request context as urgent (see Urgent).
type urgentKey struct{}

// Urgent marks the requests made with ctx as urgent for the client's rate limiter: while
// requests wait for the budget, urgent ones take the next token first (see PriorityLimiter).
// We mark Deployment status writes: they are what `kubectl get deploy` and `kubectl rollout
// status` show, one small write each, and at a low budget they would otherwise queue behind
// every other Deployment's scaling moves.
func Urgent(ctx context.Context) context.Context { return context.WithValue(ctx, urgentKey{}, true) }

func isUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// urgentRun bounds how many urgent requests in a row take the budget while others wait: with
// 3, ordinary requests keep at least a quarter of a saturated budget (a burst of ReplicaSet
// status changes, each asking for a status refresh, cannot hold the scaling moves back).
const urgentRun = 3

// PriorityLimiter is client-go's token bucket (QPS, burst) with two lanes: when requests wait
// for a token, an urgent one (Urgent) gets it before the ordinary ones, up to urgentRun in a
// row; within a lane, first come first served, as client-go's limiter. With no one waiting it
// is the plain token bucket, so the budget itself (QPS and burst) is unchanged.
//
// Worked example, QPS 20 / burst 30, 100 Deployments given a new image at once: each needs a
// status write (updatedReplicas 0) and then a ReplicaSet create, a scale-down and a status
// write. First come first served, the last status write waits behind all 300 others, 13.5 s;
// urgent first, the 100 status refreshes are written within (100−30)/20 = 3.5 s.
type PriorityLimiter struct {
	lim *rate.Limiter
	qps float32

	mu      sync.Mutex
	lanes   [2][]chan struct{} // 0: urgent, 1: ordinary
	run     int                // urgent tokens given in a row while ordinary requests waited
	waiting chan struct{}      // wakes the dispatcher (capacity 1)
	stop    chan struct{}
	once    sync.Once
}

var _ flowcontrol.RateLimiter = (*PriorityLimiter)(nil)

// NewPriorityLimiter starts a limiter of qps tokens per second and burst; Stop ends it.
func NewPriorityLimiter(qps float32, burst int) *PriorityLimiter {
	l := &PriorityLimiter{
		lim:     rate.NewLimiter(rate.Limit(qps), burst),
		qps:     qps,
		waiting: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	go l.dispatch()
	return l
}

// Wait blocks until the request may go, or ctx ends.
func (l *PriorityLimiter) Wait(ctx context.Context) error {
	lane := 1
	if isUrgent(ctx) {
		lane = 0
	}
	ready := make(chan struct{})
	l.mu.Lock()
	l.lanes[lane] = append(l.lanes[lane], ready)
	l.mu.Unlock()
	select {
	case l.waiting <- struct{}{}:
	default:
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, c := range l.lanes[lane] {
			if c == ready {
				l.lanes[lane] = append(l.lanes[lane][:i:i], l.lanes[lane][i+1:]...)
				return ctx.Err()
			}
		}
		// Given a token meanwhile: the request may go.
		return nil
	case <-l.stop:
		return context.Canceled
	}
}

// dispatch hands out tokens, one at a time, to the next waiter by lane.
func (l *PriorityLimiter) dispatch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	for {
		if !l.hasWaiters() {
			select {
			case <-l.waiting:
				continue
			case <-l.stop:
				return
			}
		}
		if err := l.lim.Wait(ctx); err != nil {
			return
		}
		if next := l.next(); next != nil {
			close(next)
		}
	}
}

func (l *PriorityLimiter) hasWaiters() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lanes[0])+len(l.lanes[1]) > 0
}

// next pops the waiter the token goes to: urgent first, but not more than urgentRun in a row
// while ordinary requests wait.
func (l *PriorityLimiter) next() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	lane := 1
	switch {
	case len(l.lanes[0]) > 0 && (len(l.lanes[1]) == 0 || l.run < urgentRun):
		lane = 0
		if len(l.lanes[1]) > 0 {
			l.run++
		}
	case len(l.lanes[1]) > 0:
		l.run = 0
	default:
		return nil
	}
	c := l.lanes[lane][0]
	l.lanes[lane] = l.lanes[lane][1:]
	return c
}

// TryAccept takes a token if one is free and no one waits for it.
func (l *PriorityLimiter) TryAccept() bool {
	if l.hasWaiters() {
		return false
	}
	return l.lim.Allow()
}

// Accept blocks until an ordinary request may go.
func (l *PriorityLimiter) Accept() { _ = l.Wait(context.Background()) }

// QPS is the limiter's rate.
func (l *PriorityLimiter) QPS() float32 { return l.qps }

// Stop ends the dispatcher; waiters return.
func (l *PriorityLimiter) Stop() { l.once.Do(func() { close(l.stop) }) }
