package k8s

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Argo Rollouts' basic-canary test data (argoproj/argo-rollouts, utils/replicaset/
// canary_test.go at 9f8d111), run through Decide as the steps of a stepped rollout. Each case
// starts from Argo's ReplicaSets, syncs until nothing moves while the ReplicaSet controller
// makes every pod available between syncs, and compares the step's end state with Argo's.
//
// Ported: every case of TestApproximateWeightedNewStableReplicaCounts (57: the counts a
// setWeight step ends at, from replicas stable pods and no canary pods), every case of
// TestCalculateReplicaCountsForCanary that runs CalculateReplicaCountsForBasicCanary (32; the
// 8 others run CalculateReplicaCountsForTrafficRoutedCanary, for traffic routing and
// setCanaryScale, which we do not have), and TestCalculateReplicaCountsForNewDeployment (1).
// Argo's expectations in TestCalculateReplicaCountsForCanary are one reconcile's move; each
// case here says that move in a comment and wants the step's end state, the counts Argo's
// reconciles go on to (its desired counts, older ReplicaSets at 0), worked out by hand from
// the equations in Argo's doc comments.
//
// Where we end elsewhere, argoExceptions says so, with the reason. A case in it that agrees
// fails too, so the list stays true.

// argoGive is an Argo case's starting point: the Rollout's replicas, setWeight, maxSurge and
// maxUnavailable (intstr syntax), and the stable, canary and older ReplicaSets (spec and
// available). full: no step applies, as after promote {"full":true} (Argo's promoteFull) or on
// a Deployment's first rollout.
type argoGive struct {
	replicas, weight         int32
	maxSurge, maxUnavailable string
	full                     bool
	stable, stableAvail      int32
	canary, canaryAvail      int32
	older                    int32
	// scale: a setCanaryScale in force (traffic_test.go).
	scale *CanaryScale
}

// argoStart is the start of a setWeight step in TestApproximateWeightedNewStableReplicaCounts:
// replicas stable pods, all available, and a new ReplicaSet at 0. Argo's function there takes
// no maxUnavailable; the case uses 1 without surge (a rolling update needs one of the two) and
// 0 with.
func argoStart(replicas, weight, maxSurge int32) argoGive {
	unavailable := "0"
	if maxSurge == 0 {
		unavailable = "1"
	}
	return argoGive{
		replicas: replicas, weight: weight, maxSurge: fmt.Sprint(maxSurge), maxUnavailable: unavailable,
		stable: replicas, stableAvail: replicas,
	}
}

func (g argoGive) String() string {
	s := fmt.Sprintf("replicas %d, weight %d, maxSurge %s, maxUnavailable %s, stable %d/%d, canary %d/%d",
		g.replicas, g.weight, g.maxSurge, g.maxUnavailable, g.stable, g.stableAvail, g.canary, g.canaryAvail)
	if g.older > 0 {
		s += fmt.Sprintf(", older %d", g.older)
	}
	if g.full {
		s += ", promoted in full"
	}
	return s
}

// argoCounts is a step's end state: the canary (new), stable and older ReplicaSets' sizes.
// Older ReplicaSets end at 0 in every Argo case.
type argoCounts struct{ canary, stable, older int32 }

func (c argoCounts) String() string {
	s := fmt.Sprintf("canary %d, stable %d", c.canary, c.stable)
	if c.older > 0 {
		s += fmt.Sprintf(", older %d", c.older)
	}
	return s
}

