package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/k8s"
)

// HTTPRouteResource is the Gateway API's HTTPRoute, read and written with the dynamic client.
var HTTPRouteResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

// ErrTraffic: the traffic routing cannot be carried out (no HTTPRoute, no such rule or
// Service, a move that would break the invariant). The workflow retries after a backoff.
const ErrTraffic = "TrafficError"

// headerRulePrefix names the rules setHeaderRoute adds to the HTTPRoute (HTTPRouteRule.name),
// so that the workflow finds its own rules and no other.
const headerRulePrefix = "temporal-rollout-"

// SyncTrafficInput is the traffic a sync wants: both Services' selectors and the route's
// weights and header routes (absolute targets), with the available pods per
// pod-template-hash (k8s.AvailableAfter) that every move is checked against.
type SyncTrafficInput struct {
	Deployment DeploymentRef    `json:"deployment"`
	Spec       k8s.TrafficSpec  `json:"spec"`
	Want       k8s.TrafficState `json:"want"`
	Available  map[string]int32 `json:"available,omitempty"`
	// AvailableAfter: the same once the sync's plan has run (k8s.AvailableAfter); every
	// route move is checked against both.
	AvailableAfter map[string]int32 `json:"availableAfter,omitempty"`
	// Handover: the sync's plan takes the stable ReplicaSet's last pods and the canary takes
	// all traffic first (k8s.TrafficHandover); route moves are checked against AvailableAfter
	// alone.
	Handover bool `json:"handover,omitempty"`
	// Abort: an abort's weights (k8s.AbortWeight): the canary keeps what the stable pods
	// cannot take yet, and the moves are checked for pods behind every weight
	// (k8s.CheckServed).
	Abort bool `json:"abort,omitempty"`
	// SizesAfter: each template's replicas once the sync's plan has run (k8s.SizesAfter);
	// the gate weighs the pods read just before the writes, capped by them.
	SizesAfter map[string]int32 `json:"sizesAfter,omitempty"`
	// KnownHeaderRoutes: every header route the steps add; on a cluster whose CRDs prune
	// HTTPRouteRule.name an unnamed rule is ours only with the headers of one of them.
	KnownHeaderRoutes []k8s.HeaderRoute `json:"knownHeaderRoutes,omitempty"`
	Events            []k8s.Event       `json:"events,omitempty"`
	// Fence is the epoch of the rule's fence (RouteFenceAnnotation, absent: 0), which keeps a
	// superseded wait from moving the route. The workflow's sync writes it on the route when
	// the route carries a lower one, before any move. A wait's move (FenceCheck, AwaitChange)
	// moves nothing unless the route carries exactly its epoch, and no Service: a workflow
	// that gave up that wait has raised the epoch, and every write of the wait is a
	// read-modify-write of the route at the resourceVersion it read (ErrFenced, or a conflict).
	Fence      int64 `json:"fence,omitempty"`
	FenceCheck bool  `json:"fenceCheck,omitempty"`
}

// RouteFenceAnnotation prefixes the HTTPRoute annotation that fences each rule's waits: its
// key ends with the rule's index (temporal-rollout.io/wait-fence-0), its value is the epoch.
const RouteFenceAnnotation = "temporal-rollout.io/wait-fence-"

// ErrFenced: a wait's route move found the route fenced by a newer epoch (SyncTrafficInput.Fence).
const ErrFenced = "TrafficFenced"

