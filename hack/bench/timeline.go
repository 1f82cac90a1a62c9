package main

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// Timeline splits a phase (create or update) into three parts per Deployment, to tell where
// the time goes:
//
//   - React: from the phase's start until the controller's first ReplicaSet write for the
//     Deployment (a ReplicaSet created, or a spec change: its metadata.generation moved);
//   - Pods: from then until its ReplicaSets' own status says the rollout is done (the new
//     ReplicaSet's status.replicas and availableReplicas at replicas, no other pods): this is the
//     ReplicaSet controller, the scheduler and the pods, and the controller's further moves;
//   - Status: from then until the Deployment's status says so (kubectl rollout status).
//
// Each is in seconds, as the median and the maximum over the Deployments that completed; the
// three medians need not add up to the phase's time, whose last Deployment sets it.
type Timeline struct {
	Deployments int     `json:"deployments"`
	ReactMedian float64 `json:"reactMedian"`
	ReactMax    float64 `json:"reactMax"`
	PodsMedian  float64 `json:"podsMedian"`
	PodsMax     float64 `json:"podsMax"`
	// StatusMedian and StatusMax: the status's lag behind the ReplicaSets at the end.
	StatusMedian float64 `json:"statusMedian"`
	StatusMax    float64 `json:"statusMax"`
}

// timelineState keeps each tracked Deployment's milestones; it does no I/O.
type timelineState struct {
	begun   bool
	beginAt time.Time
	// want is the generation each tracked Deployment must reach.
	want map[string]int64
	// gens: every ReplicaSet's metadata.generation as last seen before the phase began (or
	// since), to tell a controller's spec write.
	gens                    map[string]int64
	reactAt, podsAt, doneAt map[string]time.Time
}

func newTimelineState(want map[string]int64) *timelineState {
	return &timelineState{want: want, gens: map[string]int64{},
		reactAt: map[string]time.Time{}, podsAt: map[string]time.Time{}, doneAt: map[string]time.Time{}}
}

func (t *timelineState) begin(at time.Time) {
	if !t.begun {
		t.begun, t.beginAt = true, at
	}
}

// onReplicaSet notes a ReplicaSet of Deployment dep as seen at `at`.
func (t *timelineState) onReplicaSet(dep string, rs *appsv1.ReplicaSet, at time.Time) {
	prev, seen := t.gens[rs.Name]
	t.gens[rs.Name] = rs.Generation
	if _, tracked := t.want[dep]; !tracked || !t.begun {
		return
	}
	if _, ok := t.reactAt[dep]; !ok && (!seen || rs.Generation > prev) {
		t.reactAt[dep] = at
	}
}

// onChange weighs Deployment d (nil: not seen yet) and its ReplicaSets after a change at `at`.
func (t *timelineState) onChange(name string, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, at time.Time) {
	want, tracked := t.want[name]
	if !tracked || !t.begun || d == nil || d.Generation < want {
		return
	}
	if _, ok := t.podsAt[name]; !ok {
		if countsComplete(replicasOf(d), expectedStatus(d, rss)) {
			t.podsAt[name] = at
		}
	}
	if _, ok := t.doneAt[name]; !ok && rolloutComplete(d, want) {
		t.doneAt[name] = at
	}
}

// summary is the Timeline of the Deployments that completed.
func (t *timelineState) summary() Timeline {
	var react, pods, status []float64
	for name := range t.want {
		done, ok := t.doneAt[name]
		if !ok {
			continue
		}
		reactAt, ok := t.reactAt[name]
		if !ok || reactAt.After(done) {
			reactAt = done
		}
		podsAt, ok := t.podsAt[name]
		if !ok || podsAt.After(done) {
			// The two watches deliver independently: a status seen before the ReplicaSet
			// event it derives from counts as no lag.
			podsAt = done
		}
		if podsAt.Before(reactAt) {
			podsAt = reactAt
		}
		react = append(react, max(0, reactAt.Sub(t.beginAt).Seconds()))
		pods = append(pods, podsAt.Sub(reactAt).Seconds())
		status = append(status, done.Sub(podsAt).Seconds())
	}
	for _, xs := range [][]float64{react, pods, status} {
		sort.Float64s(xs)
	}
	return Timeline{Deployments: len(react),
		ReactMedian: quantile(react, 0.5), ReactMax: quantile(react, 1),
		PodsMedian: quantile(pods, 0.5), PodsMax: quantile(pods, 1),
		StatusMedian: quantile(status, 0.5), StatusMax: quantile(status, 1)}
}
