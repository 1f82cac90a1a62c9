package k8s

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

func TestTrafficWeight(t *testing.T) {
	tests := []struct {
		name                   string
		target, canary, stable int32
		want                   int32
	}{
		{name: "10 replicas at 30, stable at 8, 2 of 3 canary pods available", target: 30, canary: 2, stable: 8, want: 20},
		{name: "10 replicas at 30, stable at 7, all 3 canary pods available", target: 30, canary: 3, stable: 7, want: 30},
		{name: "canary created, no pod available yet", target: 30, canary: 0, stable: 10, want: 0},
		{name: "surge: canary 3 available beside 10 stable", target: 30, canary: 3, stable: 10, want: 23},
		{name: "10 replicas at 99 with maxSurge: 10 and 1", target: 99, canary: 10, stable: 1, want: 90},
		{name: "all steps passed, stable gone", target: 100, canary: 10, stable: 0, want: 100},
		{name: "all steps passed, one stable pod left", target: 100, canary: 10, stable: 1, want: 90},
		{name: "abort: target 0", target: 0, canary: 3, stable: 7, want: 0},
		{name: "nothing available", target: 50, canary: 0, stable: 0, want: 0},
		{name: "setCanaryScale 1 replica at setWeight 30", target: 30, canary: 1, stable: 7, want: 12},
		{name: "target above 100 is 100", target: 130, canary: 5, stable: 0, want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TrafficWeight(tt.target, tt.canary, tt.stable)
			if got != tt.want {
				t.Errorf("TrafficWeight(%d, %d, %d) = %d, want %d", tt.target, tt.canary, tt.stable, got, tt.want)
			}
			// Whatever the weight function gives keeps the invariant.
			err := CheckTraffic(Backend{Service: "s", Hash: "a", Weight: 100 - got, Available: tt.stable}, Backend{Service: "c", Hash: "b", Weight: got, Available: tt.canary})
			if err != nil && tt.stable > 0 {
				t.Errorf("CheckTraffic on TrafficWeight's result: %v, want nil", err)
			}
		})
	}
}