// argoCalculateCases is TestCalculateReplicaCountsForCanary's basic-canary cases, by Argo's
// names, and TestCalculateReplicaCountsForNewDeployment.
var argoCalculateCases = []struct {
	name string
	give argoGive
	want argoCounts
}{
	{
		// Argo's move: canary 6, stable 7 (nothing moves while canary pods are unavailable).
		name: "Do not add extra RSs in scaleDownCount when .Spec.Replica < AvailableReplicas",
		give: argoGive{replicas: 10, weight: 100, maxSurge: "3", maxUnavailable: "0", stable: 7, stableAvail: 8, canary: 6, canaryAvail: 3},
		want: argoCounts{canary: 10, stable: 0},
	},
	{
		// Argo's move: canary 2, stable 10.
		name: "Use max surge int to scale up canary",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "2", maxUnavailable: "0", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 2, stable 10.
		name: "Use max surge percentage to scale up canary",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "20%", maxUnavailable: "0", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 2, stable 8.
		name: "Scale down extra stable replicas",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "20%", maxUnavailable: "0", stable: 10, stableAvail: 10, canary: 2, canaryAvail: 2},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 2, stable 10.
		name: "Do not go past max surge",
		give: argoGive{replicas: 10, weight: 30, maxSurge: "2", maxUnavailable: "0", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 3, stable: 7},
	},
	{
		// Argo's move: canary 0, stable 8.
		name: "Use max unavailable int to scale down stableRS",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "0", maxUnavailable: "2", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 0, stable 8.
		name: "Use max surge percentage to scale down stableRS",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "0", maxUnavailable: "20%", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 0, stable 8.
		name: "Do not go past max unavailable",
		give: argoGive{replicas: 10, weight: 30, maxSurge: "0", maxUnavailable: "2", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 3, stable: 7},
	},
	{
		// Argo's move: canary 2, stable 9.
		name: "Use Max Surge and Max Unavailable",
		give: argoGive{replicas: 10, weight: 50, maxSurge: "2", maxUnavailable: "1", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 5, stable: 5},
	},
	{
		// Argo's move: canary 0, stable 10.
		name: "Scale canaryRS to zero on setWeight of 0%",
		give: argoGive{replicas: 10, weight: 0, maxSurge: "1", maxUnavailable: "1", stable: 10, stableAvail: 10, canary: 1, canaryAvail: 1},
		want: argoCounts{canary: 0, stable: 10},
	},
	{
		// Argo's move: canary 10, stable 0.
		name: "Scale stable to zero on setWeight of 100%",
		give: argoGive{replicas: 10, weight: 100, maxSurge: "1", maxUnavailable: "1", stable: 1, stableAvail: 1, canary: 10, canaryAvail: 10},
		want: argoCounts{canary: 10, stable: 0},
	},
	{
		// Argo's move: canary 1, stable 1.
		name: "Do not scale canaryRS down to zero on non-zero weight",
		give: argoGive{replicas: 1, weight: 20, maxSurge: "1", maxUnavailable: "0", stable: 1, stableAvail: 1},
		want: argoCounts{canary: 1, stable: 1},
	},
	{
		// Argo's move: canary 1, stable 1.
		name: "Do not scale canaryRS down to zero on non-100 weight",
		give: argoGive{replicas: 1, weight: 90, maxSurge: "1", maxUnavailable: "0", stable: 1, stableAvail: 1},
		want: argoCounts{canary: 1, stable: 1},
	},
	{
		// Argo's move: canary 0, stable 1.
		name: "Scale canaryRS to zero on <50 weight without surge",
		give: argoGive{replicas: 1, weight: 49, maxSurge: "0", maxUnavailable: "1", stable: 1, stableAvail: 1},
		want: argoCounts{canary: 0, stable: 1},
	},
	{
		// Argo's move: canary 0, stable 0.
		name: "Scale stableRS down to zero on >=50 weight without surge",
		give: argoGive{replicas: 1, weight: 51, maxSurge: "0", maxUnavailable: "1", stable: 1, stableAvail: 1},
		want: argoCounts{canary: 1, stable: 0},
	},
	{
		// Argo's move: canary 1, stable 0.
		name: "Scale canaryRS to one on >=50 weight without surge and stable replicas",
		give: argoGive{replicas: 1, weight: 51, maxSurge: "0", maxUnavailable: "1"},
		want: argoCounts{canary: 1, stable: 0},
	},
	{
		// Argo's move: canary 1, stable 7 (the stable ReplicaSet first takes the surge).
		name: "Scale up Stable before canaryRS",
		give: argoGive{replicas: 10, weight: 30, maxSurge: "1", maxUnavailable: "0", stable: 1, stableAvail: 1, older: 3},
		want: argoCounts{canary: 3, stable: 7},
	},
	{
		// Argo's move: canary 3, stable 7.
		name: "Scale down canaryRS and stable",
		give: argoGive{replicas: 10, weight: 30, maxSurge: "0", maxUnavailable: "3", stable: 8, stableAvail: 5, canary: 4, canaryAvail: 4},
		want: argoCounts{canary: 3, stable: 7},
	},
	{
		// Argo's move: canary 9, stable 2.
		name: "Scale down stable and canary available",
		give: argoGive{replicas: 10, weight: 100, maxSurge: "1", maxUnavailable: "0", stable: 10, stableAvail: 2, canary: 10, canaryAvail: 8},
		want: argoCounts{canary: 10, stable: 0},
	},
	{
		// Argo's move: canary 4, stable 8.
		name: "Do not scale down canaryRS or stable when older RS count >= scaleDownCount",
		give: argoGive{replicas: 10, weight: 30, maxSurge: "0", maxUnavailable: "1", stable: 8, stableAvail: 6, canary: 4, canaryAvail: 2, older: 3},
		want: argoCounts{canary: 3, stable: 7},
	},
	{
		// Argo's move: canary 0, stable 9. 5% of 10 is 0.5, a tie, which rounds up.
		name: "Do not round past maxSurge with uneven setWeight divisor",
		give: argoGive{replicas: 10, weight: 5, maxSurge: "0", maxUnavailable: "1", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 1, stable: 9},
	},
	{
		// Argo's move: canary 1, stable 9.
		name: "Do not round past maxSurge with uneven setWeight divisor (part 2)",
		give: argoGive{replicas: 10, weight: 5, maxSurge: "0", maxUnavailable: "1", stable: 9, stableAvail: 9},
		want: argoCounts{canary: 1, stable: 9},
	},
	{
		// Argo's move: canary 0, stable 9.
		name: "Use maxUnavailable of 1 when percentage of maxUnavailable and maxSurge result in 0 replicas",
		give: argoGive{replicas: 10, weight: 10, maxSurge: "0%", maxUnavailable: "0%", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 1, stable: 9},
	},
	{
		// Argo's move: canary 2, stable 10.
		name: "Ignore setCanaryScale when trafficRouting is missing and use setWeight for replicas",
		give: argoGive{replicas: 10, weight: 20, maxSurge: "20%", maxUnavailable: "0", stable: 10, stableAvail: 10},
		want: argoCounts{canary: 2, stable: 8},
	},
	{
		// Argo's move: canary 1, stable 4.
		name: "honor maxSurge during scale up when stableRS unavailable",
		give: argoGive{replicas: 4, weight: 100, maxSurge: "1", maxUnavailable: "0", stable: 4, stableAvail: 1},
		want: argoCounts{canary: 4, stable: 0},
	},
	{
		// Argo's move: canary 0, stable 1. 99% of 3 is 2.97: 3 would leave no stable pod.
		name: "scale down to maxunavailable without exceeding maxSurge",
		give: argoGive{replicas: 3, weight: 99, maxSurge: "0", maxUnavailable: "2", stable: 3, stableAvail: 3},
		want: argoCounts{canary: 2, stable: 1},
	},
	{
		// Argo's move: canary 2, stable 1.
		name: "scale down to maxunavailable without exceeding maxSurge (part 2)",
		give: argoGive{replicas: 3, weight: 99, maxSurge: "0", maxUnavailable: "2", stable: 1, stableAvail: 1},
		want: argoCounts{canary: 2, stable: 1},
	},
	{
		// Argo's move: canary 4, stable 1.
		name: "honor maxUnavailable when aborting or reducing weight part 1",
		give: argoGive{replicas: 4, weight: 0, maxSurge: "1", maxUnavailable: "0", canary: 4, canaryAvail: 4},
		want: argoCounts{canary: 0, stable: 4},
	},
	{
		// Argo's move: canary 4, stable 1.
		name: "honor maxUnavailable when aborting or reducing weight part 2",
		give: argoGive{replicas: 4, weight: 0, maxSurge: "1", maxUnavailable: "0", stable: 1, canary: 4, canaryAvail: 4},
		want: argoCounts{canary: 0, stable: 4},
	},
	{
		// Argo's move: canary 3, stable 1.
		name: "honor maxUnavailable when aborting or reducing weight part 3",
		give: argoGive{replicas: 4, weight: 0, maxSurge: "1", maxUnavailable: "0", stable: 1, stableAvail: 1, canary: 4, canaryAvail: 4},
		want: argoCounts{canary: 0, stable: 4},
	},
	{
		// Argo's move: canary 4, stable 0.
		name: "promote full does not consider weight",
		give: argoGive{replicas: 4, weight: 1, maxSurge: "4", maxUnavailable: "4", full: true, stable: 4, stableAvail: 4},
		want: argoCounts{canary: 4, stable: 0},
	},
	{
		// Argo's move: canary 3, stable 4.
		name: "promote full still honors maxSurge/maxUnavailable",
		give: argoGive{replicas: 4, weight: 1, maxSurge: "3", maxUnavailable: "0", full: true, stable: 4, stableAvail: 4},
		want: argoCounts{canary: 4, stable: 0},
	},
	{
		// TestCalculateReplicaCountsForNewDeployment: the stable ReplicaSet is the new one (a
		// first rollout, which takes no steps). Argo's move: canary 10, stable 0.
		name: "new deployment",
		give: argoGive{replicas: 10, weight: 10, maxSurge: "0", maxUnavailable: "1", full: true, canary: 10},
		want: argoCounts{canary: 10, stable: 0},
	},
}

