package k8s

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// The traffic gate: the rules every write of an HTTPRoute rule, a Service selector or a header
// match keeps, in one place (docs/traffic.md, "The gate"). The activities that write routes
// and Services (activities/gate.go) pass every write through GateTraffic or GateSelector,
// weighed against the ReplicaSets they have just read; the wait (AwaitChange) asks the same
// question to know whether a sync would move the route. The rules:
//
//  1. No backend with weight above 0, and no header match, selects a template with no
//     available pod; the canary's weight stays within its share of the available pods (an
//     abort's canary, the fallback while the stable pods come back, excepted).
//  2. While returning to the stable template (an abort, the rollback signal, `kubectl rollout
//     undo`, a release's rollback, a blue-green abort: any sync that asks for no canary while
//     the canary Service still carries traffic), the outgoing canary's weight never rises above
//     what the route carries now (Argo Rollouts' min(desired, current) on abort).
//  3. The stable Service moves only to a template that is fully available.
//
// A write that would break one is not made: the gate returns the nearest route that keeps them
// and says why it holds (GateResult.Hold).

// GateInput is what the gate weighs: the route and Services as read just now, what the sync
// asks, and the pods.
type GateInput struct {
	// Cur is the traffic as the objects have it now; Want what the sync asks.
	Cur, Want TrafficState
	// Available is each template's available pods as just read (AvailablePods); Sizes its
	// replicas once the sync's plan has run (SizesAfter), nil when unknown. A template serves
	// min(Available, Sizes) pods through the sync: a ReplicaSet the plan scales down has lost
	// the traffic of its going pods already.
	Available, Sizes map[string]int32
	// Returning: the sync returns to the stable template (an abort); also inferred when Want
	// has no canary (Want.CanaryHash == Want.StableHash) while the canary Service carries
	// traffic on another template.
	Returning bool
	// Handover: every step passed and the plan takes the stable's last pods; the canary
	// takes all traffic first (TrafficHandover).
	Handover bool
}

// GateResult is the route the gate lets a sync write, the writes in order, and why it holds
// ("" when the route is as asked).
type GateResult struct {
	Want  TrafficState
	Moves []TrafficMove
	Hold  string
}

// Serving is a template's pods that serve through a sync: available now, and no more than the
// plan leaves it. A Service with no pod-template-hash ("") selects every pod of the
// Deployment: all templates' pods serve it.
func Serving(h string, available, sizes map[string]int32) int32 {
	if h == "" {
		var all int32
		for k := range available {
			if k != "" {
				all += Serving(k, available, sizes)
			}
		}
		return all
	}
	n := available[h]
	if s, ok := sizes[h]; ok && sizes != nil {
		n = min(n, s)
	}
	return max(n, 0)
}

