package activities

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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

// A user's command (pause, a rollback's sync) writes through CommandClient; everything else
// through Client.
func TestCommandClient(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	main, commands := fake.NewClientset(d.DeepCopy()), fake.NewClientset(d.DeepCopy())
	a := &Activities{Client: main, CommandClient: commands}
	if _, err := a.SetPaused(context.Background(), SetPausedInput{Namespace: "default", Name: "web", Paused: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := len(commands.Actions()), 2; got != want || len(main.Actions()) != 0 {
		t.Errorf("SetPaused: %d actions on CommandClient, %d on Client; want %d (get, patch) and 0", got, len(main.Actions()), want)
	}
	tests := []struct {
		name    string
		command bool
		want    *fake.Clientset
	}{
		{name: "a command", command: true, want: commands},
		{name: "a sync", command: false, want: main},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.command {
				ctx = asCommand(ctx)
			}
			if got := a.client(ctx); got != tt.want {
				t.Errorf("client() = %p, want %p", got, tt.want)
			}
		})
	}
	// Without a CommandClient, commands use Client.
	if got := (&Activities{Client: main}).client(asCommand(context.Background())); got != main {
		t.Errorf("client() without CommandClient = %p, want Client", got)
	}
}