// argoApproximateCases is TestApproximateWeightedNewStableReplicaCounts, with Argo's comments
// (the canary's share of all pods).
var argoApproximateCases = []struct {
	give argoGive
	want argoCounts
}{
	{give: argoStart(0, 0, 0), want: argoCounts{canary: 0, stable: 0}},   // 0%
	{give: argoStart(0, 50, 0), want: argoCounts{canary: 0, stable: 0}},  // 0%
	{give: argoStart(0, 100, 0), want: argoCounts{canary: 0, stable: 0}}, // 0%

	{give: argoStart(0, 0, 1), want: argoCounts{canary: 0, stable: 0}},   // 0%
	{give: argoStart(0, 50, 1), want: argoCounts{canary: 0, stable: 0}},  // 0%
	{give: argoStart(0, 100, 1), want: argoCounts{canary: 0, stable: 0}}, // 0%

	{give: argoStart(1, 0, 0), want: argoCounts{canary: 0, stable: 1}},   // 0%
	{give: argoStart(1, 1, 0), want: argoCounts{canary: 0, stable: 1}},   // 0%
	{give: argoStart(1, 49, 0), want: argoCounts{canary: 0, stable: 1}},  // 0%
	{give: argoStart(1, 50, 0), want: argoCounts{canary: 1, stable: 0}},  // 100%
	{give: argoStart(1, 99, 0), want: argoCounts{canary: 1, stable: 0}},  // 100%
	{give: argoStart(1, 100, 0), want: argoCounts{canary: 1, stable: 0}}, // 100%

	{give: argoStart(1, 0, 1), want: argoCounts{canary: 0, stable: 1}},   // 0%
	{give: argoStart(1, 1, 1), want: argoCounts{canary: 1, stable: 1}},   // 50%
	{give: argoStart(1, 49, 1), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(1, 50, 1), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(1, 99, 1), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(1, 100, 1), want: argoCounts{canary: 1, stable: 0}}, // 100%

	{give: argoStart(2, 0, 0), want: argoCounts{canary: 0, stable: 2}},   // 0%
	{give: argoStart(2, 1, 0), want: argoCounts{canary: 1, stable: 1}},   // 50%
	{give: argoStart(2, 50, 0), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(2, 99, 0), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(2, 100, 0), want: argoCounts{canary: 2, stable: 0}}, // 100%

	{give: argoStart(2, 0, 1), want: argoCounts{canary: 0, stable: 2}},   // 0%
	{give: argoStart(2, 1, 1), want: argoCounts{canary: 1, stable: 2}},   // 33.3%
	{give: argoStart(2, 50, 1), want: argoCounts{canary: 1, stable: 1}},  // 50%
	{give: argoStart(2, 99, 1), want: argoCounts{canary: 2, stable: 1}},  // 66.6%
	{give: argoStart(2, 100, 1), want: argoCounts{canary: 2, stable: 0}}, // 100%

	{give: argoStart(3, 10, 0), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 25, 0), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 33, 0), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 34, 0), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 49, 0), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 50, 0), want: argoCounts{canary: 2, stable: 1}}, // 66.6%

	{give: argoStart(3, 10, 1), want: argoCounts{canary: 1, stable: 3}}, // 25%
	{give: argoStart(3, 25, 1), want: argoCounts{canary: 1, stable: 3}}, // 25%
	{give: argoStart(3, 33, 1), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 34, 1), want: argoCounts{canary: 1, stable: 2}}, // 33.3%
	{give: argoStart(3, 49, 1), want: argoCounts{canary: 2, stable: 2}}, // 50%
	{give: argoStart(3, 50, 1), want: argoCounts{canary: 2, stable: 2}}, // 50%

	{give: argoStart(10, 0, 1), want: argoCounts{canary: 0, stable: 10}},   // 0%
	{give: argoStart(10, 1, 0), want: argoCounts{canary: 1, stable: 9}},    // 10%
	{give: argoStart(10, 14, 0), want: argoCounts{canary: 1, stable: 9}},   // 10%
	{give: argoStart(10, 15, 0), want: argoCounts{canary: 2, stable: 8}},   // 20%
	{give: argoStart(10, 16, 0), want: argoCounts{canary: 2, stable: 8}},   // 20%
	{give: argoStart(10, 99, 0), want: argoCounts{canary: 9, stable: 1}},   // 90%
	{give: argoStart(10, 100, 1), want: argoCounts{canary: 10, stable: 0}}, // 100%

	{give: argoStart(10, 0, 1), want: argoCounts{canary: 0, stable: 10}},   // 0%
	{give: argoStart(10, 1, 1), want: argoCounts{canary: 1, stable: 10}},   // 9.1%
	{give: argoStart(10, 18, 1), want: argoCounts{canary: 2, stable: 9}},   // 18.1%
	{give: argoStart(10, 19, 1), want: argoCounts{canary: 2, stable: 9}},   // 18.1%
	{give: argoStart(10, 20, 1), want: argoCounts{canary: 2, stable: 8}},   // 20%
	{give: argoStart(10, 23, 1), want: argoCounts{canary: 2, stable: 8}},   // 20%
	{give: argoStart(10, 24, 1), want: argoCounts{canary: 3, stable: 8}},   // 27.2%
	{give: argoStart(10, 25, 1), want: argoCounts{canary: 3, stable: 8}},   // 27.2%
	{give: argoStart(10, 99, 1), want: argoCounts{canary: 10, stable: 1}},  // 90.9%
	{give: argoStart(10, 100, 1), want: argoCounts{canary: 10, stable: 0}}, // 100%
}