func TestTrafficHandover(t *testing.T) {
	tests := []struct {
		name         string
		target       int32
		stable       string
		avail, after map[string]int32
		want         bool
	}{
		{name: "all steps passed, the plan takes the stable's last pod", target: 100, stable: "s",
			avail: map[string]int32{"s": 1, "c": 8}, after: map[string]int32{"s": 0, "c": 8}, want: true},
		{name: "the plan leaves the stable one pod", target: 100, stable: "s",
			avail: map[string]int32{"s": 2, "c": 8}, after: map[string]int32{"s": 1, "c": 8}},
		{name: "a step's weight, the stable scaled to 0 (setCanaryScale)", target: 50, stable: "s",
			avail: map[string]int32{"s": 1, "c": 8}, after: map[string]int32{"s": 0, "c": 8}},
		{name: "the stable already has no pod", target: 100, stable: "s",
			avail: map[string]int32{"s": 0, "c": 8}, after: map[string]int32{"s": 0, "c": 8}},
		{name: "no canary pod available after the plan", target: 100, stable: "s",
			avail: map[string]int32{"s": 1, "c": 0}, after: map[string]int32{"s": 0, "c": 0}},
		{name: "both Services on the same pods", target: 100, stable: "c",
			avail: map[string]int32{"c": 8}, after: map[string]int32{"c": 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TrafficHandover(tt.target, tt.stable, "c", tt.avail, tt.after); got != tt.want {
				t.Errorf("TrafficHandover = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckTraffic(t *testing.T) {
	tests := []struct {
		name           string
		stable, canary Backend
		wantErr        []string
	}{
		{name: "canary at its pod share", stable: Backend{Hash: "a", Weight: 80, Available: 8}, canary: Backend{Hash: "b", Weight: 20, Available: 2}},
		{name: "canary above its pod share", stable: Backend{Hash: "a", Weight: 70, Available: 8}, canary: Backend{Service: "web-canary", Hash: "b", Weight: 30, Available: 2},
			wantErr: []string{"canary web-canary takes 30% of the traffic on 2 of 10 available pods (20%)"}},
		{name: "canary with no pod", stable: Backend{Hash: "a", Weight: 99, Available: 10}, canary: Backend{Service: "web-canary", Hash: "b", Weight: 1},
			wantErr: []string{"takes 1% of the traffic on 0 of 10"}},
		{name: "abort: stable takes everything on 7 pods, canary still has 3", stable: Backend{Hash: "a", Weight: 100, Available: 7}, canary: Backend{Hash: "b", Weight: 0, Available: 3}},
		{name: "abort done: canary scaled down", stable: Backend{Hash: "a", Weight: 100, Available: 10}, canary: Backend{Hash: "b", Weight: 0, Available: 0}},
		{name: "abort in the wrong order: canary gone, weight still on it", stable: Backend{Hash: "a", Weight: 70, Available: 7}, canary: Backend{Service: "web-canary", Hash: "b", Weight: 30, Available: 0},
			wantErr: []string{"takes 30% of the traffic on 0 of 7"}},
		{name: "stable with weight and no pod", stable: Backend{Service: "web-stable", Hash: "a", Weight: 10, Available: 0}, canary: Backend{Hash: "b", Weight: 90, Available: 10},
			wantErr: []string{"stable web-stable takes 10% of the traffic with no available pod"}},
		{name: "both select the same pods", stable: Backend{Hash: "a", Weight: 0, Available: 10}, canary: Backend{Hash: "a", Weight: 100, Available: 10}},
		{name: "nothing available", stable: Backend{Hash: "a", Weight: 100}, canary: Backend{Hash: "b"}},
		{name: "weights off", stable: Backend{Hash: "a", Weight: 50, Available: 5}, canary: Backend{Hash: "b", Weight: 20, Available: 5},
			wantErr: []string{"do not add up to 100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTraffic(tt.stable, tt.canary)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("CheckTraffic = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckTraffic = nil, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckTraffic = %q, want it to say %q", err, w)
				}
			}
		})
	}
}

func TestParseTraffic(t *testing.T) {
	tests := []struct {
		name    string
		give    *string
		want    *TrafficSpec
		wantErr []string
	}{
		{name: "absent"},
		{name: "full", give: ptrTo(`{"httpRoute":{"name":"web","rule":1},"stableService":"web-stable","canaryService":"web-canary"}`),
			want: &TrafficSpec{HTTPRoute: HTTPRouteRef{Name: "web", Rule: 1}, StableService: "web-stable", CanaryService: "web-canary"}},
		{name: "rule defaults to 0", give: ptrTo(`{"httpRoute":{"name":"web"},"stableService":"s","canaryService":"c"}`),
			want: &TrafficSpec{HTTPRoute: HTTPRouteRef{Name: "web"}, StableService: "s", CanaryService: "c"}},
		{name: "empty", give: ptrTo(``), wantErr: []string{"is not a JSON object"}},
		{name: "unknown field", give: ptrTo(`{"httpRoute":{"name":"web"},"stableService":"s","canaryService":"c","weight":3}`), wantErr: []string{`unknown field "weight"`}},
		{name: "every problem named", give: ptrTo(`{"httpRoute":{"rule":-1},"stableService":"Web_Stable"}`),
			wantErr: []string{"httpRoute.name is missing", `stableService "Web_Stable" is not a valid Service name`, "canaryService is missing", "httpRoute.rule -1 is not between 0 and 15"}},
		{name: "same service twice", give: ptrTo(`{"httpRoute":{"name":"web"},"stableService":"web","canaryService":"web"}`), wantErr: []string{"must differ"}},
		{name: "trailing data", give: ptrTo(`{"httpRoute":{"name":"web"},"stableService":"s","canaryService":"c"} {}`), wantErr: []string{"has data after the object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{}
			if tt.give != nil {
				ann[TrafficAnnotation] = *tt.give
			}
			got, err := ParseTraffic(ann)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseTraffic = %+v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTraffic = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestTrafficStepsParse(t *testing.T) {
	traffic := &TrafficSpec{HTTPRoute: HTTPRouteRef{Name: "web"}, StableService: "s", CanaryService: "c"}
	tests := []struct {
		name    string
		give    string
		traffic *TrafficSpec
		want    []string
		wantErr []string
	}{
		{name: "header route and canary scale", traffic: traffic,
			give: `[{"setCanaryScale":{"replicas":2}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"setWeight":20},{"setHeaderRoute":{"name":"testers"}},{"setCanaryScale":{"matchTrafficWeight":true}}]`,
			want: []string{"setCanaryScale 2 replicas", "setHeaderRoute: header route testers (X-Canary=true)", "setWeight 20", "setHeaderRoute: removing header route testers", "setCanaryScale matching the traffic weight"}},
		{name: "needs the traffic annotation", give: `[{"setCanaryScale":{"weight":20}},{"setHeaderRoute":{"name":"t","match":[{"name":"X","value":"1"}]}}]`,
			wantErr: []string{"step 1 (setCanaryScale) routes traffic: it needs the temporal-rollout.io/traffic annotation", "step 2 (setHeaderRoute) routes traffic"}},
		{name: "bad canary scale", traffic: traffic, give: `[{"setCanaryScale":{"replicas":-1,"weight":120}}]`,
			wantErr: []string{"exactly one of replicas, weight or matchTrafficWeight, this one has 2", "replicas -1 is negative", "weight 120 is not between 0 and 100"}},
		{name: "bad header route", traffic: traffic, give: `[{"setHeaderRoute":{"name":"Testers!","match":[{"name":"X Canary","value":"","type":"Prefix"}]}}]`,
			wantErr: []string{`name "Testers!" is not a DNS label`, `header name "X Canary"`, `type "Prefix"`, "value is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := ParseSteps(map[string]string{StepsAnnotation: tt.give})
			if err == nil {
				err = TrafficSteps(tt.traffic, steps)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("steps %v: no error, want %q", steps, tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range steps {
				got = append(got, s.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steps %q, want %q", got, tt.want)
			}
		})
	}
}

func TestActiveHeaderRoutesAndScale(t *testing.T) {
	steps, err := ParseSteps(map[string]string{StepsAnnotation: `[
		{"setHeaderRoute":{"name":"a","match":[{"name":"X-A","value":"1"}]}},
		{"setCanaryScale":{"replicas":2}},
		{"setHeaderRoute":{"name":"b","match":[{"name":"X-B","value":"1"}]}},
		{"setHeaderRoute":{"name":"a","match":[{"name":"X-A","value":"2"}]}},
		{"setHeaderRoute":{"name":"b"}},
		{"setCanaryScale":{"matchTrafficWeight":true}}]`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		step      int
		wantNames []string
		wantScale *int32
	}{
		{step: 0, wantNames: []string{"a"}},
		{step: 1, wantNames: []string{"a"}, wantScale: ptrTo[int32](2)},
		{step: 2, wantNames: []string{"a", "b"}, wantScale: ptrTo[int32](2)},
		{step: 4, wantNames: []string{"a"}, wantScale: ptrTo[int32](2)},
		{step: 5, wantNames: []string{"a"}},
	}
	for _, tt := range tests {
		var names []string
		for _, h := range ActiveHeaderRoutes(steps, tt.step) {
			names = append(names, h.Name)
		}
		if !reflect.DeepEqual(names, tt.wantNames) {
			t.Errorf("step %d: header routes %v, want %v", tt.step, names, tt.wantNames)
		}
		sc := ActiveCanaryScale(steps, tt.step)
		if (sc == nil) != (tt.wantScale == nil) || (sc != nil && *sc.Replicas != *tt.wantScale) {
			t.Errorf("step %d: canary scale %+v, want %v", tt.step, sc, tt.wantScale)
		}
	}
	if h := ActiveHeaderRoutes(steps, 3)[0]; h.Match[0].Value != "2" {
		t.Errorf("step 4 replaced route a: match %+v, want value 2", h.Match)
	}
}

func TestTrafficMoves(t *testing.T) {
	spec := TrafficSpec{StableService: "s", CanaryService: "c"}
	hr := []HeaderRoute{{Name: "t", Match: []HeaderMatch{{Name: "X", Value: "1"}}}}
	route := func(w int32, h []HeaderRoute) *RouteState { return &RouteState{CanaryWeight: w, HeaderRoutes: h} }
	tests := []struct {
		name      string
		cur, want TrafficState
		moves     []TrafficMove
	}{
		{name: "raise the weight",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 20}}, want: TrafficState{"N", "M", RouteState{CanaryWeight: 30}},
			moves: []TrafficMove{{Route: route(30, nil)}}},
		{name: "a new rollout: the canary switches without traffic",
			cur: TrafficState{"N", "N", RouteState{}}, want: TrafficState{"N", "M", RouteState{}},
			moves: []TrafficMove{{Service: "c", Hash: "M"}, {Route: route(0, nil)}}},
		{name: "completion: stable switches while the canary takes 100",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 100}}, want: TrafficState{"M", "M", RouteState{}},
			moves: []TrafficMove{{Service: "s", Hash: "M"}, {Route: route(0, nil)}}},
		{name: "abort: traffic back to stable first, header routes removed",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 30, HeaderRoutes: hr}}, want: TrafficState{"N", "N", RouteState{}},
			moves: []TrafficMove{{Route: route(0, nil)}, {Service: "c", Hash: "N"}, {Route: route(0, nil)}}},
		{name: "abort, first sync: the canary keeps its pods, traffic back to stable",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 30, HeaderRoutes: hr}}, want: TrafficState{"N", "M", RouteState{}},
			moves: []TrafficMove{{Route: route(0, nil)}}},
		{name: "a new template mid-rollout",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 30}}, want: TrafficState{"N", "M2", RouteState{CanaryWeight: 0, HeaderRoutes: hr}},
			moves: []TrafficMove{{Route: route(0, nil)}, {Service: "c", Hash: "M2"}, {Route: route(0, hr)}}},
		{name: "the first routed rollout: the canary bridges while the stable Service switches",
			cur: TrafficState{"", "", RouteState{}}, want: TrafficState{"N", "M", RouteState{}},
			moves: []TrafficMove{{Service: "c", Hash: "N"}, {Route: route(100, nil)}, {Service: "s", Hash: "N"}, {Route: route(0, nil)}, {Service: "c", Hash: "M"}, {Route: route(0, nil)}}},
		{name: "the stable switches with traffic on it",
			cur: TrafficState{"N", "M", RouteState{CanaryWeight: 40, HeaderRoutes: hr}}, want: TrafficState{"M", "M", RouteState{}},
			moves: []TrafficMove{{Route: route(100, hr)}, {Service: "s", Hash: "M"}, {Route: route(0, nil)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TrafficMoves(spec, tt.cur, tt.want)
			if !reflect.DeepEqual(got, tt.moves) {
				t.Errorf("TrafficMoves =\n%s\nwant\n%s", describeMoves(got), describeMoves(tt.moves))
			}
		})
	}
}

func describeMoves(ms []TrafficMove) string {
	var out []string
	for _, m := range ms {
		if m.Route != nil {
			out = append(out, fmt.Sprintf("route %d, %d header routes", m.Route.CanaryWeight, len(m.Route.HeaderRoutes)))
			continue
		}
		out = append(out, m.Service+" → "+m.Hash)
	}
	return strings.Join(out, "\n")
}

func TestAvailableAfter(t *testing.T) {
	d := webDeployment(10, "app:v2")
	stable := ownedRS(d, "app:v1", 1, 7, 7, ago(time.Hour))
	canary := ownedRS(d, "app:v2", 2, 3, 3, ago(time.Minute))
	lagging := ownedRS(d, "app:v0", 0, 0, 2, ago(2*time.Hour))
	down := canary.DeepCopy()
	down.Spec.Replicas = ptrTo[int32](1)
	plan := Plan{Steps: []Step{{Kind: StepScaleDown, ReplicaSet: down}}}
	got := AvailableAfter([]*appsv1.ReplicaSet{stable, canary, lagging}, plan)
	want := map[string]int32{stable.Labels[hashKey]: 7, canary.Labels[hashKey]: 1, lagging.Labels[hashKey]: 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AvailableAfter = %v, want %v", got, want)
	}
	// The lagging ReplicaSet, scaled to 0 with 2 pods up, still serves on them until they go.
	up := PodsUp([]*appsv1.ReplicaSet{stable, canary, lagging})
	if want := (map[string]int32{stable.Labels[hashKey]: 7, canary.Labels[hashKey]: 3, lagging.Labels[hashKey]: 2}); !reflect.DeepEqual(up, want) {
		t.Errorf("PodsUp = %v, want %v", up, want)
	}
}

// setCanaryScale sizes the canary apart from the weight; the stable ReplicaSet keeps its share
// at the weight.
func TestCanaryScaleShares(t *testing.T) {
	tests := []struct {
		name string
		give argoGive
		want argoCounts
	}{
		{name: "5 replicas at weight 20: 5 canary, 8 stable",
			give: argoGive{replicas: 10, weight: 20, maxSurge: "3", maxUnavailable: "0", stable: 10, stableAvail: 10, scale: &CanaryScale{Replicas: ptrTo[int32](5)}},
			want: argoCounts{stable: 8, canary: 5}},
		{name: "10 replicas at weight 20: capped by maxSurge beside 8 stable",
			give: argoGive{replicas: 10, weight: 20, maxSurge: "3", maxUnavailable: "0", stable: 10, stableAvail: 10, scale: &CanaryScale{Replicas: ptrTo[int32](10)}},
			want: argoCounts{stable: 8, canary: 5}},
		{name: "1 replica at weight 0",
			give: argoGive{replicas: 10, weight: 0, maxSurge: "25%", maxUnavailable: "25%", stable: 10, stableAvail: 10, scale: &CanaryScale{Replicas: ptrTo[int32](1)}},
			want: argoCounts{stable: 10, canary: 1}},
		{name: "weight 50% of replicas at weight 10",
			give: argoGive{replicas: 4, weight: 10, maxSurge: "2", maxUnavailable: "0", stable: 4, stableAvail: 4, scale: &CanaryScale{Weight: ptrTo[int32](50)}},
			want: argoCounts{stable: 3, canary: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runArgoStep(t, tt.give); got != tt.want {
				t.Errorf("%s: got %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}
