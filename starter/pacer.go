package main

import (
	"sync"
	"time"
)

// pacer spaces the trigger signals of each Deployment. The first change of a quiet Deployment
// is signalled after `coalesce`; during a burst the spacing starts at `base` and doubles with
// each signal up to `max`. A Deployment that has not been signalled for 2×max starts over.
//
// Each signal costs the workflow a few history events whether or not the change matters, so a
// rollout that takes long (one held back by the API server's rate limits, say) gets a bounded
// number of syncs: with base 1s and max 8s, a 35s rollout gets about 7 signals, not 35.
type pacer struct {
	coalesce, base, max time.Duration
	// status is the spacing of signals that would only refresh status counts (statusDelay).
	status time.Duration

	mu   sync.Mutex
	keys map[string]paced
}

type paced struct {
	at time.Time // last signal
	n  int       // signals in the current burst
}

func newPacer(coalesce, base, max, status time.Duration) *pacer {
	return &pacer{coalesce: coalesce, base: base, max: max, status: status, keys: map[string]paced{}}
}

// interval is the spacing after the n-th signal of a burst.
func (p *pacer) interval(n int) time.Duration {
	d := p.base
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	return min(d, p.max)
}

// delay is how long a change to key waits before its signal.
func (p *pacer) delay(key string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.keys[key]
	if !ok || now.Sub(k.at) > 2*p.max {
		return p.coalesce
	}
	return max(p.coalesce, k.at.Add(p.interval(k.n)).Sub(now))
}

// statusDelay is how long a change that would only refresh status counts waits: until
// `status` after the key's last signal (or `status` from now when none is known), and never
// less than delay.
func (p *pacer) statusDelay(key string, now time.Time) time.Duration {
	d := p.delay(key, now)
	p.mu.Lock()
	k, ok := p.keys[key]
	p.mu.Unlock()
	wait := p.status
	if ok {
		wait = k.at.Add(p.status).Sub(now)
	}
	return max(d, wait)
}

// signalled records a signal sent at now.
func (p *pacer) signalled(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.keys[key]
	if !ok || now.Sub(k.at) > 2*p.max {
		k.n = 0
	}
	k.at, k.n = now, k.n+1
	p.keys[key] = k
	if len(p.keys) > 4096 {
		for key, k := range p.keys {
			if now.Sub(k.at) > 2*p.max {
				delete(p.keys, key)
			}
		}
	}
}
