package activities

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/temporal-rollout/rollout/k8s"
)

var trafficSpec = k8s.TrafficSpec{HTTPRoute: k8s.HTTPRouteRef{Name: "web"}, StableService: "web-stable", CanaryService: "web-canary"}

func httpRoute(stableWeight int64, extra ...any) *unstructured.Unstructured {
	rules := []any{map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
		"backendRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "web-stable", "port": int64(80), "weight": stableWeight}},
	}}
	rules = append(rules, extra...)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"namespace": "default", "name": "web", "resourceVersion": "1"},
		"spec":     map[string]any{"rules": rules},
	}}
}

// routeWith is httpRoute with a canary backendRef beside the stable one.
func routeWith(stableWeight, canaryWeight int64) *unstructured.Unstructured {
	r := httpRoute(stableWeight)
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	refs := rules[0].(map[string]any)["backendRefs"].([]any)
	rules[0].(map[string]any)["backendRefs"] = append(refs, map[string]any{"name": "web-canary", "port": int64(80), "weight": canaryWeight})
	_ = unstructured.SetNestedSlice(r.Object, rules, "spec", "rules")
	return r
}

func service(name, hash string) *corev1.Service {
	sel := map[string]string{"app": "web"}
	if hash != "" {
		sel[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"}, Spec: corev1.ServiceSpec{Selector: sel}}
}

func trafficActivities(route *unstructured.Unstructured, svcs ...runtime.Object) (*Activities, *dynamicfake.FakeDynamicClient, *fake.Clientset) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{HTTPRouteResource: "HTTPRouteList"}, route)
	kc := fake.NewSimpleClientset(svcs...)
	return &Activities{Client: kc, Dynamic: dyn}, dyn, kc
}

// withPods puts the Deployment web and one ReplicaSet per template in the fake cluster: avail
// available pods of size replicas (sizes, or avail where sizes leaves it out). The gate reads
// them just before its writes.
func withPods(t *testing.T, kc *fake.Clientset, avail, sizes map[string]int32) {
	t.Helper()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "web-uid"}, Spec: appsv1.DeploymentSpec{Selector: sel}}
	if err := kc.Tracker().Add(d); err != nil {
		t.Fatal(err)
	}
	hashes := map[string]bool{}
	for h := range avail {
		hashes[h] = true
	}
	for h := range sizes {
		hashes[h] = true
	}
	for h := range hashes {
		n, ok := sizes[h]
		if !ok {
			n = avail[h]
		}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-" + h, UID: types.UID("rs-" + h),
			Labels:          map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: h},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: &n, Selector: sel},
			Status: appsv1.ReplicaSetStatus{Replicas: max(n, avail[h]), ReadyReplicas: avail[h], AvailableReplicas: avail[h]}}
		if err := kc.Tracker().Add(rs); err != nil {
			t.Fatal(err)
		}
	}
}

