package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestMainExitCodes(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), "worker", time.Second, &out, func(context.Context, *Stopper) error { return nil }); code != 0 || out.Len() != 0 {
		t.Errorf("clean return: code %d, stderr %q; want 0 and nothing", code, out.String())
	}
	out.Reset()
	code := Main(context.Background(), "worker", time.Second, &out, func(context.Context, *Stopper) error {
		return errors.New("listen on :9090 for metrics: address already in use")
	})
	if code != 1 || out.String() != "worker: listen on :9090 for metrics: address already in use\n" {
		t.Errorf("failure: code %d, stderr %q", code, out.String())
	}
}

// A cleanup that hangs after a start-up failure (the informer shutdown of issue 10) ends the
// process past the deadline, naming the step.
func TestMainBoundsAHungCleanup(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), "worker", 200*time.Millisecond, &out, func(_ context.Context, s *Stopper) error {
		s.Step("stop the informers")
		select {} // never returns
	})
	if took := time.Since(start); code != 1 || took > 2*time.Second {
		t.Errorf("code %d after %s, want 1 within about 200ms", code, took)
	}
	if want := "worker: stop did not finish within 200ms (stuck at: stop the informers)\n"; out.String() != want {
		t.Errorf("stderr %q, want %q", out.String(), want)
	}
}

// SIGTERM (ctx ending) starts the deadline even before any Step.
func TestMainBoundsTheStopAfterTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	code := Main(ctx, "watcher", 100*time.Millisecond, &out, func(ctx context.Context, s *Stopper) error {
		<-ctx.Done()
		select {}
	})
	if code != 1 || !strings.Contains(out.String(), "stuck at: the first cleanup never began") {
		t.Errorf("code %d, stderr %q", code, out.String())
	}
	// A stop within the bound is a clean exit.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	out.Reset()
	code = Main(ctx, "watcher", time.Second, &out, func(ctx context.Context, s *Stopper) error {
		<-ctx.Done()
		s.Step("stop the worker")
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	if code != 0 || out.Len() != 0 {
		t.Errorf("prompt stop: code %d, stderr %q", code, out.String())
	}
}

func TestWait(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	n := 0
	err := Wait(context.Background(), logger, "the Kubernetes API server", time.Second, 100*time.Millisecond, 10*time.Millisecond, func(context.Context) error {
		if n++; n < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Wait = %v after %d attempts, want success on the third", err, n)
	}
	if !strings.Contains(logs.String(), "Waiting for the Kubernetes API server") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("no progress logged: %s", logs.String())
	}

	start := time.Now()
	err = Wait(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "Temporal at 127.0.0.1:1", 300*time.Millisecond, 50*time.Millisecond, 20*time.Millisecond, func(context.Context) error {
		return errors.New("connection refused")
	})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Wait = %v after %s, want a failure after about 300ms", err, time.Since(start))
	}
	if !strings.HasPrefix(err.Error(), "Temporal at 127.0.0.1:1: still failing after 300ms") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not name what failed, the bound and the cause", err)
	}

	// The last attempt, cut short by the end of the wait (a rate limiter waiting past it),
	// does not hide why the attempts before it failed.
	n = 0
	err = Wait(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "the Kubernetes API server", 200*time.Millisecond, time.Second, 10*time.Millisecond, func(ctx context.Context) error {
		if n++; n == 1 {
			return errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
		}
		<-ctx.Done()
		return fmt.Errorf("client rate limiter Wait returned an error: %w", ctx.Err())
	})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("last attempt cut short: %v, want the cause of the attempts before it", err)
	}

	// An attempt that blocks is cut off by the attempt bound.
	start = time.Now()
	err = Wait(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "x", 200*time.Millisecond, 50*time.Millisecond, 10*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("blocking attempts: %v after %s", err, time.Since(start))
	}

	n = 0
	err = Wait(context.Background(), logger, "the Kubernetes API server", time.Minute, time.Second, 10*time.Millisecond, func(context.Context) error {
		n++
		return Permanent(errors.New("Unauthorized"))
	})
	if n != 1 || err == nil || err.Error() != "the Kubernetes API server: Unauthorized" {
		t.Errorf("permanent error: %v after %d attempts, want one attempt and the cause", err, n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Wait(ctx, logger, "x", time.Minute, time.Second, time.Second, func(context.Context) error { return errors.New("no") })
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("cancelled: %v, want interrupted", err)
	}
}