// routeFence is the epoch of the rule's fence on the route (0 when absent or unreadable).
func routeFence(route *unstructured.Unstructured, rule int) int64 {
	v, err := strconv.ParseInt(route.GetAnnotations()[RouteFenceAnnotation+strconv.Itoa(rule)], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// TrafficMoveResult is one move as carried out: the move, whether it wrote, and the invariant
// check on the route it left ("" when it holds).
type TrafficMoveResult struct {
	Move  k8s.TrafficMove `json:"move"`
	Wrote bool            `json:"wrote,omitempty"`
	Check string          `json:"check,omitempty"`
}

// SyncTrafficResult reports the traffic before and after, each move, and the route's
// backends at the end (weights and available pods).
type SyncTrafficResult struct {
	Before k8s.TrafficState    `json:"before"`
	After  k8s.TrafficState    `json:"after"`
	Moves  []TrafficMoveResult `json:"moves,omitempty"`
	Stable k8s.Backend         `json:"stable"`
	Canary k8s.Backend         `json:"canary"`
	// Check is the invariant check on the route as left ("" when it holds).
	Check string `json:"check,omitempty"`
	// Hold: why the gate did not make the route as asked ("" when it did).
	Hold string `json:"hold,omitempty"`
	// Fence: the epoch of the rule's fence on the route as left (SyncTrafficInput.Fence).
	Fence int64 `json:"fence,omitempty"`
}

// SyncTraffic brings the two Services and the HTTPRoute to what the workflow wants, through
// the gate (k8s.GateTraffic, gate.go): the ReplicaSets are read again just before the writes,
// and the route written is the nearest to the one asked that keeps the gate's rules; the
// writes go in the order k8s.TrafficMoves gives (a Service switches pods only while it has no
// traffic). Each write carries the resourceVersion it was decided on: a conflict is a stale
// decision (ErrStale). Where the gate holds, Hold says why and the workflow holds on it.
func (a *Activities) SyncTraffic(ctx context.Context, in SyncTrafficInput) (SyncTrafficResult, error) {
	ns, spec := in.Deployment.Namespace, in.Spec
	if a.Dynamic == nil {
		return SyncTrafficResult{}, nonRetryable(ErrTraffic, "sync traffic of %s: the worker has no dynamic client", in.Deployment)
	}
	routes := a.Dynamic.Resource(HTTPRouteResource).Namespace(ns)
	route, err := routes.Get(ctx, spec.HTTPRoute.Name, metav1.GetOptions{})
	if err != nil {
		return SyncTrafficResult{}, trafficErr("get httproute "+ns+"/"+spec.HTTPRoute.Name, err)
	}
	services := a.client(ctx).CoreV1().Services(ns)
	svcs := map[string]*corev1.Service{}
	for _, name := range []string{spec.StableService, spec.CanaryService} {
		svc, err := services.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return SyncTrafficResult{}, trafficErr("get service "+ns+"/"+name, err)
		}
		svcs[name] = svc
	}
	fence := routeFence(route, spec.HTTPRoute.Rule)
	if in.FenceCheck && fence != in.Fence {
		return SyncTrafficResult{Fence: fence}, nonRetryable(ErrFenced, "httproute %s/%s rule %d: fenced at epoch %d, the wait's is %d: its workflow took the route over",
			ns, spec.HTTPRoute.Name, spec.HTTPRoute.Rule, fence, in.Fence)
	}
	if !in.FenceCheck && in.Fence > fence {
		// Fence superseded waits out before any move: from this write on, their moves find
		// the route fenced or their writes conflict.
		obj := route.DeepCopy()
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[RouteFenceAnnotation+strconv.Itoa(spec.HTTPRoute.Rule)] = strconv.FormatInt(in.Fence, 10)
		obj.SetAnnotations(ann)
		out, err := a.writeRouteObject(ctx, routes, obj)
		if err != nil {
			return SyncTrafficResult{}, classify(fmt.Sprintf("fence httproute %s/%s rule %d at epoch %d", ns, spec.HTTPRoute.Name, spec.HTTPRoute.Rule, in.Fence), err)
		}
		route, fence = out, in.Fence
	}
	known := append(append([]k8s.HeaderRoute(nil), in.KnownHeaderRoutes...), in.Want.Route.HeaderRoutes...)
	cur, err := readTraffic(route, spec, svcs, known)
	if errors.Is(err, errOtherRule) {
		a.record(in.Deployment, []k8s.Event{{Type: "Warning", Reason: "InvalidRolloutAnnotation", Message: "Traffic not moved: " + err.Error()}})
	}
	if err != nil {
		return SyncTrafficResult{}, nonRetryable(ErrTraffic, "read traffic of %s: %v", in.Deployment, err)
	}
	availNow, sizesNow, upNow, err := a.podsUpNow(ctx, in.Deployment)
	if err != nil {
		return SyncTrafficResult{}, err
	}
	sizes := gatedSizes(sizesNow, in.SizesAfter)
	if in.SizesAfter == nil {
		sizes = gatedSizes(sizesNow, in.AvailableAfter)
	}
	gate := k8s.GateTraffic(spec, k8s.GateInput{Cur: cur, Want: in.Want, Available: availNow, Sizes: sizes, Returning: in.Abort, Handover: in.Handover})
	res := SyncTrafficResult{Before: cur, Hold: gate.Hold, Fence: fence}
	for _, m := range gate.Moves {
		mr := TrafficMoveResult{Move: m}
		if m.Route == nil && in.FenceCheck {
			// A Service is not fenced: its moves are the workflow's.
			return res, nonRetryable(ErrFenced, "service %s/%s to pod-template-hash %s: a Service move is the workflow's", ns, m.Service, m.Hash)
		}
		if m.Route == nil {
			out, err := a.setSelector(ctx, services, svcs[m.Service], m.Hash)
			if err != nil {
				return res, err
			}
			mr.Wrote = out != svcs[m.Service]
			svcs[m.Service] = out
			if m.Service == spec.StableService {
				cur.StableHash = m.Hash
			} else {
				cur.CanaryHash = m.Hash
			}
			res.Moves = append(res.Moves, mr)
			continue
		}
		// A Service about to get traffic it has not had: wait until its endpoints are its pods.
		for _, b := range []struct {
			svc, hash     string
			before, after bool
		}{
			{spec.StableService, cur.StableHash, cur.Route.CanaryWeight < 100, m.Route.CanaryWeight < 100},
			{spec.CanaryService, cur.CanaryHash, cur.Route.CanaryWeight > 0 || len(cur.Route.HeaderRoutes) > 0, m.Route.CanaryWeight > 0 || len(m.Route.HeaderRoutes) > 0},
		} {
			if !b.before && b.after && availNow[b.hash] > 0 {
				if err := a.awaitEndpoints(ctx, ns, b.svc, b.hash); err != nil {
					res.Moves = append(res.Moves, mr)
					return res, err
				}
			}
		}
		next := cur
		next.Route = *m.Route
		mr.Check = k8s.CheckServing(spec, next, availNow, sizes)
		obj, changed, err := writeRoute(route, spec, *m.Route, known)
		if err != nil {
			return res, nonRetryable(ErrTraffic, "move httproute %s/%s: %v", ns, spec.HTTPRoute.Name, err)
		}
		if changed {
			out, err := a.writeRouteObject(ctx, routes, obj)
			if err != nil {
				return res, classify(fmt.Sprintf("move httproute %s/%s to canary weight %d", ns, spec.HTTPRoute.Name, m.Route.CanaryWeight), err)
			}
			route, mr.Wrote = out, true
			// Traffic taken off a side: the pods it leaves may go once this sync's plan runs
			// (the canary's, or at a handover the stable's last), so the gateways must have the
			// route as written first. If they do not answer in time the scale-down waits: the
			// sync fails (TrafficError) and runs again after a backoff.
			if m.Route.CanaryWeight < cur.Route.CanaryWeight || len(m.Route.HeaderRoutes) < len(cur.Route.HeaderRoutes) ||
				(in.Handover && m.Route.CanaryWeight > cur.Route.CanaryWeight) {
				var ok bool
				route, ok = awaitGateways(ctx, routes, out)
				if !ok {
					cur.Route = *m.Route
					res.Moves = append(res.Moves, mr)
					return res, nonRetryable(ErrTraffic, "httproute %s/%s: the gateways have not accepted generation %d after %s; the scale-down waits",
						ns, spec.HTTPRoute.Name, out.GetGeneration(), gatewayWait)
				}
			}
		}
		cur.Route = *m.Route
		res.Moves = append(res.Moves, mr)
	}
	res.After = cur
	res.Stable, res.Canary = backends(spec, cur.StableHash, cur.CanaryHash, cur.Route.CanaryWeight, upNow)
	res.Check = k8s.CheckServing(spec, cur, availNow, sizes)
	events := in.Events
	if gate.Hold != "" {
		events = append(events, k8s.Event{Type: "Warning", Reason: "TrafficHeld", Message: "Traffic held by the gate: " + gate.Hold})
	}
	a.record(in.Deployment, events)
	return res, nil
}

// endpointsWait bounds how long a sync waits for a Service's EndpointSlices to follow its
// selector before it gives the Service traffic.
const endpointsWait = 5 * time.Second

// awaitEndpoints waits until the Service's EndpointSlices follow its selector
// (endpointsFollow). Past endpointsWait the sync fails (TrafficError) and the workflow retries
// after a backoff, the route unchanged: traffic never goes to a Service whose endpoints are
// still other pods, or none.
func (a *Activities) awaitEndpoints(ctx context.Context, ns, svc, hash string) error {
	c := a.client(ctx)
	deadline := time.Now().Add(endpointsWait)
	for {
		why, err := endpointsFollow(ctx, c, ns, svc, hash)
		if err != nil {
			return classify(fmt.Sprintf("read the endpoints of service %s/%s", ns, svc), err)
		}
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return nonRetryable(ErrTraffic, "service %s/%s: %s after %s; its traffic waits", ns, svc, why, endpointsWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(gatewayPoll):
		}
	}
}

// endpointsFollow reports ("" when they do) whether the Service's EndpointSlices follow its
// selector's pod-template-hash: at least one ready endpoint, and every ready endpoint an
// address of a pod with that hash. kube-controller-manager rewrites the slices some time after
// a selector changes; a gateway routes by them. A Service with no EndpointSlice at all (no
// EndpointSlice controller writes its endpoints) is not waited for.
func endpointsFollow(ctx context.Context, c kubernetes.Interface, ns, svc, hash string) (string, error) {
	slices, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil || len(slices.Items) == 0 {
		return "", err
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appsv1.DefaultDeploymentUniqueLabelKey + "=" + hash})
	if err != nil {
		return "", err
	}
	ips := map[string]bool{}
	for _, p := range pods.Items {
		for _, ip := range p.Status.PodIPs {
			ips[ip.IP] = true
		}
		ips[p.Status.PodIP] = true
	}
	ready := 0
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			for _, addr := range e.Addresses {
				if !ips[addr] {
					return fmt.Sprintf("ready endpoint %s is not a pod of pod-template-hash %s", addr, hash), nil
				}
				ready++
			}
		}
	}
	if ready == 0 {
		return "no ready endpoint yet", nil
	}
	return "", nil
}