// GateTraffic is the route a sync may write for what it asks, and the moves that take the
// route there (TrafficMoves), each checked (CheckServing); see the rules above.
//
//	setWeight 100 and paused (canary M 10 pods, stable N 0), the rollback signal to N (Want
//	  both on N at 0): the canary Service stays on M at 100 (AbortWeight(10, 0)), not the
//	  stable Service at 100 with no pod; as N's pods come back the canary's weight falls.
//	setCanaryScale 3 at weight 0, then abort (canary 3 pods, stable 10): 0, not
//	  AbortWeight(3, 10) = 24: the way back never raises the canary.
//	a new template M2 right after M completed while the workflow still takes N (0 pods) for
//	  the stable one: the stable Service stays on M (rule 3), the canary takes M2 at 0.
func GateTraffic(spec TrafficSpec, in GateInput) GateResult {
	cur, want := in.Cur, in.Want
	serve := func(h string) int32 { return Serving(h, in.Available, in.Sizes) }
	var holds []string
	canaryTraffic := cur.Route.CanaryWeight > 0 || len(cur.Route.HeaderRoutes) > 0

	// Rule 3: the stable Service moves only to a fully available template.
	if want.StableHash != cur.StableHash && cur.StableHash != "" && !FullyAvailable(want.StableHash, in.Available, in.Sizes) {
		if serve(cur.StableHash) > 0 || serve(want.StableHash) <= 0 {
			holds = append(holds, fmt.Sprintf("stable Service %s stays on %s: template %s has %d of %d pods available",
				spec.StableService, cur.StableHash, want.StableHash, in.Available[want.StableHash], sizeOf(want.StableHash, in.Available, in.Sizes)))
			if want.CanaryHash == want.StableHash {
				// What would have been stable is the canary's until it is fully available: it
				// keeps what its pods carry.
				want.Route = RouteState{CanaryWeight: 100}
			}
			want.StableHash = cur.StableHash
		}
	}

	// Rule 2: returning to the stable template.
	returning := in.Returning || (want.CanaryHash == want.StableHash && cur.CanaryHash != want.StableHash && canaryTraffic)
	if returning && cur.CanaryHash != "" && cur.CanaryHash != want.StableHash && canaryTraffic && serve(cur.CanaryHash) > 0 {
		// The canary Service keeps the outgoing pods while they carry traffic the stable pods
		// cannot take yet.
		want.CanaryHash = cur.CanaryHash
		want.Route.HeaderRoutes = nil
	}
	stable, canary := want.StableHash, want.CanaryHash
	if stable == canary {
		want.Route = RouteState{}
	}
	w := max(min(want.Route.CanaryWeight, 100), 0)
	if returning && stable != canary {
		w = AbortWeight(serve(canary), serve(stable))
	}

	// Rule 1: weight only where pods serve, the canary within its share.
	if stable != canary {
		sC, sS := serve(canary), serve(stable)
		switch {
		case sC <= 0 && sS <= 0:
			// Nothing can serve either side: leave the weights as they are.
			if !(cur.StableHash == stable && cur.CanaryHash == canary) || w != cur.Route.CanaryWeight {
				holds = append(holds, fmt.Sprintf("neither %s nor %s has an available pod", stable, canary))
			}
			w = cur.Route.CanaryWeight
		case sC <= 0:
			w = 0
		case sS <= 0:
			w = 100
		case !returning && !in.Handover:
			if share := int32(100 * int64(sC) / (int64(sC) + int64(sS))); w > share {
				w = share
			}
		}
		if sC <= 0 && len(want.Route.HeaderRoutes) > 0 {
			holds = append(holds, fmt.Sprintf("header routes wait for an available pod of %s", canary))
			want.Route.HeaderRoutes = nil
		}
	}
	// Rule 2: on the way back the canary's weight never rises (unless the stable side has no
	// pod at all, where the rise is the only way to serve).
	if returning && w > cur.Route.CanaryWeight && serve(stable) > 0 {
		w = cur.Route.CanaryWeight
		if cur.CanaryHash != canary && stable != canary {
			w = 0
		}
	}
	want.Route.CanaryWeight = w

	// Each move keeps rule 1; the first that does not is not made, nor any after it.
	res := GateResult{Want: want}
	st := cur
	for _, m := range TrafficMoves(spec, cur, want) {
		next := st.Moved(spec, m)
		if err := CheckServing(spec, next, in.Available, in.Sizes); err != "" && m.Route != nil &&
			CheckServing(spec, st, in.Available, in.Sizes) == "" {
			holds = append(holds, "not moved: "+err)
			res.Want = st
			break
		}
		res.Moves = append(res.Moves, m)
		st = next
	}
	res.Hold = strings.Join(holds, "; ")
	return res
}

// Moved is the traffic once move m is written: the route, or one Service's selector.
func (st TrafficState) Moved(spec TrafficSpec, m TrafficMove) TrafficState {
	switch {
	case m.Route != nil:
		st.Route = *m.Route
	case m.Service == spec.StableService:
		st.StableHash = m.Hash
	default:
		st.CanaryHash = m.Hash
	}
	return st
}

// CheckServing reports ("" when none) a backend with weight, or a header route, on a template
// with no serving pod. Both Services on one template, or neither template with a pod, pass.
func CheckServing(spec TrafficSpec, st TrafficState, available, sizes map[string]int32) string {
	sS, sC := Serving(st.StableHash, available, sizes), Serving(st.CanaryHash, available, sizes)
	if st.StableHash == st.CanaryHash || sS+sC <= 0 {
		return ""
	}
	var errs []string
	if w := 100 - st.Route.CanaryWeight; w > 0 && sS <= 0 {
		errs = append(errs, fmt.Sprintf("%s would take %d%% of the traffic with no available pod of %s", spec.StableService, w, st.StableHash))
	}
	if w := st.Route.CanaryWeight; sC <= 0 && (w > 0 || len(st.Route.HeaderRoutes) > 0) {
		errs = append(errs, fmt.Sprintf("%s would take %d%% of the traffic (and %d header routes) with no available pod of %s", spec.CanaryService, w, len(st.Route.HeaderRoutes), st.CanaryHash))
	}
	return strings.Join(errs, "; ")
}