// argoException is where we knowingly end a step elsewhere than Argo: ours is our end state.
type argoException struct {
	ours argoCounts
	why  string
}

// argoExceptions, by case name (an approximate case is named by its give).
var argoExceptions = map[string]argoException{
	"calculate/Scale canaryRS to zero on setWeight of 0%":                                  {ours: argoCounts{canary: 1, stable: 9}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0"},
	"calculate/Scale canaryRS to zero on <50 weight without surge":                         {ours: argoCounts{canary: 1, stable: 0}, why: "ceil rounding: with 1 replica and no surge one side must be empty, and a canary step runs its canary pod (Argo rounds to the nearest: no canary pod below 50%)"},
	"calculate/Scale up Stable before canaryRS":                                            {ours: argoCounts{canary: 3, stable: 4, older: 3}, why: "our old ReplicaSets are one side: a step fills them up to their share on the newest (stable) one and drains none into it, so the older one keeps its 3 pods (7 old pods in all, as in Argo)"},
	"calculate/Scale down canaryRS and stable":                                             {ours: argoCounts{canary: 4, stable: 6}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0; the 4 canary pods at 30% stay"},
	"calculate/Do not scale down canaryRS or stable when older RS count >= scaleDownCount": {ours: argoCounts{canary: 4, stable: 6}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0; the 4 canary pods at 30% stay"},
	"calculate/honor maxUnavailable when aborting or reducing weight part 1":               {ours: argoCounts{canary: 4, stable: 0}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0"},
	"calculate/honor maxUnavailable when aborting or reducing weight part 2":               {ours: argoCounts{canary: 4, stable: 0}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0"},
	"calculate/honor maxUnavailable when aborting or reducing weight part 3":               {ours: argoCounts{canary: 4, stable: 0}, why: "a step never moves pods back: our weights never go down (a lower weight is an invalid annotation), and an abort is a rollback of the template, not a step at weight 0"},
	"approximate/replicas 1, weight 1, maxSurge 0":                                         {ours: argoCounts{canary: 1, stable: 0}, why: "ceil rounding: with 1 replica and no surge one side must be empty, and a canary step runs its canary pod (Argo rounds to the nearest: no canary pod below 50%)"},
	"approximate/replicas 1, weight 49, maxSurge 0":                                        {ours: argoCounts{canary: 1, stable: 0}, why: "ceil rounding: with 1 replica and no surge one side must be empty, and a canary step runs its canary pod (Argo rounds to the nearest: no canary pod below 50%)"},
	"approximate/replicas 2, weight 1, maxSurge 1":                                         {ours: argoCounts{canary: 1, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 34, maxSurge 0":                                        {ours: argoCounts{canary: 2, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 49, maxSurge 0":                                        {ours: argoCounts{canary: 2, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 10, maxSurge 1":                                        {ours: argoCounts{canary: 1, stable: 2}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 25, maxSurge 1":                                        {ours: argoCounts{canary: 1, stable: 2}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 34, maxSurge 1":                                        {ours: argoCounts{canary: 2, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 49, maxSurge 1":                                        {ours: argoCounts{canary: 2, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 3, weight 50, maxSurge 1":                                        {ours: argoCounts{canary: 2, stable: 1}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 14, maxSurge 0":                                       {ours: argoCounts{canary: 2, stable: 8}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 1, maxSurge 1":                                        {ours: argoCounts{canary: 1, stable: 9}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 18, maxSurge 1":                                       {ours: argoCounts{canary: 2, stable: 8}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 19, maxSurge 1":                                       {ours: argoCounts{canary: 2, stable: 8}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 23, maxSurge 1":                                       {ours: argoCounts{canary: 3, stable: 7}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 24, maxSurge 1":                                       {ours: argoCounts{canary: 3, stable: 7}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
	"approximate/replicas 10, weight 25, maxSurge 1":                                       {ours: argoCounts{canary: 3, stable: 7}, why: "ceil rounding: a step never runs fewer canary pods than its weight asks for, and the old ones take the rest of replicas (Argo takes the nearest count, over replicas or replicas + 1 pods)"},
}

func argoCaseName(g argoGive) string {
	return fmt.Sprintf("approximate/replicas %d, weight %d, maxSurge %s", g.replicas, g.weight, g.maxSurge)
}

func TestArgoBasicCanaryCases(t *testing.T) {
	type argoCase struct {
		name string
		give argoGive
		want argoCounts
	}
	var tests []argoCase
	for _, tt := range argoCalculateCases {
		tests = append(tests, argoCase{name: "calculate/" + tt.name, give: tt.give, want: tt.want})
	}
	for _, tt := range argoApproximateCases {
		tests = append(tests, argoCase{name: argoCaseName(tt.give), give: tt.give, want: tt.want})
	}
	agree := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runArgoStep(t, tt.give)
			exc, known := argoExceptions[tt.name]
			switch {
			case got == tt.want && known:
				t.Errorf("%s: end state %s agrees with Argo; drop its exception (%s)", tt.give, got, exc.why)
			case got == tt.want:
				agree++
			case !known:
				t.Errorf("%s: end state %s, Argo %s", tt.give, got, tt.want)
			case got != exc.ours:
				t.Errorf("%s: end state %s, want %s (documented exception to Argo's %s: %s)", tt.give, got, exc.ours, tt.want, exc.why)
			}
		})
	}
	t.Logf("Argo's basic-canary cases: %d of %d end states agree, %d documented exceptions", agree, len(tests), len(argoExceptions))
}

// runArgoStep runs a case's setWeight step to its end: Decide, apply its ReplicaSet writes,
// then let the ReplicaSet controller make every pod available, until a sync moves nothing. It
// fails the test on a move above replicas + maxSurge or below replicas − maxUnavailable
// available (either only where the case did not start beyond it).
func runArgoStep(t *testing.T, g argoGive) argoCounts {
	t.Helper()
	d := withFenceposts(webDeployment(g.replicas, "app:v3"), g.maxSurge, g.maxUnavailable)
	d.Generation = 3
	d.Annotations[RevisionAnnotation] = "3"
	d.Status = settledStatus(d, g.replicas)
	d.Status.ObservedGeneration = 3
	SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, "progressing", ago(time.Minute)))
	stable := ownedRS(d, "app:v2", 2, g.stable, g.stableAvail, ago(2*time.Hour))
	rss := []*appsv1.ReplicaSet{stable}
	if g.older > 0 {
		rss = append(rss, ownedRS(d, "app:v1", 1, g.older, g.older, ago(3*time.Hour)))
	}
	rss = append(rss, ownedRS(d, "app:v3", 3, g.canary, g.canaryAvail, ago(time.Minute)))
	canaryHash := PodTemplateHash(&d.Spec.Template, nil)
	req := Request{}
	if !g.full {
		req.Canary = &Canary{Hash: canaryHash, Weight: g.weight, Scale: g.scale}
	}
	maxTotal, minAvailable := g.replicas+MaxSurge(d), g.replicas-MaxUnavailable(d)
	for range 20 {
		plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, req)
		var availBefore int32
		for _, rs := range rss {
			availBefore += rs.Status.AvailableReplicas
		}
		moved, up := false, false
		for _, s := range plan.Steps {
			switch s.Kind {
			case StepCreate:
				rs := s.ReplicaSet.DeepCopy()
				rs.UID = types.UID(rs.Name + "-uid")
				rss = append(rss, rs)
				moved, up = true, rsReplicas(rs) > 0
			case StepScaleUp, StepScaleDown, StepUpdateRS:
				for _, rs := range rss {
					if rs.Name == s.ReplicaSet.Name {
						moved = moved || rsReplicas(rs) != rsReplicas(s.ReplicaSet)
						up = up || rsReplicas(rs) < rsReplicas(s.ReplicaSet)
						rs.Spec.Replicas = ptrTo(rsReplicas(s.ReplicaSet))
						rs.Annotations = s.ReplicaSet.Annotations
					}
				}
			}
		}
		d.Status = plan.Status
		// The ReplicaSet controller removes pods at once; new pods are not available yet.
		var total, avail int32
		for _, rs := range rss {
			total += rsReplicas(rs)
			avail += min(rs.Status.AvailableReplicas, rsReplicas(rs))
		}
		if up && total > maxTotal {
			t.Errorf("%s: scaled up to %d pods, above replicas + maxSurge (%d)", g, total, maxTotal)
		}
		if avail < minAvailable && avail < availBefore {
			t.Errorf("%s: scaled down to %d available, below replicas − maxUnavailable (%d)", g, avail, minAvailable)
		}
		if !moved && avail == total && avail == availBefore {
			break
		}
		for _, rs := range rss {
			rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = rsReplicas(rs), rsReplicas(rs), rsReplicas(rs)
		}
	}
	var got argoCounts
	for _, rs := range rss {
		switch rs.Labels[hashKey] {
		case canaryHash:
			got.canary = rsReplicas(rs)
		case stable.Labels[hashKey]:
			got.stable = rsReplicas(rs)
		default:
			got.older += rsReplicas(rs)
		}
	}
	return got
}
