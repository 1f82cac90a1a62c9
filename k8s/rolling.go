package k8s

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling is one RollingUpdate sync: create or find the new ReplicaSet, scale it up
// within the surge, otherwise scale old ones down within the unavailability budget, clean up
// once complete, and sync the rollout status.
//
// Upstream makes one scaling move per sync and is woken again by its own write. With chain
// set, the sync goes on moving while a move is possible on the same observation, at most
// maxChainMoves times, and syncs the status once at the end. 10 replicas, maxSurge 3,
// maxUnavailable 2, old at 8 and new at 5, all 5 new available: upstream scales old to 3 in
// one sync and new to 10 in the next; chained, one sync does both.
func (p *planner) rolloutRolling() {
	d := p.d
	if c := p.canary; c != nil && c.Freeze {
		newRS, old := p.getNewReplicaSet(false)
		p.syncRolloutStatus(withNew(old, newRS), newRS)
		return
	}
	p.setNewCap()
	newRS, old := p.getNewReplicaSet(true)
	all := withNew(old, newRS)
	if newRS == nil {
		p.syncRolloutStatus(all, newRS)
		return
	}
	defer p.checkCanaryReached(newRS, old)
	moved := false
	for range maxChainMoves {
		if !p.reconcileNewReplicaSet(all, newRS) && !p.reconcileOldReplicaSets(all, filterActive(old), newRS) {
			break
		}
		moved = true
		if !p.chain {
			break
		}
	}
	if moved {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if DeploymentComplete(d, &d.Status) {
		p.cleanupDeployment(old)
	}
	p.syncRolloutStatus(all, newRS)
}

// setNewCap sets, for a stepped rollout, the new ReplicaSet's size at this step (see Canary):
// its weight's share, or more where replicas already moved further, since a step never moves
// them back. -1 without a step.
func (p *planner) setNewCap() {
	p.newCap = -1
	c := p.canary
	if c == nil {
		return
	}
	d := p.d
	n := replicas(d)
	var cur int32
	if rs := p.newReplicaSet(); rs != nil {
		cur = min(rsReplicas(rs), n)
	}
	oldActive := filterActive(p.oldReplicaSets())
	p.newCap = min(max(WeightReplicas(c.Weight, n), cur, n-sumSpec(oldActive)), n)
}

// checkCanaryReached sets CanaryReached when the new ReplicaSet is at its step's size, all of
// it available, and the old ones are at the rest.
func (p *planner) checkCanaryReached(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	if p.newCap < 0 {
		return
	}
	p.reached = rsReplicas(newRS) == p.newCap && p.availableNow(newRS) >= p.newCap &&
		sumSpec(filterActive(old)) <= replicas(p.d)-p.newCap
}

// maxChainMoves bounds the scaling moves of one chained sync. A RollingUpdate needs at most
// three on one observation (old down, new up, old down again when the new one was above its
// size); the bound only guards against a loop.
const maxChainMoves = 6

// availableNow is a ReplicaSet's available replicas as a decision may count them. Upstream
// counts what the ReplicaSet controller last reported. With chain set, it counts no more than
// the ReplicaSet's size: after a scale-down, the status may still report pods that are about
// to go (the ReplicaSet controller deletes the surplus, unavailable pods first), and a move
// that counted them could take the Deployment below replicas − maxUnavailable. This matters
// when the ReplicaSet controller lags behind (it shares a client rate limit with every
// ReplicaSet in the cluster), and within a chained sync, whose later moves follow its own
// scale-downs. 10 replicas, maxUnavailable 2: old just scaled 8 → 5 but still reporting 8
// available, new at 8 with 5 available. Upstream counts 13 available, 5 above the minimum of
// 8, and scales old to 0, leaving 5 available; counted as 5 + 5 = 10, old goes to 3.
func (p *planner) availableNow(rs *appsv1.ReplicaSet) int32 {
	if p.chain {
		return min(rs.Status.AvailableReplicas, rsReplicas(rs))
	}
	return rs.Status.AvailableReplicas
}

// reconcileNewReplicaSet scales the new ReplicaSet down to replicas if above, or up as far as
// the surge allows (NewRSNewReplicas).
func (p *planner) reconcileNewReplicaSet(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	d := p.d
	switch {
	case rsReplicas(newRS) == replicas(d):
		return false
	case rsReplicas(newRS) > replicas(d):
		return p.scaleReplicaSet(newRS, replicas(d), false)
	}
	n, err := NewRSNewReplicas(d, all, newRS)
	if err != nil {
		return false
	}
	if p.newCap >= 0 {
		n = min(n, p.newCap)
	}
	if n <= rsReplicas(newRS) {
		return false
	}
	return p.scaleReplicaSet(newRS, n, false)
}

// MaxScaledDown is how many old replicas may go now without dropping below replicas −
// maxUnavailable, counting the new ReplicaSet's not-yet-available pods as already missing:
//
//	maxScaledDown = Σspec(all) − (replicas − maxUnavailable) − (newRS.spec − newRS.available)
//
// 10 replicas, maxSurge 3, maxUnavailable 2, old at 10 and new just created at 3 (none
// available): 13 − 8 − 3 = 2, so the old ReplicaSet goes to 8.
func MaxScaledDown(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	return maxScaledDown(d, all, newRS, newRS.Status.AvailableReplicas)
}

// maxScaledDown is MaxScaledDown with the new ReplicaSet's available count given (see
// availableNow).
func maxScaledDown(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, newAvailable int32) int32 {
	minAvailable := replicas(d) - MaxUnavailable(d)
	newUnavailable := rsReplicas(newRS) - newAvailable
	return sumSpec(all) - minAvailable - newUnavailable
}

// reconcileOldReplicaSets first removes unhealthy old replicas, then scales old ReplicaSets
// down while enough replicas stay available.
func (p *planner) reconcileOldReplicaSets(all, oldActive []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	if sumSpec(oldActive) == 0 {
		return false
	}
	maxDown := maxScaledDown(p.d, all, newRS, p.availableNow(newRS))
	limit := int32(math.MaxInt32)
	if p.newCap >= 0 {
		// A stepped rollout keeps replicas − the new ReplicaSet's share on the old ones.
		limit = sumSpec(oldActive) - (replicas(p.d) - p.newCap)
		maxDown = min(maxDown, limit)
	}
	if p.keepLastOld && MaxSurge(p.d) > 0 && rsReplicas(newRS) < replicas(p.d) {
		// Managed mode: one old replica stays until the new ReplicaSet is full, or the
		// built-in controller's paused sync would size the one active ReplicaSet itself.
		// 4 replicas, maxSurge 1, maxUnavailable 1, new at 3 and old at 2, all available:
		// old goes to 1, not 0; new goes to 4 next, then old to 0. With maxSurge 0 (driven
		// only behind the ReplicaSet guard, which denies those scales) the new ReplicaSet
		// could never grow past replicas − 1: the last old replica goes as usual.
		limit = min(limit, sumSpec(oldActive)-1)
		maxDown = min(maxDown, limit)
	}
	if maxDown <= 0 {
		return false
	}
	cleaned := p.cleanupUnhealthyReplicas(oldActive, maxDown)
	scaled := p.scaleDownOldForRollingUpdate(withNew(oldActive, newRS), oldActive, limit-cleaned)
	return cleaned+scaled > 0
}

// cleanupUnhealthyReplicas scales old ReplicaSets down by their unavailable replicas, oldest
// first, up to maxCleanup in total.
func (p *planner) cleanupUnhealthyReplicas(old []*appsv1.ReplicaSet, maxCleanup int32) int32 {
	sortByCreation(old)
	var total int32
	for _, rs := range old {
		if total >= maxCleanup {
			break
		}
		// A ReplicaSet at or below its available count (it was just scaled down and its pods
		// are still going) has nothing unhealthy to remove; upstream refuses the scale-up
		// such a count would ask for.
		if rsReplicas(rs) == 0 || rsReplicas(rs) <= p.availableNow(rs) {
			continue
		}
		down := min(maxCleanup-total, rsReplicas(rs)-p.availableNow(rs))
		p.scaleReplicaSet(rs, rsReplicas(rs)-down, false)
		total += down
	}
	return total
}

// scaleDownOldForRollingUpdate scales old ReplicaSets down, oldest first, by the available
// replicas above replicas − maxUnavailable, and by limit at most.
func (p *planner) scaleDownOldForRollingUpdate(all, old []*appsv1.ReplicaSet, limit int32) int32 {
	d := p.d
	minAvailable := replicas(d) - MaxUnavailable(d)
	var available int32
	for _, rs := range all {
		available += p.availableNow(rs)
	}
	if available <= minAvailable {
		return 0
	}
	sortByCreation(old)
	var total int32
	budget := min(available-minAvailable, limit)
	for _, rs := range old {
		if total >= budget {
			break
		}
		if rsReplicas(rs) == 0 {
			continue
		}
		down := min(rsReplicas(rs), budget-total)
		p.scaleReplicaSet(rs, rsReplicas(rs)-down, false)
		total += down
	}
	return total
}
