package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestBudgetWithin: an IfBudgetWithin request goes if its token comes within its time, and
// otherwise fails at once with ErrBudgetBusy, reserving nothing; ordinary requests wait as
// with client-go's token bucket.
func TestBudgetWithin(t *testing.T) {
	b := newBudget(10, 2)
	defer b.Stop()
	ctx := context.Background()
	for i := range 2 {
		if err := b.Wait(IfBudgetWithin(ctx, 0)); err != nil {
			t.Fatalf("request %d within the burst: %v", i, err)
		}
	}
	start := time.Now()
	if err := b.Wait(IfBudgetWithin(ctx, 20*time.Millisecond)); !errors.Is(err, ErrBudgetBusy) {
		t.Fatalf("request past the burst, its token 100ms away, willing to wait 20ms: %v, want ErrBudgetBusy", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("the refused request took %s, want it refused at once", d)
	}
	// Nothing was reserved: the next token is still about 100ms from the burst.
	if err := b.Wait(IfBudgetWithin(ctx, time.Second)); err != nil {
		t.Fatalf("request willing to wait 1s for a token 100ms away: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 150*time.Millisecond {
		t.Errorf("it went after %s, want about 100ms (10 QPS, nothing reserved by the refused one)", d)
	}
	start = time.Now()
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("ordinary request: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("ordinary request past the burst went after %s, want about 100ms (10 QPS)", d)
	}
}

// TestBudgetThroughClientGo: client-go hands the request's context to the budget, and a busy
// budget fails the request before it reaches the API server.
func TestBudgetThroughClientGo(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"prod"}}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, RateLimiter: newBudget(1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := IfBudgetWithin(context.Background(), 10*time.Millisecond)
	if _, err := cs.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err = cs.AppsV1().Deployments("prod").Get(ctx, "web", metav1.GetOptions{})
	if !errors.Is(err, ErrBudgetBusy) {
		t.Fatalf("second request: %v, want ErrBudgetBusy", err)
	}
	if got := served.Load(); got != 1 {
		t.Errorf("API server served %d requests, want 1", got)
	}
}

// Backlog is the wait a request sent now would have: nothing while a token is free, then the
// queued requests' tokens at the budget's rate.
func TestBudgetBacklog(t *testing.T) {
	tests := []struct {
		name     string
		qps      float32
		burst    int
		reserved int // tokens taken or reserved at once
		want     time.Duration
	}{
		{name: "tokens free", qps: 10, burst: 5, reserved: 3, want: 0},
		{name: "burst used up: the next token in 1/qps", qps: 10, burst: 5, reserved: 5, want: 100 * time.Millisecond},
		// QPS 20, burst 30, 40 requests queued past the burst: 2s, then one more token.
		{name: "queued past the burst", qps: 20, burst: 30, reserved: 70, want: 2050 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBudget(tt.qps, tt.burst)
			now := time.Now()
			for range tt.reserved {
				b.limiter.ReserveN(now, 1)
			}
			got := b.Backlog()
			// The bucket refills while the test runs: allow 30ms.
			if got > tt.want || got < tt.want-30*time.Millisecond {
				t.Errorf("Backlog() = %s, want %s (within 30ms below)", got, tt.want)
			}
		})
	}
	if BudgetOf(nil) != nil {
		t.Errorf("BudgetOf(nil) != nil")
	}
}
