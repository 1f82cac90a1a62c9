package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TrafficAnnotation routes a stepped rollout's traffic with a Gateway API HTTPRoute:
//
//	{"httpRoute":{"name":"web","rule":0},"stableService":"web-stable","canaryService":"web-canary"}
//
// The route and both Services live in the Deployment's namespace. The workflow points the
// stable Service's selector at the stable ReplicaSet's pod-template-hash and the canary
// Service's at the new one's, and moves the weights of the rule's two backendRefs (see
// TrafficWeight). See docs/traffic.md.
const TrafficAnnotation = "temporal-rollout.io/traffic"

// maxHeaderRoutes bounds the rules setHeaderRoute adds (an HTTPRoute holds at most 16).
const maxHeaderRoutes = 8

// TrafficSpec is the traffic annotation's value.
type TrafficSpec struct {
	HTTPRoute     HTTPRouteRef `json:"httpRoute"`
	StableService string       `json:"stableService"`
	CanaryService string       `json:"canaryService"`
}

// HTTPRouteRef names an HTTPRoute and the index of the rule whose backendRefs carry the
// weights (0 when left out).
type HTTPRouteRef struct {
	Name string `json:"name"`
	Rule int    `json:"rule,omitempty"`
}

// HeaderRoute is a setHeaderRoute step: requests that match every header go to the canary
// Service, in a rule of their own. No match removes the route of that name.
type HeaderRoute struct {
	Name  string        `json:"name"`
	Match []HeaderMatch `json:"match,omitempty"`
}

// HeaderMatch matches one HTTP header, as the Gateway API's HTTPHeaderMatch: Type "Exact"
// (the default) or "RegularExpression".
type HeaderMatch struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Type  string `json:"type,omitempty"`
}

// Header match types.
const (
	HeaderMatchExact = "Exact"
	HeaderMatchRegex = "RegularExpression"
)

// CanaryScale is a setCanaryScale step, as Argo Rollouts': the canary ReplicaSet runs
// Replicas pods, or Weight% of replicas (rounded up), whatever the traffic weight; with
// MatchTrafficWeight it follows the weight again. Exactly one is set.
type CanaryScale struct {
	Replicas           *int32 `json:"replicas,omitempty"`
	Weight             *int32 `json:"weight,omitempty"`
	MatchTrafficWeight bool   `json:"matchTrafficWeight,omitempty"`
}

// replicasOf is the canary's pods out of replicas: Replicas (at most replicas) or
// WeightReplicas(Weight).
func (c *CanaryScale) replicasOf(replicas int32) int32 {
	switch {
	case c.Replicas != nil:
		return max(min(*c.Replicas, replicas), 0)
	case c.Weight != nil:
		return WeightReplicas(*c.Weight, replicas)
	}
	return 0
}

func (c *CanaryScale) String() string {
	switch {
	case c.Replicas != nil:
		return fmt.Sprintf("%d replicas", *c.Replicas)
	case c.Weight != nil:
		return fmt.Sprintf("%d%% of replicas", *c.Weight)
	}
	return "matching the traffic weight"
}

func (c *CanaryScale) validate() error {
	set := 0
	for _, b := range []bool{c.Replicas != nil, c.Weight != nil, c.MatchTrafficWeight} {
		if b {
			set++
		}
	}
	var errs []error
	if set != 1 {
		errs = append(errs, fmt.Errorf("setCanaryScale has exactly one of replicas, weight or matchTrafficWeight, this one has %d", set))
	}
	if c.Replicas != nil && *c.Replicas < 0 {
		errs = append(errs, fmt.Errorf("setCanaryScale replicas %d is negative", *c.Replicas))
	}
	if c.Weight != nil && (*c.Weight < 0 || *c.Weight > 100) {
		errs = append(errs, fmt.Errorf("setCanaryScale weight %d is not between 0 and 100", *c.Weight))
	}
	return errors.Join(errs...)
}

func (h *HeaderRoute) String() string {
	if len(h.Match) == 0 {
		return "removing header route " + h.Name
	}
	parts := make([]string, len(h.Match))
	for i, m := range h.Match {
		parts[i] = m.Name + "=" + m.Value
	}
	return fmt.Sprintf("header route %s (%s)", h.Name, strings.Join(parts, ", "))
}