func readBack(t *testing.T, a *Activities, dyn *dynamicfake.FakeDynamicClient, kc *fake.Clientset) (weights map[string]int64, rules []string, stable, canary string) {
	t.Helper()
	ctx := context.Background()
	r, err := dyn.Resource(HTTPRouteResource).Namespace("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	weights = map[string]int64{}
	for i, x := range rs {
		m := x.(map[string]any)
		name, _ := m["name"].(string)
		rules = append(rules, name)
		if i != 0 {
			continue
		}
		refs, _, _ := unstructured.NestedSlice(m, "backendRefs")
		for _, ref := range refs {
			rm := ref.(map[string]any)
			weights[rm["name"].(string)] = rm["weight"].(int64)
		}
	}
	for _, n := range []string{"web-stable", "web-canary"} {
		svc, err := kc.CoreV1().Services("default").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n == "web-stable" {
			stable = svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
		} else {
			canary = svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	return weights, rules, stable, canary
}

func TestSyncTraffic(t *testing.T) {
	hr := []k8s.HeaderRoute{{Name: "testers", Match: []k8s.HeaderMatch{{Name: "X-Canary", Value: "true"}}}}
	managed := map[string]any{"name": "temporal-rollout-old", "backendRefs": []any{map[string]any{"name": "web-canary", "port": int64(80)}},
		"matches": []any{map[string]any{"headers": []any{map[string]any{"name": "X-Old", "value": "1"}}}}}
	tests := []struct {
		name        string
		route       *unstructured.Unstructured
		stable      string
		canary      string
		want        k8s.TrafficState
		avail       map[string]int32
		after       map[string]int32
		handover    bool
		abort       bool
		wantWeights map[string]int64
		wantRules   []string
		wantStable  string
		wantCanary  string
		wantErr     string
		wantCheck   string
		wantHold    string
		known       []k8s.HeaderRoute
	}{
		{name: "a new rollout: canary backendRef added at 0, canary selector to the new hash",
			route: httpRoute(1), stable: "n", canary: "n", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m"},
			avail: map[string]int32{"n": 10}, wantWeights: map[string]int64{"web-stable": 100, "web-canary": 0}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "raise to 20 with a header route; the old managed rule goes",
			route: httpRoute(100, managed), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20, HeaderRoutes: hr}},
			avail: map[string]int32{"n": 8, "m": 2}, wantWeights: map[string]int64{"web-stable": 80, "web-canary": 20}, wantRules: []string{"", "temporal-rollout-testers"}, wantStable: "n", wantCanary: "m"},
		{name: "a raise past the canary's share of the pods read now is cut to the share",
			route: httpRoute(100), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 30}},
			avail: map[string]int32{"n": 8, "m": 2}, wantWeights: map[string]int64{"web-stable": 80, "web-canary": 20}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "the stable's last pod goes in the sync: the canary takes everything first",
			route: httpRoute(12), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 88}},
			avail: map[string]int32{"n": 1, "m": 8}, after: map[string]int32{"n": 0, "m": 8},
			wantWeights: map[string]int64{"web-stable": 0, "web-canary": 100}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "the workflow decided on pods that have gone since: no weight on the canary's",
			route: httpRoute(80), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20}},
			avail: map[string]int32{"n": 8, "m": 0}, after: map[string]int32{"n": 8, "m": 2},
			wantWeights: map[string]int64{"web-stable": 100, "web-canary": 0}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "the same as a handover: checked once the plan has run, canary 100",
			route: httpRoute(12), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 100}},
			avail: map[string]int32{"n": 1, "m": 8}, after: map[string]int32{"n": 0, "m": 8}, handover: true,
			wantWeights: map[string]int64{"web-stable": 0, "web-canary": 100}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "a header rule whose name the CRDs pruned (before v1.4) is found by its shape and replaced, not duplicated",
			route: httpRoute(80, map[string]any{"backendRefs": []any{map[string]any{"name": "web-canary", "port": int64(80)}},
				"matches": []any{map[string]any{"headers": []any{map[string]any{"name": "X-Canary", "value": "true"}}}}}),
			stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20}}, known: hr,
			avail: map[string]int32{"n": 8, "m": 2}, wantWeights: map[string]int64{"web-stable": 80, "web-canary": 20}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "a user's own unnamed header rule to the canary Service is not taken for ours: refused, and kept",
			route: httpRoute(80, map[string]any{"backendRefs": []any{map[string]any{"name": "web-canary", "port": int64(80)}},
				"matches": []any{map[string]any{"headers": []any{map[string]any{"name": "X-Beta", "value": "1"}}}}}),
			stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20}}, known: hr,
			avail: map[string]int32{"n": 8, "m": 2}, wantErr: "rule 1 also sends to Service web-canary"},
		{name: "another rule sending to the stable Service is refused",
			route: httpRoute(100, map[string]any{"backendRefs": []any{map[string]any{"name": "web-stable", "port": int64(80)}},
				"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/api"}}}}),
			stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20}},
			avail: map[string]int32{"n": 8, "m": 2}, wantErr: "rule 1 also sends to Service web-stable"},
		{name: "an abort keeps the canary's share while the stable pods come back: checked for pods behind each weight only",
			route: routeWith(0, 100), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 75}},
			avail: map[string]int32{"n": 3, "m": 9}, after: map[string]int32{"n": 3, "m": 9}, abort: true,
			wantWeights: map[string]int64{"web-stable": 25, "web-canary": 75}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "an abort never raises the canary: at 0 with 3 canary pods it stays 0, not AbortWeight's 24",
			route: routeWith(100, 0), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 24}},
			avail: map[string]int32{"n": 10, "m": 3}, abort: true,
			wantWeights: map[string]int64{"web-stable": 100, "web-canary": 0}, wantRules: []string{""}, wantStable: "n", wantCanary: "m"},
		{name: "the rollback signal at 100: no canary asked, the stable template has no pod: the canary keeps its pods and its 100",
			route: routeWith(0, 100), stable: "n", canary: "m", want: k8s.TrafficState{StableHash: "n", CanaryHash: "n"},
			avail: map[string]int32{"n": 0, "m": 10}, after: map[string]int32{"n": 3, "m": 10},
			wantWeights: map[string]int64{"web-stable": 0, "web-canary": 100}, wantRules: []string{""}, wantStable: "n", wantCanary: "m", wantHold: ""},
		{name: "the stable Service does not move to a template that is not fully available",
			route: routeWith(100, 0), stable: "m", canary: "m", want: k8s.TrafficState{StableHash: "x", CanaryHash: "x"},
			avail: map[string]int32{"m": 10, "x": 2}, after: map[string]int32{"m": 10, "x": 10},
			wantWeights: map[string]int64{"web-stable": 84, "web-canary": 16}, wantRules: []string{""}, wantStable: "m", wantCanary: "x",
			wantHold: "stable Service web-stable stays on m: template x has 2 of 10 pods available"},
		{name: "no such rule", route: func() *unstructured.Unstructured {
			r := httpRoute(100)
			r.Object["spec"] = map[string]any{"rules": []any{}}
			return r
		}(), stable: "n", canary: "n", want: k8s.TrafficState{StableHash: "n", CanaryHash: "n"}, wantErr: "rule 0 does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, dyn, kc := trafficActivities(tt.route, service("web-stable", tt.stable), service("web-canary", tt.canary))
			withPods(t, kc, tt.avail, tt.after)
			res, err := a.SyncTraffic(context.Background(), SyncTrafficInput{Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Spec: trafficSpec, Want: tt.want, Available: tt.avail, AvailableAfter: tt.after, Handover: tt.handover, Abort: tt.abort, KnownHeaderRoutes: tt.known})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SyncTraffic error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			weights, rules, stable, canary := readBack(t, a, dyn, kc)
			if !reflect.DeepEqual(weights, tt.wantWeights) || !reflect.DeepEqual(rules, tt.wantRules) || stable != tt.wantStable || canary != tt.wantCanary {
				t.Errorf("got weights %v, rules %q, selectors %s/%s; want %v, %q, %s/%s", weights, rules, stable, canary, tt.wantWeights, tt.wantRules, tt.wantStable, tt.wantCanary)
			}
			if res.Check != tt.wantCheck {
				t.Errorf("check %q, want %q", res.Check, tt.wantCheck)
			}
			if res.Hold != tt.wantHold {
				t.Errorf("hold %q, want %q", res.Hold, tt.wantHold)
			}
		})
	}
}

