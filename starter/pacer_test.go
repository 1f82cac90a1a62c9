package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(100*time.Millisecond, time.Second, 4*time.Second, 30*time.Second)
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

func TestReplicaSetChanged(t *testing.T) {
	n := func(i int32) *int32 { return &i }
	base := func() *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", ResourceVersion: "1", Labels: map[string]string{"app": "web"}},
			Spec:       appsv1.ReplicaSetSpec{Replicas: n(3)},
			Status:     appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1, FullyLabeledReplicas: 3},
		}
	}
	tests := []struct {
		name string
		give func(rs *appsv1.ReplicaSet)
		want bool
	}{
		{name: "resync, same version", give: func(rs *appsv1.ReplicaSet) { rs.ResourceVersion = "1" }, want: false},
		{name: "observedGeneration only", give: func(rs *appsv1.ReplicaSet) { rs.Status.ObservedGeneration = 2 }, want: false},
		{name: "fullyLabeledReplicas only", give: func(rs *appsv1.ReplicaSet) { rs.Status.FullyLabeledReplicas = 2 }, want: false},
		{name: "observedGeneration at 0 replicas (cleanup)", give: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = n(0); rs.Status.ObservedGeneration = 2 }, want: true},
		{name: "ready", give: func(rs *appsv1.ReplicaSet) { rs.Status.ReadyReplicas = 3 }, want: true},
		{name: "available", give: func(rs *appsv1.ReplicaSet) { rs.Status.AvailableReplicas = 3 }, want: true},
		{name: "terminating", give: func(rs *appsv1.ReplicaSet) { rs.Status.TerminatingReplicas = n(1) }, want: true},
		{name: "spec", give: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = n(5) }, want: true},
		{name: "labels", give: func(rs *appsv1.ReplicaSet) { rs.Labels["app"] = "other" }, want: true},
		{name: "failure condition", give: func(rs *appsv1.ReplicaSet) {
			rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: "True"}}
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, nw := base(), base()
			nw.ResourceVersion = "2"
			tt.give(nw)
			if got := replicaSetChanged(o, nw); got != tt.want {
				t.Errorf("replicaSetChanged = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestWrittenOnlyBy(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	t2 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC))
	entry := func(m, sub string, at metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: sub, Time: &at}
	}
	old := []metav1.ManagedFieldsEntry{entry("ours", "", t1), entry("kcm", "status", t1)}
	tests := []struct {
		name string
		give []metav1.ManagedFieldsEntry
		want bool
	}{
		{name: "our entry moved", give: []metav1.ManagedFieldsEntry{entry("ours", "", t2), entry("kcm", "status", t1)}, want: true},
		{name: "status writer moved too", give: []metav1.ManagedFieldsEntry{entry("ours", "", t2), entry("kcm", "status", t2)}, want: false},
		{name: "someone else", give: []metav1.ManagedFieldsEntry{entry("ours", "", t1), entry("kcm", "status", t1), entry("kubectl", "", t2)}, want: false},
		{name: "nothing moved", give: old, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: old}}
			n := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.give}}
			if got := writtenOnlyBy(o, n, "ours"); got != tt.want {
				t.Errorf("writtenOnlyBy = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestPacerStatusDelay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(100*time.Millisecond, time.Second, 8*time.Second, 30*time.Second)
	if got, want := p.statusDelay("ns/web", t0), 30*time.Second; got != want {
		t.Errorf("never signalled: statusDelay = %s, want %s", got, want)
	}
	p.signalled("ns/web", t0)
	tests := []struct {
		name string
		give time.Duration // since the last signal
		want time.Duration
	}{
		{name: "just after a signal: the rest of the interval", give: 2 * time.Second, want: 28 * time.Second},
		{name: "late in the interval", give: 29 * time.Second, want: time.Second},
		// The pacer's own spacing (1s after the first signal of a burst) is the floor.
		{name: "past the interval: paced as any change", give: 31 * time.Second, want: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := p.statusDelay("ns/web", t0.Add(tt.give)); got != tt.want {
			t.Errorf("%s: statusDelay = %s, want %s", tt.name, got, tt.want)
		}
	}
}
