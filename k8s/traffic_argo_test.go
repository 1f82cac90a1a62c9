package k8s

import "testing"

// Argo Rollouts' traffic-routing weights (rollout/trafficrouting.go, reconcileTrafficRouting)
// as data beside ours, where the vocabulary is shared. Each difference is a documented choice
// (docs/traffic.md, "Argo Rollouts' weights and ours"). Argo's column is its formula worked by
// hand for the case; ours is computed.
//
//   - a step at its replica counts: Argo gives the step's setWeight; we cap it by the canary's
//     share of the available pods (TrafficWeight), which is the setWeight once the pods are up.
//   - a step before its replica counts: Argo keeps the previous setWeight; we give the canary
//     what its available pods carry, up to the step's weight.
//   - abort without dynamicStableScale: Argo sends everything to the stable ReplicaSet at once
//     (it keeps it at full size during the canary). Our stable ReplicaSet is scaled down by the
//     steps, as with Argo's dynamicStableScale, so we follow the pods as that mode does.
//   - abort with dynamicStableScale: Argo 100 − 100 × stableAvailable / replicas, never above
//     the current weight; ours 100 − 100 × stableAvailable / (canary + stable available), never
//     above the current weight (the gate's rule 2): the share of the pods that serve now.
func TestArgoTrafficWeights(t *testing.T) {
	tests := []struct {
		name              string
		argo              int32
		replicas          int32
		target            int32
		canary, stable    int32
		current           int32
		abort, atCounts   bool
		wantOurs          int32
		differsBecauseOur string
	}{
		{name: "setWeight 20 at its counts (2 and 8 available)", argo: 20, replicas: 10, target: 20, canary: 2, stable: 8, atCounts: true, wantOurs: 20},
		{name: "setWeight 50 at its counts (5 and 5)", argo: 50, replicas: 10, target: 50, canary: 5, stable: 5, atCounts: true, wantOurs: 50},
		{name: "setWeight 50 before its counts, previous setWeight 20, canary 3 of 10 available", argo: 20, replicas: 10, target: 50, canary: 3, stable: 7, wantOurs: 30,
			differsBecauseOur: "the weight follows the canary's available pods up to the step's"},
		{name: "abort, dynamicStableScale, stable 3 available of 10, current 100", argo: 70, replicas: 10, canary: 10, stable: 3, current: 100, abort: true, wantOurs: 77,
			differsBecauseOur: "the stable's share of the pods that serve now (3 of 13), not of spec.replicas"},
		{name: "abort, dynamicStableScale, stable 10 available, current 40", argo: 0, replicas: 10, canary: 4, stable: 10, current: 40, abort: true, wantOurs: 29,
			differsBecauseOur: "the canary keeps its share (4 of 14) until the plan scales its pods away"},
		{name: "abort from 0 (setCanaryScale), stable 10, canary 3: never raised", argo: 0, replicas: 10, canary: 3, stable: 10, current: 0, abort: true, wantOurs: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int32
			if tt.abort {
				spec := TrafficSpec{StableService: "s", CanaryService: "c"}
				res := GateTraffic(spec, GateInput{
					Cur:       TrafficState{StableHash: "n", CanaryHash: "m", Route: RouteState{CanaryWeight: tt.current}},
					Want:      TrafficState{StableHash: "n", CanaryHash: "n"},
					Available: map[string]int32{"n": tt.stable, "m": tt.canary}, Returning: true,
				})
				got = res.Want.Route.CanaryWeight
			} else {
				got = TrafficWeight(tt.target, tt.canary, tt.stable)
			}
			if got != tt.wantOurs {
				t.Errorf("ours %d, want %d (Argo Rollouts %d)", got, tt.wantOurs, tt.argo)
			}
			if (got != tt.argo) != (tt.differsBecauseOur != "") {
				t.Errorf("ours %d against Argo's %d: a difference must say why, and only a difference", got, tt.argo)
			}
		})
	}
}