// gatewayWait bounds how long a sync waits for the gateways to accept a route it took
// traffic off the canary with; gatewayPoll is how often it reads the route meanwhile.
// Variables so that a test can shorten the wait.
var (
	gatewayWait = 5 * time.Second
	gatewayPoll = 50 * time.Millisecond
)

// awaitGateways waits until every gateway that reports on the route (status.parents) has
// accepted its generation as written (an Accepted condition with that observedGeneration):
// the Gateway API's sign that the implementation has the route as it is now. A route no
// gateway reports on is not waited for. It returns the route as last read, and false when
// gatewayWait passed first: the sync then fails (TrafficError) before the scale-down its
// move allows, and the workflow runs it again after a backoff, rather than wait here on a
// gateway that may never answer.
func awaitGateways(ctx context.Context, routes dynamic.ResourceInterface, written *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	gen, cur := written.GetGeneration(), written
	deadline := time.Now().Add(gatewayWait)
	for {
		if gatewaysAccepted(cur, gen) {
			return cur, true
		}
		if time.Now().After(deadline) {
			return cur, false
		}
		select {
		case <-ctx.Done():
			return cur, false
		case <-time.After(gatewayPoll):
		}
		r, err := routes.Get(ctx, written.GetName(), metav1.GetOptions{})
		if err != nil {
			return cur, false
		}
		cur = r
	}
}