// Abort: the route goes back to 100/0 before the canary Service switches.
func TestSyncTrafficAbortOrder(t *testing.T) {
	r := httpRoute(70)
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	refs := rules[0].(map[string]any)["backendRefs"].([]any)
	rules[0].(map[string]any)["backendRefs"] = append(refs, map[string]any{"name": "web-canary", "port": int64(80), "weight": int64(30)})
	_ = unstructured.SetNestedSlice(r.Object, rules, "spec", "rules")
	a, dyn, kc := trafficActivities(r, service("web-stable", "n"), service("web-canary", "m"))
	withPods(t, kc, map[string]int32{"n": 7, "m": 3}, map[string]int32{"n": 10, "m": 0})
	res, err := a.SyncTraffic(context.Background(), SyncTrafficInput{
		Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Spec: trafficSpec,
		Want: k8s.TrafficState{StableHash: "n", CanaryHash: "n"}, Available: map[string]int32{"n": 7, "m": 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, act := range append(dyn.Actions(), kc.Actions()...) {
		if act.GetVerb() == "update" {
			order = append(order, act.GetResource().Resource)
		}
	}
	if res.Before.Route.CanaryWeight != 30 || len(res.Moves) < 2 || res.Moves[0].Move.Route == nil || res.Moves[0].Move.Route.CanaryWeight != 0 || !res.Moves[0].Wrote || res.Moves[1].Move.Service != "web-canary" {
		t.Errorf("moves %+v, want the route to 0 first, then the canary Service", res.Moves)
	}
	weights, _, stable, canary := readBack(t, a, dyn, kc)
	if weights["web-canary"] != 0 || weights["web-stable"] != 100 || stable != "n" || canary != "n" {
		t.Errorf("after abort: weights %v, selectors %s/%s; want 100/0 on n/n", weights, stable, canary)
	}
	if !reflect.DeepEqual(order, []string{"httproutes", "services"}) {
		t.Errorf("writes %v, want [httproutes services]", order)
	}
}

func TestGatewaysAccepted(t *testing.T) {
	parent := func(status string, gen int64) any {
		return map[string]any{"parentRef": map[string]any{"name": "gateway"}, "conditions": []any{
			map[string]any{"type": "ResolvedRefs", "status": "True", "observedGeneration": gen},
			map[string]any{"type": "Accepted", "status": status, "observedGeneration": gen},
		}}
	}
	tests := []struct {
		name    string
		parents []any
		want    bool
	}{
		{name: "no gateway reports on the route", want: true},
		{name: "accepted at the generation written", parents: []any{parent("True", 7)}, want: true},
		{name: "accepted at a later generation", parents: []any{parent("True", 8)}, want: true},
		{name: "accepted at an older generation", parents: []any{parent("True", 6)}},
		{name: "not accepted", parents: []any{parent("False", 7)}},
		{name: "one of two gateways behind", parents: []any{parent("True", 7), parent("True", 6)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httpRoute(100)
			if tt.parents != nil {
				r.Object["status"] = map[string]any{"parents": tt.parents}
			}
			if got := gatewaysAccepted(r, 7); got != tt.want {
				t.Errorf("gatewaysAccepted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEndpointsFollow(t *testing.T) {
	pod := func(name, hash, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	slice := func(ready bool, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-canary-" + strings.Join(addrs, "-"),
			Labels: map[string]string{discoveryv1.LabelServiceName: "web-canary"}}, AddressType: discoveryv1.AddressTypeIPv4}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		return s
	}
	pods := []runtime.Object{pod("old-1", "n", "10.0.0.1"), pod("new-1", "m", "10.0.0.2")}
	tests := []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{name: "no EndpointSlice: nothing to wait for", objs: pods},
		{name: "the slice lists the new pod", objs: append([]runtime.Object{slice(true, "10.0.0.2")}, pods...)},
		{name: "the slice still lists the old pod", objs: append([]runtime.Object{slice(true, "10.0.0.1")}, pods...),
			want: "ready endpoint 10.0.0.1 is not a pod of pod-template-hash m"},
		{name: "an empty slice", objs: append([]runtime.Object{slice(true)}, pods...), want: "no ready endpoint yet"},
		{name: "the new pod not ready in the slice", objs: append([]runtime.Object{slice(false, "10.0.0.2")}, pods...), want: "no ready endpoint yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := endpointsFollow(context.Background(), fake.NewSimpleClientset(tt.objs...), "default", "web-canary", "m")
			if err != nil || got != tt.want {
				t.Errorf("endpointsFollow = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// ReleaseTraffic removes the pod-template-hash the routing added to each Service's selector,
// and only that; a Service already without it is not written.
func TestReleaseTraffic(t *testing.T) {
	a, _, kc := trafficActivities(httpRoute(100), service("web-stable", "n"), service("web-canary", ""))
	res, err := a.ReleaseTraffic(context.Background(), ReleaseTrafficInput{Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Services: []string{"web-stable", "web-canary", "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Released, []string{"web-stable"}) {
		t.Errorf("released %v, want [web-stable]", res.Released)
	}
	for _, n := range []string{"web-stable", "web-canary"} {
		svc, err := kc.CoreV1().Services("default").Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(svc.Spec.Selector, map[string]string{"app": "web"}) {
			t.Errorf("service %s selector %v, want the user's app=web", n, svc.Spec.Selector)
		}
	}
}

// TestSyncTrafficAwaitsGateways isolates the wait for the gateways after a move that takes
// traffic off the canary: a gateway that has not accepted the route as written within
// gatewayWait fails the sync (TrafficError, the route written and the move reported, so the
// scale-down the move allows waits); one that accepts it in time lets the sync go on.
func TestSyncTrafficAwaitsGateways(t *testing.T) {
	defer func(w time.Duration) { gatewayWait = w }(gatewayWait)
	gatewayWait = 400 * time.Millisecond
	accepted := func(gen int64) map[string]any {
		return map[string]any{"parents": []any{map[string]any{"parentRef": map[string]any{"name": "gateway"},
			"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "observedGeneration": gen}}}}}
	}
	for _, tt := range []struct {
		name     string
		acceptAt int // the route read that first reports the written generation accepted (0: never)
		wantErr  bool
	}{
		{name: "the gateway never accepts the written generation", wantErr: true},
		{name: "the gateway accepts it on the third read", acceptAt: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := routeWith(50, 50)
			r.SetGeneration(7)
			r.Object["status"] = accepted(7)
			a, dyn, kc := trafficActivities(r, service("web-stable", "n"), service("web-canary", "m"))
			withPods(t, kc, map[string]int32{"n": 10, "m": 10}, nil)
			reads := 0
			dyn.PrependReactor("update", "httproutes", func(act clienttesting.Action) (bool, runtime.Object, error) {
				// The apiserver bumps the generation of a spec write; the status stays as the
				// gateway last wrote it.
				obj := act.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
				obj.SetGeneration(8)
				obj.Object["status"] = accepted(7)
				if err := dyn.Tracker().Update(HTTPRouteResource, obj, "default"); err != nil {
					return true, nil, err
				}
				return true, obj, nil
			})
			dyn.PrependReactor("get", "httproutes", func(act clienttesting.Action) (bool, runtime.Object, error) {
				reads++
				obj, err := dyn.Tracker().Get(HTTPRouteResource, "default", "web")
				if err != nil {
					return true, nil, err
				}
				u := obj.(*unstructured.Unstructured).DeepCopy()
				if tt.acceptAt > 0 && reads >= tt.acceptAt+1 { // the sync's own read comes first
					u.Object["status"] = accepted(u.GetGeneration())
				}
				return true, u, nil
			})
			res, err := a.SyncTraffic(context.Background(), SyncTrafficInput{
				Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Spec: trafficSpec,
				Want:      k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: 20}},
				Available: map[string]int32{"n": 10, "m": 10},
			})
			if tt.wantErr {
				if !IsKind(err, ErrTraffic) || !strings.Contains(err.Error(), "have not accepted generation 8") {
					t.Fatalf("err = %v, want a TrafficError naming generation 8", err)
				}
			} else if err != nil {
				t.Fatalf("err = %v, want the sync to go on once the gateway accepts", err)
			}
			if len(res.Moves) != 1 || !res.Moves[0].Wrote || res.Moves[0].Move.Route == nil || res.Moves[0].Move.Route.CanaryWeight != 20 {
				t.Errorf("moves %+v, want the route written at canary weight 20", res.Moves)
			}
			if weights, _, _, _ := readBack(t, a, dyn, kc); weights["web-canary"] != 20 {
				t.Errorf("route weights %v, want the canary at 20 as written", weights)
			}
		})
	}
}

// TestSyncTrafficFence: the workflow's sync writes its wait fence on the route before any move,
// even with no move to make; a wait's move (FenceCheck) moves nothing on a route fenced at
// another epoch, and no Service at all.
func TestSyncTrafficFence(t *testing.T) {
	fenced := func(epoch string) *unstructured.Unstructured {
		r := routeWith(70, 30)
		if epoch != "" {
			r.SetAnnotations(map[string]string{RouteFenceAnnotation + "0": epoch})
		}
		return r
	}
	at := func(w int32) k8s.TrafficState {
		return k8s.TrafficState{StableHash: "n", CanaryHash: "m", Route: k8s.RouteState{CanaryWeight: w}}
	}
	tests := []struct {
		name        string
		route       *unstructured.Unstructured
		want        k8s.TrafficState
		fence       int64
		check       bool
		wantErr     string
		wantWeight  int64
		wantFence   string
		wantCanary  string
		wantWritten int
		sizes       map[string]int32
	}{
		{name: "the sync writes its fence with no move to make", route: fenced(""), want: at(30), fence: 1,
			wantWeight: 30, wantFence: "1", wantCanary: "m", wantWritten: 1},
		{name: "the sync writes its fence before its move", route: fenced("1"), want: at(20), fence: 2,
			wantWeight: 20, wantFence: "2", wantCanary: "m", wantWritten: 2},
		{name: "a sync with the route's fence writes no fence", route: fenced("2"), want: at(30), fence: 2,
			wantWeight: 30, wantFence: "2", wantCanary: "m"},
		{name: "a wait under the route's fence moves the route", route: fenced("1"), want: at(20), fence: 1, check: true,
			wantWeight: 20, wantFence: "1", wantCanary: "m", wantWritten: 1},
		{name: "a wait under no fence on a route never fenced moves it", route: fenced(""), want: at(20), check: true,
			wantWeight: 20, wantCanary: "m", wantWritten: 1},
		{name: "a superseded wait moves nothing", route: fenced("2"), want: at(20), fence: 1, check: true,
			wantErr: ErrFenced, wantWeight: 30, wantFence: "2", wantCanary: "m"},
		{name: "a wait moves no Service", route: fenced("1"), want: k8s.TrafficState{StableHash: "n", CanaryHash: "n"}, fence: 1, check: true,
			sizes: map[string]int32{"n": 10, "m": 0}, wantErr: ErrFenced, wantWeight: 0, wantFence: "1", wantCanary: "m", wantWritten: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, dyn, kc := trafficActivities(tt.route, service("web-stable", "n"), service("web-canary", "m"))
			withPods(t, kc, map[string]int32{"n": 7, "m": 3}, tt.sizes)
			res, err := a.SyncTraffic(context.Background(), SyncTrafficInput{
				Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Spec: trafficSpec, Want: tt.want,
				Available: map[string]int32{"n": 7, "m": 3}, Fence: tt.fence, FenceCheck: tt.check,
			})
			if (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && !IsKind(err, tt.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			weights, _, _, canary := readBack(t, a, dyn, kc)
			r, gerr := dyn.Resource(HTTPRouteResource).Namespace("default").Get(context.Background(), "web", metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			written := 0
			for _, act := range dyn.Actions() {
				if act.GetVerb() == "update" {
					written++
				}
			}
			if f := r.GetAnnotations()[RouteFenceAnnotation+"0"]; weights["web-canary"] != tt.wantWeight || f != tt.wantFence || canary != tt.wantCanary || written != tt.wantWritten {
				t.Errorf("canary weight %d, fence %q, canary Service on %q, %d route writes; want %d, %q, %q, %d",
					weights["web-canary"], f, canary, written, tt.wantWeight, tt.wantFence, tt.wantCanary, tt.wantWritten)
			}
			if err == nil && res.Fence != tt.fence {
				t.Errorf("result's fence %d, want %d", res.Fence, tt.fence)
			}
		})
	}
}
