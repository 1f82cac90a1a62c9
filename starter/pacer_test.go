package main

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(100*time.Millisecond, time.Second, 4*time.Second)
	tests := []struct {
		name      string
		giveAt    time.Duration // change at t0+giveAt
		signal    bool          // the signal goes out after the delay
		wantDelay time.Duration
	}{
		{name: "quiet key: coalesce only", giveAt: 0, signal: true, wantDelay: 100 * time.Millisecond},
		{name: "second signal 1s after the first", giveAt: 200 * time.Millisecond, signal: true, wantDelay: 900 * time.Millisecond},
		{name: "third 2s after the second", giveAt: 1200 * time.Millisecond, signal: true, wantDelay: 1900 * time.Millisecond},
		{name: "fourth 4s after the third", giveAt: 3200 * time.Millisecond, signal: true, wantDelay: 3900 * time.Millisecond},
		{name: "capped at 4s", giveAt: 7200 * time.Millisecond, signal: true, wantDelay: 3900 * time.Millisecond},
		{name: "late change waits only the coalesce", giveAt: 15 * time.Second, signal: false, wantDelay: 100 * time.Millisecond},
		{name: "quiet for 2x max starts over", giveAt: 30 * time.Second, signal: true, wantDelay: 100 * time.Millisecond},
		{name: "then 1s again", giveAt: 30200 * time.Millisecond, signal: false, wantDelay: 900 * time.Millisecond},
	}
	for _, tt := range tests {
		now := t0.Add(tt.giveAt)
		got := p.delay("ns/web", now)
		if got != tt.wantDelay {
			t.Errorf("%s: delay = %s, want %s", tt.name, got, tt.wantDelay)
		}
		if tt.signal {
			p.signalled("ns/web", now.Add(got))
		}
	}
	if got := p.delay("ns/other", t0); got != 100*time.Millisecond {
		t.Errorf("other key delay = %s, want the coalesce", got)
	}
}