// gatewaysAccepted: every parent in the route's status has Accepted=True at generation gen
// or later (true when no parent is reported).
func gatewaysAccepted(route *unstructured.Unstructured, gen int64) bool {
	parents, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		ok := false
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			g, _, _ := unstructured.NestedInt64(cm, "observedGeneration")
			if cm["type"] == "Accepted" && cm["status"] == "True" && g >= gen {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func trafficErr(what string, err error) error {
	err = classify(what, err)
	if IsKind(err, ErrNotFound) {
		// A missing route or Service is not a missing Deployment: back off, do not re-observe
		// at once.
		return nonRetryable(ErrTraffic, "%v", err)
	}
	return err
}

func backends(spec k8s.TrafficSpec, stableHash, canaryHash string, canaryWeight int32, avail map[string]int32) (stable, canary k8s.Backend) {
	stable = k8s.Backend{Service: spec.StableService, Hash: stableHash, Weight: 100 - canaryWeight, Available: avail[stableHash]}
	canary = k8s.Backend{Service: spec.CanaryService, Hash: canaryHash, Weight: canaryWeight, Available: avail[canaryHash]}
	return stable, canary
}

// readTraffic is the traffic as the objects have it. The canary's weight is its percentage of
// the rule's two weights (0 when both are 0 or it has no backendRef); the header routes are
// the rules named by headerRulePrefix.
func readTraffic(route *unstructured.Unstructured, spec k8s.TrafficSpec, svcs map[string]*corev1.Service, known []k8s.HeaderRoute) (k8s.TrafficState, error) {
	st := k8s.TrafficState{
		StableHash: svcs[spec.StableService].Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey],
		CanaryHash: svcs[spec.CanaryService].Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey],
	}
	rules, _, err := unstructured.NestedSlice(route.Object, "spec", "rules")
	if err != nil {
		return st, fmt.Errorf("spec.rules: %w", err)
	}
	if spec.HTTPRoute.Rule >= len(rules) {
		return st, fmt.Errorf("httproute %s has %d rules; rule %d does not exist", route.GetName(), len(rules), spec.HTTPRoute.Rule)
	}
	rule, _ := rules[spec.HTTPRoute.Rule].(map[string]any)
	refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	var sw, cw int64
	var found bool
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		w, ok, _ := unstructured.NestedInt64(ref, "weight")
		if !ok {
			w = 1
		}
		switch ref["name"] {
		case spec.StableService:
			sw, found = w, true
		case spec.CanaryService:
			cw = w
		}
	}
	if !found {
		return st, fmt.Errorf("httproute %s rule %d has no backendRef to the stable service %s", route.GetName(), spec.HTTPRoute.Rule, spec.StableService)
	}
	if sw+cw > 0 {
		st.Route.CanaryWeight = int32(cw * 100 / (sw + cw))
	}
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		if i == spec.HTTPRoute.Rule {
			continue
		}
		if ownedRule(rule, spec, known) {
			name, _ := rule["name"].(string)
			st.Route.HeaderRoutes = append(st.Route.HeaderRoutes, k8s.HeaderRoute{Name: strings.TrimPrefix(name, headerRulePrefix), Match: headerMatches(rule)})
			continue
		}
		// Another rule that sends to either Service would keep its traffic there whatever the
		// rollout does (the stable Service's pods scaled away under it): refused.
		refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
		for _, x := range refs {
			ref, _ := x.(map[string]any)
			if n, _ := ref["name"].(string); n == spec.StableService || n == spec.CanaryService {
				return st, fmt.Errorf("%w: httproute %s rule %d also sends to Service %s; the rollout moves only rule %d (httpRoute.rule): send rule %d to other Services, or give each route its own Services",
					errOtherRule, route.GetName(), i, n, spec.HTTPRoute.Rule, i)
			}
		}
	}
	return st, nil
}

