package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Traffic routing (temporal-rollout.io/traffic, docs/traffic.md). Every sync of a Deployment
// with the annotation brings the stable and canary Services and the HTTPRoute to what the
// rollout wants, before the plan's writes: the canary's weight is the step's, capped by its
// share of the available pods (k8s.TrafficWeight), so it rises only as canary pods become
// available and falls before they go; an abort sends every request to the stable Service
// before the canary ReplicaSet scales down. A Deployment without the annotation runs none of
// this: histories recorded before it replay as they ran.

// router moves a Deployment's traffic (its HTTPRoute and Services) for each sync.
type router struct {
	// effects, and through them the run's State (Traffic holds the route as the last move
	// left it).
	*effects
	// ask: what the last traffic move asked (k8s.DecideTraffic), for AwaitChange to weigh the
	// route the same way; asked: the traffic change IDs asked in this run.
	ask   *k8s.TrafficAsk
	asked map[string]bool
	// spec: the traffic annotation the last sync moved the route for; keptStable: that sync
	// left the stable Service on its old template (a new stable template with no available
	// pod yet), which a later sync moves. Both for the wait (AwaitInput.InlineTraffic).
	spec       *k8s.TrafficSpec
	keptStable bool
	// waited: the route as the last wait's own moves left it (AwaitResult.Traffic), for the
	// next sync to record (applyWaited); recheck: a route move of the wait failed, perhaps
	// part-way (AwaitResult.RouteUnknown), so the next sync reads the route again (its
	// SyncTraffic) rather than trust the state.
	waited  *activities.SyncTrafficResult
	recheck bool
}

// checkTraffic validates the traffic annotation and the steps that need it.
func checkTraffic(annotations map[string]string, steps []k8s.RolloutStep) error {
	spec, err := k8s.ParseTraffic(annotations)
	if err != nil {
		return err
	}
	return k8s.TrafficSteps(spec, steps)
}

// sameHeaderRoutes: the same header routes, names and matches, in the same order.
func sameHeaderRoutes(a, b []k8s.HeaderRoute) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || fmt.Sprint(a[i].Match) != fmt.Sprint(b[i].Match) {
			return false
		}
	}
	return true
}

// knownHeaderRoutes is every header route the steps add (setHeaderRoute with a match).
func knownHeaderRoutes(steps []k8s.RolloutStep) []k8s.HeaderRoute {
	var out []k8s.HeaderRoute
	for _, st := range steps {
		if h := st.SetHeaderRoute; h != nil && len(h.Match) > 0 {
			out = append(out, *h)
		}
	}
	return out
}

