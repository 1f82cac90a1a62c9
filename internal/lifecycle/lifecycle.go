// Package lifecycle bounds a long-running process's start and stop: each start-up wait retries
// for at most a set time, logging its progress, and the stop after SIGTERM (or after a failure)
// has a deadline past which the process exits non-zero naming the step that did not finish.
// A process that cannot start says why in one line and exits within seconds; it never hangs.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Stopper tracks the stop of a process: Step names each cleanup as it begins. The first Step
// starts the stop deadline (see Main).
type Stopper struct {
	mu      sync.Mutex
	step    string
	started chan struct{}
	once    sync.Once
}

// NewStopper returns a Stopper whose stop has not begun.
func NewStopper() *Stopper { return &Stopper{started: make(chan struct{})} }

// Step records that the cleanup named what begins; the first call starts the stop deadline.
func (s *Stopper) Step(what string) {
	s.mu.Lock()
	s.step = what
	s.mu.Unlock()
	s.once.Do(func() { close(s.started) })
}

// Current is the step under way ("" before the stop).
func (s *Stopper) Current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// Main runs run until it returns and turns the result into an exit code, with the stop bounded:
// once ctx ends (SIGTERM) or run's cleanup begins (its first Stopper.Step), run has timeout
// to return. Every failure is written to stderr as one line "NAME: ...": run's error (code 1),
// or a stop past its deadline naming the step under way (code 1). A clean return is code 0.
func Main(ctx context.Context, name string, timeout time.Duration, stderr io.Writer, run func(context.Context, *Stopper) error) int {
	s := NewStopper()
	done := make(chan error, 1)
	go func() { done <- run(ctx, s) }()
	select {
	case err := <-done:
		return exit(name, stderr, err)
	case <-ctx.Done():
	case <-s.started:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return exit(name, stderr, err)
	case <-t.C:
		step := s.Current()
		if step == "" {
			step = "the first cleanup never began"
		}
		fmt.Fprintf(stderr, "%s: stop did not finish within %s (stuck at: %s)\n", name, timeout, step)
		return 1
	}
}

func exit(name string, stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// permanent marks an error that retrying cannot fix (bad credentials, a refused request).
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that Wait returns it at once instead of retrying.
func Permanent(err error) error { return permanent{err} }

// Wait calls try until it succeeds, each attempt bounded by attempt, retrying every interval
// for at most timeout in all, and logs a failed attempt at most every 5s (the first one
// always). It fails naming what it waited for, how long, and the last error; an error that
// wraps ErrPermanent ends the wait at once.
func Wait(ctx context.Context, logger *slog.Logger, what string, timeout, attempt, interval time.Duration, try func(context.Context) error) error {
	start := time.Now()
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastLog time.Time
	// cause: the last attempt's own failure. An attempt that the end of the whole wait cut
	// short (a client's rate limiter waiting past it, say) fails with the deadline alone, which
	// says nothing of why the attempts before it failed.
	var cause error
	for n := 1; ; n++ {
		actx, acancel := context.WithTimeout(deadline, attempt)
		err := try(actx)
		acancel()
		if err != nil && deadline.Err() != nil && cause != nil && errors.Is(err, context.DeadlineExceeded) {
			err = cause
		}
		cause = err
		if err == nil {
			if n > 1 {
				logger.Info("Reached "+what, "after", time.Since(start).Round(time.Millisecond), "attempts", n)
			}
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return fmt.Errorf("%s: %w", what, p.err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: interrupted after %s: %w", what, time.Since(start).Round(time.Millisecond), err)
		}
		if deadline.Err() != nil {
			return fmt.Errorf("%s: still failing after %s (%d attempts; --startup-timeout): %w", what, timeout, n, err)
		}
		if lastLog.IsZero() || time.Since(lastLog) >= 5*time.Second {
			logger.Warn("Waiting for "+what, "attempt", n, "elapsed", time.Since(start).Round(time.Millisecond), "timeout", timeout, "error", err)
			lastLog = time.Now()
		}
		select {
		case <-deadline.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("%s: interrupted after %s: %w", what, time.Since(start).Round(time.Millisecond), err)
			}
			return fmt.Errorf("%s: still failing after %s (%d attempts; --startup-timeout): %w", what, timeout, n, err)
		case <-time.After(interval):
		}
	}
}