// errOtherRule: a rule the rollout does not manage sends to its Services.
var errOtherRule = errors.New("another rule routes to the rollout's Services")

// ownedRule reports whether a rule is one of the header routes' rules: named with
// headerRulePrefix, or, where the cluster's Gateway API CRDs predate HTTPRouteRule.name (before
// v1.4, which prune the field), of their shape (no name, one backendRef, to the canary Service,
// matches that all test headers) and with the headers of one of the rollout's own header routes
// (known: the steps' setHeaderRoute matches). A user's own unnamed header rule to the canary
// Service with other headers is never taken for ours, nor removed.
func ownedRule(rule map[string]any, spec k8s.TrafficSpec, known []k8s.HeaderRoute) bool {
	name, hasName := rule["name"].(string)
	if hasName && name != "" {
		return strings.HasPrefix(name, headerRulePrefix)
	}
	refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	if len(refs) != 1 {
		return false
	}
	if ref, _ := refs[0].(map[string]any); ref["name"] != spec.CanaryService {
		return false
	}
	matches, _, _ := unstructured.NestedSlice(rule, "matches")
	if len(matches) == 0 {
		return false
	}
	for _, m := range matches {
		mm, _ := m.(map[string]any)
		if hs, _, _ := unstructured.NestedSlice(mm, "headers"); len(hs) == 0 {
			return false
		}
	}
	have := headerMatches(rule)
	for _, h := range known {
		if sameMatches(have, h.Match) {
			return true
		}
	}
	return false
}