// syncRoute moves the traffic for a sync's plan (nothing without a valid traffic
// annotation, or while an invalid annotation holds the rollout).
func (rt *router) syncRoute(ctx workflow.Context, ref activities.DeploymentRef, snap k8s.Snapshot, plan k8s.Plan) error {
	rt.applyWaited(ctx)
	rt.spec, rt.keptStable = nil, false
	fencing := rt.RouteFence > rt.RouteFenced || rt.recheck
	rt.recheck = false
	d := k8s.Effective(snap.Deployment)
	spec, err := k8s.ParseTraffic(d.Annotations)
	if spec == nil && err == nil && rt.Traffic != nil && rt.Traffic.Stable.Service != "" &&
		workflow.GetVersion(ctx, changeTrafficRelease, workflow.DefaultVersion, 1) == 1 {
		return rt.release(ctx, ref)
	}
	if spec == nil || err != nil || rt.AnnotationError != "" || plan.CanaryStale {
		return nil
	}
	// The stable Service selects the stable template; the canary Service the new one during a
	// rollout, the stable one otherwise. The template that completes in this sync is the
	// stable one from here on.
	stable, canary := rt.StableHash, rt.LastHash
	if plan.Phase == k8s.PhaseComplete || stable == "" {
		stable = canary
	}
	// The stable Service never moves to a template with no available pod while the pods it
	// selects serve: a sync that takes the new template for the stable one before its
	// ReplicaSet has a pod (the next image right after a rollout completed) leaves it where it
	// is, and the new template is the canary's.
	availNow, availAfter := k8s.AvailablePods(snap.ReplicaSets), k8s.AvailableAfter(snap.ReplicaSets, plan)
	if cur := rt.Traffic; cur != nil && cur.Stable.Hash != "" && stable != cur.Stable.Hash {
		if availNow[stable] <= 0 && availNow[cur.Stable.Hash] > 0 && workflow.GetVersion(ctx, changeTrafficStableServes, workflow.DefaultVersion, 1) == 1 {
			stable, rt.keptStable = cur.Stable.Hash, true
		}
	}
	target := int32(100)
	var headers []k8s.HeaderRoute
	switch s := rt.Steps; {
	case rt.Abort != nil || canary == stable:
		target, canary = 0, stable
	case s != nil && !s.Full && s.Step < len(rt.StepList):
		target = rt.weight()
		headers = k8s.ActiveHeaderRoutes(rt.StepList, s.Step)
		// A header route goes only to a canary with available pods, before and after the
		// plan's writes.
		if len(headers) > 0 && min(availNow[canary], availAfter[canary]) <= 0 &&
			workflow.GetVersion(ctx, changeTrafficStepPods, workflow.DefaultVersion, 1) == 1 {
			headers = nil
		}
	}
	ask := k8s.TrafficAsk{Target: target, Stable: stable, Canary: canary}
	if rt.Abort != nil {
		ask.Aborted = rt.Abort.Hash
	}
	dec := k8s.DecideTraffic(ask, snap.ReplicaSets, plan, rt.trafficChange(ctx))
	canary, weight, avail, after, handover := dec.Canary, dec.Weight, dec.Available, dec.After, dec.Handover
	want := k8s.TrafficState{StableHash: stable, CanaryHash: canary, Route: k8s.RouteState{CanaryWeight: weight, HeaderRoutes: headers}}
	in := activities.SyncTrafficInput{Deployment: ref, Spec: *spec, Want: want, Available: avail, AvailableAfter: after, Handover: handover,
		Abort: dec.Abort || rt.Abort != nil, SizesAfter: k8s.SizesAfter(snap.ReplicaSets, plan), KnownHeaderRoutes: knownHeaderRoutes(rt.StepList), Fence: rt.RouteFence}
	routeName := fmt.Sprintf("%s rule %d", spec.HTTPRoute.Name, spec.HTTPRoute.Rule)
	changed := rt.differs(routeName, want)
	if !changed && !fencing && rt.Traffic.Check == "holds" && rt.Traffic.Hold == "" && sameHeaderRoutes(rt.Traffic.HeaderRoutes, headers) &&
		workflow.GetVersion(ctx, changeTrafficUnchanged, workflow.DefaultVersion, 1) == 1 {
		// The route and the Services are as the last move left them and as wanted: no reads,
		// no writes. Every sync re-reading them spent the client budget its writes needed
		// (six routed Deployments at QPS 20 starved their own writes for minutes).
		rt.Traffic.Stable.Available, rt.Traffic.Canary.Available = avail[stable], avail[canary]
		rt.ask, rt.spec = &ask, spec
		return nil
	}
	if changed {
		in.Events = []k8s.Event{{Type: "Normal", Reason: "TrafficShifted", Message: k8s.TrafficMessage(routeName, *spec, want, avail, target)}}
	}
	var res activities.SyncTrafficResult
	sctx := withSummary(ctx, fmt.Sprintf("route %s: canary %s %d%%, stable %s (headers: %s)", routeName, canary, want.Route.CanaryWeight, stable, k8s.HeaderRouteNames(headers)))
	err = workflow.ExecuteLocalActivity(sctx, a.SyncTraffic, in).Get(ctx, &res)
	rt.warnChecks(ctx, routeName, res)
	if err != nil {
		if rt.returning(ask) && !activities.IsKind(err, activities.ErrStale) && !activities.IsKind(err, activities.ErrBusy) &&
			workflow.GetVersion(ctx, changeTrafficErrorReturns, workflow.DefaultVersion, 1) == 1 {
			// The way back to the stable template must not wait on a route that cannot be moved
			// (deleted, unreadable, another rule on our Services): the Services select every
			// pod of the Deployment, so whatever the route sends is served, and the plan
			// restores the ReplicaSets.
			return rt.fallBack(ctx, ref, *spec, routeName, err)
		}
		return fmt.Errorf("sync traffic on httproute %s: %w", routeName, err)
	}
	rt.record(ctx, routeName, res, changed)
	rt.ask, rt.spec = &ask, spec
	// The fence as the route carries it now: ours once written, or a higher one found there
	// (a run that lost count), which this run's waits take up.
	rt.RouteFenced = max(rt.RouteFenced, res.Fence)
	rt.RouteFence = max(rt.RouteFence, res.Fence)
	return nil
}