func (h *HeaderRoute) validate() error {
	var errs []error
	if errs2 := validation.IsDNS1123Label(h.Name); h.Name == "" || len(errs2) > 0 {
		errs = append(errs, fmt.Errorf("setHeaderRoute name %q is not a DNS label", h.Name))
	}
	for i, m := range h.Match {
		if strings.TrimSpace(m.Name) == "" || len(validation.IsHTTPHeaderName(m.Name)) > 0 {
			errs = append(errs, fmt.Errorf("setHeaderRoute match %d: header name %q is not an HTTP header name", i+1, m.Name))
		}
		switch m.Type {
		case "", HeaderMatchExact, HeaderMatchRegex:
		default:
			errs = append(errs, fmt.Errorf("setHeaderRoute match %d: type %q is neither %q nor %q", i+1, m.Type, HeaderMatchExact, HeaderMatchRegex))
		}
		if m.Value == "" {
			errs = append(errs, fmt.Errorf("setHeaderRoute match %d: value is empty", i+1))
		}
	}
	return errors.Join(errs...)
}

// ParseTraffic reads and validates the traffic annotation: nil, nil when it is absent. The
// error names every problem found.
func ParseTraffic(annotations map[string]string) (*TrafficSpec, error) {
	raw, ok := annotations[TrafficAnnotation]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var spec TrafficSpec
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object like {\"httpRoute\":{\"name\":\"web\"},\"stableService\":\"web-stable\",\"canaryService\":\"web-canary\"}: %v", TrafficAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s has data after the object", TrafficAnnotation)
	}
	var errs []error
	for _, n := range []struct{ field, v string }{
		{"httpRoute.name", spec.HTTPRoute.Name}, {"stableService", spec.StableService}, {"canaryService", spec.CanaryService},
	} {
		switch {
		case n.v == "":
			errs = append(errs, fmt.Errorf("%s is missing", n.field))
		case len(validation.IsDNS1123Subdomain(n.v)) > 0 && n.field == "httpRoute.name":
			errs = append(errs, fmt.Errorf("%s %q is not a valid object name", n.field, n.v))
		case len(validation.IsDNS1035Label(n.v)) > 0 && n.field != "httpRoute.name":
			errs = append(errs, fmt.Errorf("%s %q is not a valid Service name", n.field, n.v))
		}
	}
	if spec.StableService != "" && spec.StableService == spec.CanaryService {
		errs = append(errs, fmt.Errorf("stableService and canaryService are both %q; they must differ", spec.StableService))
	}
	if spec.HTTPRoute.Rule < 0 || spec.HTTPRoute.Rule >= 16 {
		errs = append(errs, fmt.Errorf("httpRoute.rule %d is not between 0 and 15", spec.HTTPRoute.Rule))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", TrafficAnnotation, errors.Join(errs...))
	}
	return &spec, nil
}