// sameMatches: a rule's header matches end with exactly the route's (the rule's own matches
// may test headers of the weighted rule before them), the type "" being Exact.
func sameMatches(rule, route []k8s.HeaderMatch) bool {
	if len(route) == 0 || len(rule) < len(route) {
		return false
	}
	tail := rule[len(rule)-len(route):]
	for i, m := range route {
		typ, got := m.Type, tail[i].Type
		if typ == "" {
			typ = k8s.HeaderMatchExact
		}
		if got == "" {
			got = k8s.HeaderMatchExact
		}
		if tail[i].Name != m.Name || tail[i].Value != m.Value || got != typ {
			return false
		}
	}
	return true
}

// headerMatches is a managed rule's header matches (its first match's headers).
func headerMatches(rule map[string]any) []k8s.HeaderMatch {
	matches, _, _ := unstructured.NestedSlice(rule, "matches")
	if len(matches) == 0 {
		return nil
	}
	m, _ := matches[0].(map[string]any)
	hs, _, _ := unstructured.NestedSlice(m, "headers")
	var out []k8s.HeaderMatch
	for _, h := range hs {
		hm, _ := h.(map[string]any)
		name, _ := hm["name"].(string)
		value, _ := hm["value"].(string)
		typ, _ := hm["type"].(string)
		out = append(out, k8s.HeaderMatch{Name: name, Value: value, Type: typ})
	}
	return out
}

// writeRoute is the route with the rule's weights at want (stable 100 − w, canary w; a
// canary backendRef is added beside the stable one's when missing) and the managed header
// rules replaced by want's. changed: it differs from route.
func writeRoute(route *unstructured.Unstructured, spec k8s.TrafficSpec, want k8s.RouteState, known []k8s.HeaderRoute) (*unstructured.Unstructured, bool, error) {
	obj := route.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	rules, _, err := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if err != nil {
		return nil, false, fmt.Errorf("spec.rules: %w", err)
	}
	if spec.HTTPRoute.Rule >= len(rules) {
		return nil, false, fmt.Errorf("rule %d does not exist (%d rules)", spec.HTTPRoute.Rule, len(rules))
	}
	rule, _ := rules[spec.HTTPRoute.Rule].(map[string]any)
	refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	var stableRef map[string]any
	hasCanary := false
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		switch ref["name"] {
		case spec.StableService:
			ref["weight"] = int64(100 - want.CanaryWeight)
			stableRef = ref
		case spec.CanaryService:
			ref["weight"] = int64(want.CanaryWeight)
			hasCanary = true
		}
	}
	if stableRef == nil {
		return nil, false, fmt.Errorf("rule %d has no backendRef to the stable service %s", spec.HTTPRoute.Rule, spec.StableService)
	}
	canaryRef := func(weight int64) map[string]any {
		ref := map[string]any{"name": spec.CanaryService, "weight": weight}
		for _, k := range []string{"group", "kind", "port"} {
			if v, ok := stableRef[k]; ok {
				ref[k] = v
			}
		}
		return ref
	}
	if !hasCanary {
		refs = append(refs, canaryRef(int64(want.CanaryWeight)))
	}
	rule["backendRefs"] = refs
	rules[spec.HTTPRoute.Rule] = rule
	// The managed header rules go last, in want's order, each the weighted rule's matches with
	// the headers added, to the canary Service alone.
	kept := rules[:0:0]
	for i, r := range rules {
		m, _ := r.(map[string]any)
		if i != spec.HTTPRoute.Rule && ownedRule(m, spec, known) {
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) <= spec.HTTPRoute.Rule || !sameRule(kept[spec.HTTPRoute.Rule], rule) {
		return nil, false, fmt.Errorf("rule %d is not a rule of your own once the header routes' rules (named %s*) are left out; they go after it", spec.HTTPRoute.Rule, headerRulePrefix)
	}
	for _, h := range want.HeaderRoutes {
		kept = append(kept, headerRule(h, rule, canaryRef(1)))
	}
	if err := unstructured.SetNestedSlice(obj.Object, kept, "spec", "rules"); err != nil {
		return nil, false, fmt.Errorf("set spec.rules: %w", err)
	}
	orig, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	return obj, !equalJSON(orig, kept), nil
}

