package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPriorityLimiterOrder: with the burst spent, waiting requests get the tokens urgent first,
// at most urgentRun urgent in a row while ordinary ones wait, each lane in arrival order.
func TestPriorityLimiterOrder(t *testing.T) {
	tests := []struct {
		name string
		give string // the waiters, in arrival order: u urgent, o ordinary
		want string // the order they are let through
	}{
		{name: "urgent first", give: "ooouu", want: "uuooo"},
		{name: "ordinary keep one token in urgentRun+1", give: "oouuuuu", want: "uuuouuo"},
		{name: "ordinary only, first come first served", give: "ooo", want: "ooo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewPriorityLimiter(5, 1)
			defer l.Stop()
			if err := l.Wait(context.Background()); err != nil { // the burst
				t.Fatal(err)
			}
			var (
				mu  sync.Mutex
				got []string
				wg  sync.WaitGroup
			)
			for i, c := range tt.give {
				ctx := context.Background()
				if c == 'u' {
					ctx = Urgent(ctx)
				}
				name := fmt.Sprintf("%c%d", c, i)
				wg.Go(func() {
					if err := l.Wait(ctx); err != nil {
						t.Errorf("Wait(%s): %v", name, err)
					}
					mu.Lock()
					got = append(got, name)
					mu.Unlock()
				})
				// Arrive in order, well within the 200ms before the next token.
				waitQueued(t, l, i+1)
			}
			wg.Wait()
			var lanes string
			for _, g := range got {
				lanes += g[:1]
			}
			if lanes != tt.want {
				t.Errorf("let through %v (%s), want lanes %s", got, lanes, tt.want)
			}
		})
	}
}

// waitQueued waits until n requests wait in l.
func waitQueued(t *testing.T, l *PriorityLimiter, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		l.mu.Lock()
		q := len(l.lanes[0]) + len(l.lanes[1])
		l.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests waiting after 1s, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPriorityLimiterBudget: the budget is the token bucket's: the burst at once, then QPS.
func TestPriorityLimiterBudget(t *testing.T) {
	l := NewPriorityLimiter(10, 5)
	defer l.Stop()
	start := time.Now()
	for range 5 {
		if err := l.Wait(Urgent(context.Background())); err != nil {
			t.Fatal(err)
		}
	}
	// Throttled at 10/s, the burst would take 400ms.
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("the burst of 5 took %s, want it at once", d)
	}
	for range 3 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 3 more tokens at 10/s: 300ms.
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("8 requests at burst 5 and 10 QPS took %s, want at least 250ms", d)
	}
	if l.TryAccept() {
		t.Errorf("TryAccept right after the budget was spent = true")
	}
}

// TestPriorityLimiterCancel: a request whose context ends while it waits returns the context's
// error and leaves the queue; the others still get their tokens.
func TestPriorityLimiterCancel(t *testing.T) {
	l := NewPriorityLimiter(20, 1)
	defer l.Stop()
	_ = l.Wait(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(ctx) }()
	waitQueued(t, l, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait = %v, want context.Canceled", err)
	}
	l.mu.Lock()
	q := len(l.lanes[0]) + len(l.lanes[1])
	l.mu.Unlock()
	if q != 0 {
		t.Errorf("%d waiting after the cancel, want 0", q)
	}
	if err := l.Wait(context.Background()); err != nil {
		t.Errorf("Wait after a cancelled one: %v", err)
	}
}