// TrafficSteps checks the steps against the traffic annotation: setHeaderRoute and
// setCanaryScale route traffic, so they need it; header routes are bounded.
func TrafficSteps(spec *TrafficSpec, steps []RolloutStep) error {
	var errs []error
	names := map[string]bool{}
	for i, s := range steps {
		if (s.SetHeaderRoute != nil || s.SetCanaryScale != nil) && spec == nil {
			errs = append(errs, fmt.Errorf("step %d (%s) routes traffic: it needs the %s annotation", i+1, s.Kind(), TrafficAnnotation))
		}
		if h := s.SetHeaderRoute; h != nil && len(h.Match) > 0 {
			names[h.Name] = true
		}
	}
	if len(names) > maxHeaderRoutes {
		errs = append(errs, fmt.Errorf("%d header routes; at most %d", len(names), maxHeaderRoutes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", StepsAnnotation, errors.Join(errs...))
	}
	return nil
}

// ActiveHeaderRoutes is the header routes in force at step (0-based, inclusive): each
// setHeaderRoute adds or replaces its name, or without a match removes it. In the order first
// added.
func ActiveHeaderRoutes(steps []RolloutStep, step int) []HeaderRoute {
	var out []HeaderRoute
	for i := 0; i <= step && i < len(steps); i++ {
		h := steps[i].SetHeaderRoute
		if h == nil {
			continue
		}
		j := 0
		for j < len(out) && out[j].Name != h.Name {
			j++
		}
		switch {
		case len(h.Match) == 0 && j < len(out):
			out = append(out[:j], out[j+1:]...)
		case len(h.Match) == 0:
		case j < len(out):
			out[j] = *h
		default:
			out = append(out, *h)
		}
	}
	return out
}

// ActiveCanaryScale is the setCanaryScale in force at step (0-based, inclusive): the last one
// at or before it, nil when none is or it matches the traffic weight.
func ActiveCanaryScale(steps []RolloutStep, step int) *CanaryScale {
	var out *CanaryScale
	for i := 0; i <= step && i < len(steps); i++ {
		if c := steps[i].SetCanaryScale; c != nil {
			out = c
			if c.MatchTrafficWeight {
				out = nil
			}
		}
	}
	return out
}

// TrafficWeight is the canary's weight on the route, 0–100 (the stable Service takes the
// rest): the weight the step asks for (target), capped by the canary's share of the available
// pods the two Services select, so that the canary never takes more traffic than its pods can:
//
//	weight = min(target, floor(100 × canaryAvailable / (canaryAvailable + stableAvailable)))
//
// The weight rises only as canary pods become available, and falls as they go.
//
//	10 replicas, setWeight 30 (3 canary, 7 stable), maxSurge 25%: the stable ReplicaSet is
//	  still at 8 while 2 of 3 canary pods are available: min(30, floor(200/10)) = 20
//	the same, all 3 canary pods available and the stable one at 7: min(30, 300/10) = 30
//	10 replicas, setWeight 99 with maxSurge (10 canary and 1 stable): floor(1000/11) = 90
//	no canary pod available yet: 0; abort (target 0): 0
//	all steps passed (target 100) and the stable ReplicaSet at 0: 100
func TrafficWeight(target, canaryAvailable, stableAvailable int32) int32 {
	target = max(min(target, 100), 0)
	canaryAvailable, stableAvailable = max(canaryAvailable, 0), max(stableAvailable, 0)
	total := int64(canaryAvailable) + int64(stableAvailable)
	if total == 0 {
		return 0
	}
	return min(target, int32(100*int64(canaryAvailable)/total))
}

// TrafficHandover reports whether a sync hands all traffic to the canary before the stable
// ReplicaSet's last pods go: every step has passed (target 100) and the sync's plan leaves
// the stable ReplicaSet no available pod while the canary keeps some. TrafficWeight on the
// pods before the plan would hold the stable Service at its last pods' share, which its pods
// leave as the plan runs: a backend with weight and no pod, whose requests fail until the next
// sync. With the handover the canary takes 100% in the same sync, before the scale-down; for
// that moment it carries more than its share of the pods, the stable pods still up carrying
// none.
//
//	10 replicas, all steps passed, canary 8 available, the plan scales the stable's last pod
//	  away: true; the weight is 100 (not floor(100×8/9) = 88, which left the stable 12% and
//	  no pod)
//	the same with the plan leaving the stable one pod: false (88)
func TrafficHandover(target int32, stableHash, canaryHash string, available, after map[string]int32) bool {
	return target >= 100 && stableHash != canaryHash && available[stableHash] > 0 && after[stableHash] <= 0 && after[canaryHash] > 0
}

// Backend is one side of the route as a check sees it: the Service, the pod-template-hash its
// selector picks, its weight and the available pods it selects.
type Backend struct {
	Service   string `json:"service"`
	Hash      string `json:"hash"`
	Weight    int32  `json:"weight"`
	Available int32  `json:"available"`
}

// CheckTraffic reports whether a route's weights keep the invariant: the canary gets no larger
// share of the traffic than its share of the available pods (weight × (canary + stable) ≤ 100 ×
// canary), and no backend with weight gets it with no available pod. The stable Service is
// the fallback and may take more than its share: an abort sends it everything at once, before
// its ReplicaSet is back to full size. When both Services select the same pods, or neither has
// an available pod (nothing can serve), any weights hold. nil: the invariant holds.
//
//	canary 20 on 2 available of 2 + 8: holds (20 ≤ 20); canary 30 on the same: 30% of the
//	traffic on 20% of the pods.
func CheckTraffic(stable, canary Backend) error {
	var errs []error
	if stable.Weight < 0 || canary.Weight < 0 || stable.Weight+canary.Weight != 100 {
		errs = append(errs, fmt.Errorf("weights stable %d and canary %d do not add up to 100", stable.Weight, canary.Weight))
	}
	sameOrNone := stable.Hash == canary.Hash || stable.Available+canary.Available <= 0
	if !sameOrNone {
		total := int64(stable.Available) + int64(canary.Available)
		if int64(canary.Weight)*total > 100*int64(canary.Available) {
			errs = append(errs, fmt.Errorf("canary %s takes %d%% of the traffic on %d of %d available pods (%d%%)",
				canary.Service, canary.Weight, canary.Available, total, 100*int64(canary.Available)/total))
		}
		if stable.Weight > 0 && stable.Available <= 0 {
			errs = append(errs, fmt.Errorf("stable %s takes %d%% of the traffic with no available pod", stable.Service, stable.Weight))
		}
	}
	return errors.Join(errs...)
}

// AvailablePods is each ReplicaSet's available pods by pod-template-hash: what its status
// reports, but no more than its size (pods of a ReplicaSet just scaled down are going).
func AvailablePods(rss []*appsv1.ReplicaSet) map[string]int32 {
	return availableByHash(rss, true)
}

// PodsUp is each ReplicaSet's available pods by pod-template-hash as its status reports them,
// the pods of a ReplicaSet just scaled down included: they serve until the ReplicaSet
// controller deletes them, and its status drops them then. The canary's share is weighed
// against them on the stable side (a stable ReplicaSet at 2 with 3 pods up beside 7 canary
// pods: 7 of 10, not 7 of 9).
func PodsUp(rss []*appsv1.ReplicaSet) map[string]int32 {
	return availableByHash(rss, false)
}

func availableByHash(rss []*appsv1.ReplicaSet, capped bool) map[string]int32 {
	out := map[string]int32{}
	for _, rs := range rss {
		if h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			n := rs.Status.AvailableReplicas
			if capped {
				n = min(n, rsReplicas(rs))
			}
			out[h] += n
		}
	}
	return out
}

// AvailableAfter is AvailablePods once a sync's plan has run: no more than the size a scaling
// step gives a ReplicaSet. The traffic moves before the plan's writes, and its weights hold
// for both: a ReplicaSet about to scale down has already lost the traffic its going pods
// served (weights fall before pods go). 3 canary pods available and the plan scales the
// canary to 1: 1.
func AvailableAfter(rss []*appsv1.ReplicaSet, plan Plan) map[string]int32 {
	out := AvailablePods(rss)
	for _, s := range plan.Steps {
		switch s.Kind {
		case StepScaleDown, StepScaleUp, StepUpdateRS:
		default:
			continue
		}
		if s.ReplicaSet == nil || s.ReplicaSet.Spec.Replicas == nil {
			continue
		}
		h := s.ReplicaSet.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if v, ok := out[h]; ok {
			out[h] = min(v, *s.ReplicaSet.Spec.Replicas)
		}
	}
	return out
}

// RouteState is what the workflow sets on the route: the canary's weight (the stable Service
// gets 100 − CanaryWeight) and the header routes.
type RouteState struct {
	CanaryWeight int32         `json:"canaryWeight"`
	HeaderRoutes []HeaderRoute `json:"headerRoutes,omitempty"`
}

// TrafficState is the whole of what the workflow sets: the Services' selectors (as
// pod-template-hashes) and the route.
type TrafficState struct {
	StableHash string     `json:"stableHash"`
	CanaryHash string     `json:"canaryHash"`
	Route      RouteState `json:"route"`
}

// TrafficMove is one write: a Service's selector (Service and Hash) or the route (Route).
type TrafficMove struct {
	Service string      `json:"service,omitempty"`
	Hash    string      `json:"hash,omitempty"`
	Route   *RouteState `json:"route,omitempty"`
}

// TrafficMoves orders the writes from cur to want so that no request goes to a Service that
// is switching pods: a Service's selector changes only while it has no traffic. It first
// moves the selectors of Services without traffic, then (when a Service with traffic must
// switch) sends its traffic to the other one, whose selector is already right, and removes the
// header routes if the canary switches, then moves the remaining selectors, and last writes
// the route as wanted.
//
//	completion (stable → M while the canary, on M, takes 100): stable's selector to M, then
//	  weights 100/0.
//	a new template M2 while the canary on M takes 30: weights 100/0 (no header routes), the
//	  canary's selector to M2, then the route as wanted (0 until M2's pods are available).
//	the first routed rollout (both Services on no hash, all traffic on stable) to N and M: the
//	  canary's selector to N, weights 0/100, the stable's selector to N, weights 100/0, the
//	  canary's selector to M, then the route as wanted.
func TrafficMoves(spec TrafficSpec, cur, want TrafficState) []TrafficMove {
	var moves []TrafficMove
	stableOff := cur.Route.CanaryWeight >= 100
	canaryOff := cur.Route.CanaryWeight <= 0 && len(cur.Route.HeaderRoutes) == 0
	stableSwitch, canarySwitch := cur.StableHash != want.StableHash, cur.CanaryHash != want.CanaryHash
	if stableSwitch && !stableOff && canaryOff && cur.CanaryHash != want.StableHash {
		// The stable Service must switch with traffic on it (its selector had no
		// pod-template-hash yet, a first routed rollout), and the canary's would select no pod
		// yet: the canary, with no traffic, first selects the pods the stable Service will and
		// carries everything while the stable one switches. No request goes to a Service whose
		// selector has no available pod.
		moves = append(moves,
			TrafficMove{Service: spec.CanaryService, Hash: want.StableHash},
			TrafficMove{Route: &RouteState{CanaryWeight: 100}},
			TrafficMove{Service: spec.StableService, Hash: want.StableHash},
			TrafficMove{Route: &RouteState{CanaryWeight: 0}})
		if want.CanaryHash != want.StableHash {
			moves = append(moves, TrafficMove{Service: spec.CanaryService, Hash: want.CanaryHash})
		}
		r := want.Route
		return append(moves, TrafficMove{Route: &r})
	}
	if stableSwitch && stableOff {
		moves = append(moves, TrafficMove{Service: spec.StableService, Hash: want.StableHash})
		stableSwitch = false
	}
	if canarySwitch && canaryOff {
		moves = append(moves, TrafficMove{Service: spec.CanaryService, Hash: want.CanaryHash})
		canarySwitch = false
	}
	if stableSwitch || canarySwitch {
		r := RouteState{CanaryWeight: 100, HeaderRoutes: cur.Route.HeaderRoutes}
		if canarySwitch {
			r = RouteState{CanaryWeight: 0}
		}
		moves = append(moves, TrafficMove{Route: &r})
		if stableSwitch {
			moves = append(moves, TrafficMove{Service: spec.StableService, Hash: want.StableHash})
		}
		if canarySwitch {
			moves = append(moves, TrafficMove{Service: spec.CanaryService, Hash: want.CanaryHash})
		}
	}
	r := want.Route
	return append(moves, TrafficMove{Route: &r})
}

// Change IDs of the traffic decision (workflow.GetVersion in the workflow, docs/versioning.md).
// DecideTraffic asks for each only where its branch would change the weight, so a run
// recorded before a change replays as it ran.
const (
	ChangeTrafficHandover     = "traffic-handover"
	ChangeTrafficStablePodsUp = "traffic-stable-pods-up"
	// ChangeTrafficFollowsPods: a side with no available pod gets no weight (FollowPods).
	ChangeTrafficFollowsPods = "traffic-follows-pods"
	// ChangeTrafficAbort: an abort moves the weight back in step with the stable pods
	// (AbortWeight) instead of sending everything to the stable Service at once.
	ChangeTrafficAbort = "traffic-abort-follows-pods"
)

// TrafficAsk is what a sync asks of the route: the Services' templates and the step's weight.
// Aborted is the aborted template's hash while an abort is under way ("" otherwise); the
// sync then asks for Canary = Stable and Target 0, and DecideTraffic keeps the canary Service
// on the aborted pods until they have none (AbortWeight).
type TrafficAsk struct {
	Target  int32  `json:"target"`
	Stable  string `json:"stable"`
	Canary  string `json:"canary"`
	Aborted string `json:"aborted,omitempty"`
}

// TrafficDecision is the route a sync writes: the canary's weight and the Services'
// templates, with the pods it was weighed on.
type TrafficDecision struct {
	Weight int32
	Stable string
	Canary string
	// Handover: the canary takes all traffic as the stable's last pods go (TrafficHandover);
	// the moves are checked once the plan has run.
	Handover bool
	// Abort: weighed for an abort (AbortWeight); the moves are checked for pods behind every
	// weight only (CheckServed).
	Abort bool
	// Available and After are the available pods before and after the plan's writes
	// (AvailablePods, AvailableAfter), the stable's pods still up counted (PodsUp).
	Available, After map[string]int32
}

// DecideTraffic is the route a sync wants for its plan: the step's weight capped by the
// canary's share of the available pods (TrafficWeight) before and after the plan's writes,
// the handover (TrafficHandover), and no weight on a side with no available pod (FollowPods);
// during an abort, AbortWeight. on(change) reports whether a change is in force for the run
// (workflow.GetVersion in the workflow); it is asked only where the change alters the weight.
// The workflow's sync and AwaitChange both decide with it, so the wait wakes the workflow
// when the route should move.
func DecideTraffic(ask TrafficAsk, rss []*appsv1.ReplicaSet, plan Plan, on func(change string) bool) TrafficDecision {
	stable, canary, target := ask.Stable, ask.Canary, ask.Target
	avail, after := AvailablePods(rss), AvailableAfter(rss, plan)
	d := TrafficDecision{Stable: stable, Canary: canary, Available: avail, After: after}
	if ab := ask.Aborted; ab != "" && ab != stable && avail[ab] > 0 && on(ChangeTrafficAbort) {
		d.Canary, d.Abort = ab, true
		d.Weight = AbortWeight(after[ab], after[stable])
		return d
	}
	weight := min(TrafficWeight(target, avail[canary], avail[stable]), TrafficWeight(target, after[canary], after[stable]))
	handover := TrafficHandover(target, stable, canary, avail, after) && on(ChangeTrafficHandover)
	if up := PodsUp(rss)[stable]; canary != stable && up > avail[stable] && on(ChangeTrafficStablePodsUp) {
		avail[stable] = up
		weight = min(weight, TrafficWeight(target, after[canary], up))
		handover = handover || (TrafficHandover(target, stable, canary, avail, after) && on(ChangeTrafficHandover))
	}
	if handover {
		weight = 100
	}
	if canary != stable {
		if f := FollowPods(weight, min(avail[canary], after[canary]), after[stable]); f != weight && on(ChangeTrafficFollowsPods) {
			handover = handover || (f == 100 && avail[stable] > 0)
			weight = f
		}
	}
	d.Weight, d.Handover = weight, handover
	return d
}

// FollowPods keeps weight off a side with no available pod: the canary with none gets 0, the
// stable with none (and the canary with some) leaves the canary 100. Otherwise the weight
// stands. 1 replica without surge at setWeight 20: the one pod is the canary's
// (StepShares), so the canary carries 100%, not 20% with 80% on a stable Service with no pod.
func FollowPods(weight, canaryAvailable, stableAvailable int32) int32 {
	switch {
	case canaryAvailable <= 0:
		return 0
	case stableAvailable <= 0:
		return 100
	}
	return weight
}

// AbortWeight is the canary's weight while an abort brings the stable ReplicaSet back: the
// stable Service takes its share of the available pods (rounded down) and the aborted canary
// keeps the rest, so neither side has weight without pods and the stable takes traffic only
// as fast as its pods come back.
//
//	setWeight 100 aborted, stable 0 of 10 available, canary 10: 100 (all stays on the canary)
//	stable 3 available, canary 9: 100 − floor(300/12) = 75
//	stable 10, canary 0 (the plan scales its last pod away): 0
func AbortWeight(canaryAvailable, stableAvailable int32) int32 {
	switch {
	case canaryAvailable <= 0:
		return 0
	case stableAvailable <= 0:
		return 100
	}
	return 100 - int32(100*int64(stableAvailable)/(int64(canaryAvailable)+int64(stableAvailable)))
}

// TrafficStepReached reports whether the route carries a setWeight step's weight as far as
// the ReplicaSets' sizes allow: the weight DecideTraffic gives once every pod of both is
// available (FollowPods(TrafficWeight(target, canary, stable))). A step passes only then, so
// the pause or analysis after it sees the weight it asked for. 10 replicas at setWeight 50
// (5 and 5): 50; 1 replica without surge at setWeight 20 (1 and 0): 100.
func TrafficStepReached(routeWeight, target, canarySize, stableSize int32) bool {
	return routeWeight >= FollowPods(TrafficWeight(target, canarySize, stableSize), canarySize, stableSize)
}

// CheckServed reports whether every backend with weight has an available pod: the check of an
// abort's moves (AbortWeight), where the canary keeps more than its share until the stable
// pods are back.
func CheckServed(stable, canary Backend) error {
	var errs []error
	if stable.Weight < 0 || canary.Weight < 0 || stable.Weight+canary.Weight != 100 {
		errs = append(errs, fmt.Errorf("weights stable %d and canary %d do not add up to 100", stable.Weight, canary.Weight))
	}
	if stable.Hash != canary.Hash && stable.Available+canary.Available > 0 {
		for _, b := range []Backend{stable, canary} {
			if b.Weight > 0 && b.Available <= 0 {
				errs = append(errs, fmt.Errorf("%s takes %d%% of the traffic with no available pod", b.Service, b.Weight))
			}
		}
	}
	return errors.Join(errs...)
}

// SizesAfter is each ReplicaSet's replicas by pod-template-hash once a sync's plan has run.
func SizesAfter(rss []*appsv1.ReplicaSet, plan Plan) map[string]int32 {
	out := map[string]int32{}
	for _, rs := range rss {
		if h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			out[h] += rsReplicas(rs)
		}
	}
	for _, s := range plan.Steps {
		switch s.Kind {
		case StepScaleDown, StepScaleUp, StepUpdateRS, StepCreate:
		default:
			continue
		}
		if s.ReplicaSet == nil || s.ReplicaSet.Spec.Replicas == nil {
			continue
		}
		out[s.ReplicaSet.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = *s.ReplicaSet.Spec.Replicas
	}
	return out
}

// HeaderRouteNames is the header routes' names, comma-separated.
func HeaderRouteNames(hs []HeaderRoute) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	return strings.Join(names, ",")
}

// TrafficMessage describes a traffic move for its TrafficShifted event, the workflow's sync's
// and the wait's alike: "Route web rule 0: canary web-canary 20%, stable web-stable 80%
// (target 30%; canary 2 of 10 available pods); header routes: testers".
func TrafficMessage(route string, spec TrafficSpec, want TrafficState, avail map[string]int32, target int32) string {
	w := want.Route.CanaryWeight
	msg := fmt.Sprintf("Route %s: canary %s %d%%, stable %s %d%%", route, spec.CanaryService, w, spec.StableService, 100-w)
	if want.CanaryHash != want.StableHash {
		ca, sa := avail[want.CanaryHash], avail[want.StableHash]
		msg += fmt.Sprintf(" (target %d%%; canary %d of %d available pods)", target, ca, ca+sa)
	} else {
		msg += fmt.Sprintf(" (both on pod-template-hash %s)", want.StableHash)
	}
	if len(want.Route.HeaderRoutes) > 0 {
		msg += "; header routes: " + HeaderRouteNames(want.Route.HeaderRoutes)
	}
	return msg
}