// sameRule: a is the very map b (not an equal copy).
func sameRule(a any, b map[string]any) bool {
	m, ok := a.(map[string]any)
	return ok && reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// headerRule is a setHeaderRoute's rule: each of the weighted rule's matches (or one that
// matches every path) with the route's headers added.
func headerRule(h k8s.HeaderRoute, weighted map[string]any, backend map[string]any) map[string]any {
	matches, _, _ := unstructured.NestedSlice(weighted, "matches")
	if len(matches) == 0 {
		matches = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}}
	}
	var headers []any
	for _, m := range h.Match {
		typ := m.Type
		if typ == "" {
			typ = k8s.HeaderMatchExact
		}
		headers = append(headers, map[string]any{"type": typ, "name": m.Name, "value": m.Value})
	}
	out := make([]any, 0, len(matches))
	for _, m := range matches {
		mm, _ := m.(map[string]any)
		c := runtimeCopy(mm)
		existing, _, _ := unstructured.NestedSlice(c, "headers")
		c["headers"] = append(existing, headers...)
		out = append(out, c)
	}
	return map[string]any{
		"name":        headerRulePrefix + h.Name,
		"matches":     out,
		"backendRefs": []any{backend},
	}
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// ReleaseTrafficInput names the Services a Deployment's traffic routing pointed at
// pod-template-hashes, once its traffic annotation is gone.
type ReleaseTrafficInput struct {
	Deployment DeploymentRef `json:"deployment"`
	Services   []string      `json:"services"`
	Events     []k8s.Event   `json:"events,omitempty"`
}

// ReleaseTrafficResult lists the Services whose selectors were given back.
type ReleaseTrafficResult struct {
	Released []string `json:"released,omitempty"`
}

// ReleaseTraffic gives the Services back their selectors as the user wrote them: the
// pod-template-hash key the routing added (TrafficMoves) is removed, and nothing else is
// touched. A Service already without it, or gone, is left alone.
func (a *Activities) ReleaseTraffic(ctx context.Context, in ReleaseTrafficInput) (ReleaseTrafficResult, error) {
	ns := in.Deployment.Namespace
	services := a.client(ctx).CoreV1().Services(ns)
	var res ReleaseTrafficResult
	for _, name := range in.Services {
		svc, err := services.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return res, classify("get service "+ns+"/"+name, err)
		}
		if _, ok := svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]; !ok {
			continue
		}
		// Selecting every pod of the Deployment again only widens what serves: the gate lets
		// it through.
		if _, err := a.setSelector(ctx, services, svc, ""); err != nil {
			return res, err
		}
		res.Released = append(res.Released, name)
	}
	a.record(in.Deployment, in.Events)
	return res, nil
}