// warnChecks records a TrafficInvariant warning for each move of res whose route failed its
// invariant check.
func (rt *router) warnChecks(ctx workflow.Context, routeName string, res activities.SyncTrafficResult) {
	for _, m := range res.Moves {
		if m.Check != "" {
			rt.recordStepWarning(ctx, "TrafficInvariant", "Traffic move on "+routeName+": "+m.Check)
		}
	}
}

// record keeps the route as a traffic move left it (res) in the state; changed: the move
// changed what the state's route says (its weight, templates or header routes).
func (rt *router) record(ctx workflow.Context, routeName string, res activities.SyncTrafficResult, changed bool) {
	st := &contract.TrafficStatus{
		Route: routeName, StableWeight: res.Stable.Weight, CanaryWeight: res.Canary.Weight,
		Stable: res.Stable, Canary: res.Canary, HeaderRoutes: res.After.Route.HeaderRoutes, Check: "holds", Hold: res.Hold,
	}
	if res.Check != "" {
		st.Check = res.Check
	}
	held := rt.Traffic != nil && rt.Traffic.Hold != ""
	rt.Traffic = st
	if changed || held != (res.Hold != "") {
		rt.upsertStepState(ctx)
	}
}

// applyWaited records the route as the last wait's own moves left it (AwaitResult.Traffic,
// change inline-traffic-moves), as a sync records its SyncTraffic's: the warnings of its
// invariant checks, the route in the state. The sync that follows weighs its own move from
// there, and writes nothing when the route is already as it wants.
func (rt *router) applyWaited(ctx workflow.Context) {
	res := rt.waited
	rt.waited = nil
	if res == nil || rt.Traffic == nil {
		return
	}
	route := rt.Traffic.Route
	rt.warnChecks(ctx, route, *res)
	rt.record(ctx, route, *res, rt.differs(route, res.After))
}

// differs reports whether the state's route is not st on route: another route, weight,
// template or header routes.
func (rt *router) differs(route string, st k8s.TrafficState) bool {
	t := rt.Traffic
	return t == nil || t.Route != route || t.CanaryWeight != st.Route.CanaryWeight || t.Stable.Hash != st.StableHash ||
		t.Canary.Hash != st.CanaryHash || k8s.HeaderRouteNames(t.HeaderRoutes) != k8s.HeaderRouteNames(st.Route.HeaderRoutes)
}