// FullyAvailable reports whether template h has every pod it runs available, and at least
// one: its available pods reach its size (after the plan when Sizes knows it, otherwise as
// Available alone says, any pod).
func FullyAvailable(h string, available, sizes map[string]int32) bool {
	if h == "" || available[h] <= 0 {
		return false
	}
	return available[h] >= sizeOf(h, available, sizes)
}

func sizeOf(h string, available, sizes map[string]int32) int32 {
	if s, ok := sizes[h]; ok && sizes != nil {
		return s
	}
	return available[h]
}

// GateSelector is the one check for a Service whose selector a blue-green rollout moves: the
// active Service (active) moves only to a fully available template, the preview one to any
// template. It says why not ("" when the move may be made).
func GateSelector(service, to string, active bool, available, sizes map[string]int32) string {
	if !active || FullyAvailable(to, available, sizes) {
		return ""
	}
	return fmt.Sprintf("active Service %s does not move to %s: %d of %d pods available", service, to, available[to], sizeOf(to, available, sizes))
}

// StableAnnotation records on the Deployment the pod-template-hash of the template that last
// completed, the stable one: written with the status that completes a rollout (as Argo
// Rollouts writes status.stableRS in the status update that completes one), read back by every
// later decision (StableTemplate), so a discarded or replayed workflow task cannot lose it.
const StableAnnotation = "temporal-rollout.io/stable-pod-template-hash"

// StableTemplate is the stable template as the cluster shows it: the StableAnnotation's hash
// when a ReplicaSet of it exists, otherwise known (the template the run took for the stable
// one, "" when none). A completion that was never recorded (the next template arrived as the
// old pods went) shows on the ReplicaSets: the recorded template has no pod left while another,
// newer one that is not the Deployment's current template runs all replicas available; that
// one completed, and is the stable one. "" when neither the annotation nor known names a
// ReplicaSet.
//
//	recorded N (0 pods), M at 10 of 10 available, the Deployment now on M2: M
//	recorded N (10 pods), M at 3 (a canary), now on M2: N
func StableTemplate(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, current, known string) string {
	find := func(h string) *appsv1.ReplicaSet {
		for _, rs := range rss {
			if h != "" && rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h {
				return rs
			}
		}
		return nil
	}
	rec := d.Annotations[StableAnnotation]
	recRS := find(rec)
	if recRS == nil {
		rec, recRS = known, find(known)
	}
	if recRS == nil {
		return ""
	}
	if rec == current || rsReplicas(recRS) > 0 || recRS.Status.AvailableReplicas > 0 {
		return rec
	}
	n := replicas(d)
	recRev, _ := Revision(recRS.Annotations)
	best, bestRev := rec, recRev
	for _, rs := range rss {
		h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if h == "" || h == current || h == rec {
			continue
		}
		rev, _ := Revision(rs.Annotations)
		if n > 0 && rsReplicas(rs) >= n && rs.Status.AvailableReplicas >= n && rev > bestRev {
			best, bestRev = h, rev
		}
	}
	return best
}

// HeldAtRest reports whether a stepped or blue-green rollout is held at rest on the cluster:
// its status, written for the Deployment's current generation, says it waits at a step
// (Progressing CanaryPaused), and every ReplicaSet has settled (all its pods created,
// ready and available, none terminating, its spec observed). Nothing moves without a change
// from outside (a user's edit, a pod that dies, a command), which the watcher signals; the
// workflow then waits with no activity, at no cost in heartbeats (docs/capacity.md).
func HeldAtRest(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) bool {
	if d.DeletionTimestamp != nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	c := GetCondition(d.Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != CanaryPausedReason {
		return false
	}
	for _, rs := range rss {
		if !Settled(rs) {
			return false
		}
	}
	return true
}

// Settled reports whether a ReplicaSet's pods are as its spec asks: its generation observed,
// as many pods as replicas, all ready and available, none terminating.
func Settled(rs *appsv1.ReplicaSet) bool {
	n := rsReplicas(rs)
	st := rs.Status
	return rs.DeletionTimestamp == nil && st.ObservedGeneration >= rs.Generation &&
		st.Replicas == n && st.ReadyReplicas == n && st.AvailableReplicas == n &&
		(st.TerminatingReplicas == nil || *st.TerminatingReplicas == 0)
}
