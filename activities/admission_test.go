package activities

import (
	"testing"
	"time"
)

type fakeBudget struct {
	backlog time.Duration
	qps     float32
}

func (b *fakeBudget) Backlog() time.Duration { return b.backlog }
func (b *fakeBudget) QPS() float32           { return b.qps }

// Moves go at once while the budget has a token free, one every writesPerMove tokens while a
// short queue waits, and wait past admitBacklog.
func TestAdmission(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		backlog time.Duration
		at      []time.Duration // moves seen at t0 + at
		want    []time.Duration
	}{
		{name: "budget free: every move at once", backlog: 0,
			at: []time.Duration{0, 0, 0}, want: []time.Duration{0, 0, 0}},
		// QPS 20: a move costs 2 tokens, 100ms.
		{name: "short queue: one move every 100ms", backlog: 200 * time.Millisecond,
			at:   []time.Duration{0, 0, 40 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond},
			want: []time.Duration{0, 100 * time.Millisecond, 60 * time.Millisecond, 0, 50 * time.Millisecond}},
		{name: "long queue: wait, at most 250ms at a time", backlog: 2 * time.Second,
			at: []time.Duration{0}, want: []time.Duration{250 * time.Millisecond}},
		{name: "just past the bound", backlog: admitBacklog + 50*time.Millisecond,
			at: []time.Duration{0}, want: []time.Duration{50 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ad := NewAdmission(&fakeBudget{backlog: tt.backlog, qps: 20})
			for i, at := range tt.at {
				if got := ad.Wait(t0.Add(at)); got != tt.want[i] {
					t.Errorf("move %d at +%s: Wait = %s, want %s", i, at, got, tt.want[i])
				}
			}
		})
	}
	if got := (*Admission)(nil).Wait(t0); got != 0 {
		t.Errorf("nil Admission: Wait = %s, want 0", got)
	}
}