// fallBack gives both Services their own selectors back (every pod of the Deployment)
// when the route cannot be moved on the way back to the stable template, and says why in an
// event. The next sync routes again once the route can be read.
func (rt *router) fallBack(ctx workflow.Context, ref activities.DeploymentRef, spec k8s.TrafficSpec, routeName string, cause error) error {
	in := activities.ReleaseTrafficInput{Deployment: ref, Services: []string{spec.StableService, spec.CanaryService}, Events: []k8s.Event{{
		Type: "Warning", Reason: "TrafficFallback",
		Message: fmt.Sprintf("Returning to the stable template without moving httproute %s (%v): Services %s and %s select every pod of the Deployment until it can be moved",
			routeName, cause, spec.StableService, spec.CanaryService),
	}}}
	var res activities.ReleaseTrafficResult
	fctx := withSummary(ctx, fmt.Sprintf("Services %s and %s select every pod of %s/%s (httproute %s not moved)", spec.StableService, spec.CanaryService, ref.Namespace, ref.Name, routeName))
	if err := workflow.ExecuteLocalActivity(fctx, a.ReleaseTraffic, in).Get(ctx, &res); err != nil {
		return fmt.Errorf("sync traffic on httproute %s: %v; select every pod instead: %w", routeName, cause, err)
	}
	rt.Traffic = &contract.TrafficStatus{Route: routeName, Check: "holds", Hold: "route not moved, the Services select every pod: " + cause.Error(),
		Stable: k8s.Backend{Service: spec.StableService}, Canary: k8s.Backend{Service: spec.CanaryService}}
	rt.ask = nil
	rt.upsertStepState(ctx)
	return nil
}

// release gives the Services of a Deployment that lost its traffic annotation their
// selectors back (activities.ReleaseTraffic) and forgets the route.
func (rt *router) release(ctx workflow.Context, ref activities.DeploymentRef) error {
	t := rt.Traffic
	in := activities.ReleaseTrafficInput{Deployment: ref, Services: []string{t.Stable.Service, t.Canary.Service}, Events: []k8s.Event{{
		Type: "Normal", Reason: "TrafficReleased",
		Message: fmt.Sprintf("The %s annotation is gone: Services %s and %s select as their own selectors say again", k8s.TrafficAnnotation, t.Stable.Service, t.Canary.Service),
	}}}
	var res activities.ReleaseTrafficResult
	rctx := withSummary(ctx, fmt.Sprintf("give Services %s and %s of %s/%s their own selectors back", t.Stable.Service, t.Canary.Service, ref.Namespace, ref.Name))
	if err := workflow.ExecuteLocalActivity(rctx, a.ReleaseTraffic, in).Get(ctx, &res); err != nil {
		return fmt.Errorf("give the services their selectors back: %w", err)
	}
	rt.Traffic, rt.ask = nil, nil
	rt.upsertStepState(ctx)
	return nil
}

// trafficChange is DecideTraffic's question for the run: is this change in force? It asks
// workflow.GetVersion, and remembers the answer for AwaitChange (AwaitInput.Traffic), which
// decides the same way.
func (rt *router) trafficChange(ctx workflow.Context) func(string) bool {
	return func(change string) bool {
		on := workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == 1
		if rt.asked == nil {
			rt.asked = map[string]bool{}
		}
		rt.asked[change] = on
		return on
	}
}

// stepReached reports whether the route carries the current setWeight step's weight as
// far as the ReplicaSets' sizes allow (k8s.TrafficStepReached): a step passes only then, as in
// Argo Rollouts, so the pause or analysis after it sees the weight it asked for. True without
// traffic routing.
func (rt *router) stepReached(ctx workflow.Context, snap k8s.Snapshot, plan k8s.Plan) bool {
	ask := rt.ask
	if rt.Traffic == nil || ask == nil || ask.Canary == ask.Stable {
		return true
	}
	sizes := k8s.SizesAfter(snap.ReplicaSets, plan)
	reached := k8s.TrafficStepReached(rt.Traffic.CanaryWeight, ask.Target, sizes[ask.Canary], sizes[ask.Stable])
	if rt.headerStep() && sizes[ask.Canary] > 0 {
		// A canary with no pods at this step gets its header route once it has some.
		want := k8s.ActiveHeaderRoutes(rt.StepList, rt.Steps.Step)
		reached = reached && k8s.HeaderRouteNames(rt.Traffic.HeaderRoutes) == k8s.HeaderRouteNames(want)
	}
	if reached {
		return true
	}
	return !rt.trafficChange(ctx)(changeTrafficStepWeight)
}
