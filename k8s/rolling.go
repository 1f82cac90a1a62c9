package k8s

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling is one RollingUpdate sync: create or find the new ReplicaSet, scale it up
// within the surge, otherwise scale old ones down within the unavailability budget, clean up
// once complete, and sync the rollout status.
//
// Upstream makes one scaling move per sync and is woken again by its own write. Ours goes on
// moving while a move is possible on the same observation (a chained sync), at most
// maxChainMoves times, and syncs the status once at the end (oneMove: one move, as upstream). 10 replicas, maxSurge 3,
// maxUnavailable 2, old at 8 and new at 5, all 5 new available: upstream scales old to 3 in
// one sync and new to 10 in the next; chained, one sync does both.
func (p *planner) rolloutRolling() {
	d := p.d
	if c := p.canary; c != nil && c.Freeze {
		newRS, old := p.getNewReplicaSet(false)
		p.syncRolloutStatus(withNew(old, newRS), newRS)
		return
	}
	if c := p.canary; c != nil && c.BlueGreen {
		p.rolloutBlueGreen()
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
		if !p.reconcileStableReplicaSet(all, old) && !p.reconcileNewReplicaSet(all, newRS) && !p.reconcileOldReplicaSets(all, filterActive(old), newRS) {
			break
		}
		moved = true
		if p.oneMove {
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
// its share (StepShares), or more where it already runs more, since a step never moves pods
// back. It never grows the new ReplicaSet above its share to make up for old ones below
// theirs: reconcileStableReplicaSet scales those up. 10 replicas at 30%, an old ReplicaSet
// scaled by hand to 4 and the new one at 3: the cap stays 3 (not 10 − 4 = 6), and the old
// one goes back to 7. -1 without a step.
func (p *planner) setNewCap() {
	p.newCap = -1
	c := p.canary
	if c == nil {
		return
	}
	n := replicas(p.d)
	share, _ := p.stepShares()
	var cur int32
	if rs := p.newReplicaSet(); rs != nil {
		cur = min(rsReplicas(rs), n)
	}
	p.newCap = max(share, cur)
}

// oldShare is, for a stepped rollout (newCap ≥ 0), the pods the old ReplicaSets keep at this
// step: their share (StepShares) less what the new ReplicaSet runs above its own, but at a
// weight of 1–99 one pod where maxSurge allows. 10 replicas, maxSurge 1, at 30%: 7; with the
// new ReplicaSet already at 5, 5; already at 10, 1 (11 pods).
func (p *planner) oldShare() int32 {
	n, surge := replicas(p.d), MaxSurge(p.d)
	share, old := p.stepShares()
	keep := share + old - p.newCap
	if w := p.canary.Weight; w > 0 && w < 100 && n > 0 && p.newCap+1 <= n+surge {
		keep = max(keep, 1)
	}
	return max(keep, 0)
}

// reconcileStableReplicaSet scales, in a stepped rollout, the newest old ReplicaSet up while
// the old ones run fewer pods than their share and all ReplicaSets fewer than the step's (new
// cap + old share), within maxSurge: Argo's basic canary scales its stable ReplicaSet up
// before its canary, and a step's new ReplicaSet never takes the old ones' pods. Old ones at
// their share are never scaled up. 10 replicas, maxSurge 1, at 30%: old scaled by hand to 4,
// new at 0: old goes to 4 + min(7 − 4, 11 − 4) = 7, then new to 3.
func (p *planner) reconcileStableReplicaSet(all, old []*appsv1.ReplicaSet) bool {
	if p.newCap < 0 || len(old) == 0 {
		return false
	}
	keep := p.oldShare()
	d := p.d
	up := min(keep-sumSpec(old), p.newCap+keep-sumSpec(all), replicas(d)+MaxSurge(d)-sumSpec(all))
	if up <= 0 {
		return false
	}
	stable, best := old[0], int64(-1)
	for _, rs := range old {
		if r, _ := Revision(rs.Annotations); r > best {
			stable, best = rs, r
		}
	}
	return p.scaleReplicaSet(stable, rsReplicas(stable)+up, false)
}

// checkCanaryReached sets CanaryReached when the new ReplicaSet is at its step's size, all of
// it available, and the old ones are at their share (oldShare) or below.
func (p *planner) checkCanaryReached(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	if p.newCap < 0 {
		return
	}
	p.reached = rsReplicas(newRS) == p.newCap && p.availableNow(newRS) >= p.newCap &&
		sumSpec(filterActive(old)) <= p.oldShare()
}

// maxChainMoves bounds the scaling moves of one chained sync. A RollingUpdate needs at most
// three on one observation (old down, new up, old down again when the new one was above its
// size); the bound only guards against a loop.
const maxChainMoves = 6

// availableNow is a ReplicaSet's available replicas as a decision may count them. Upstream
// counts what the ReplicaSet controller last reported. A chained sync counts no more than
// the ReplicaSet's size: after a scale-down, the status may still report pods that are about
// to go (the ReplicaSet controller deletes the surplus, unavailable pods first), and a move
// that counted them could take the Deployment below replicas − maxUnavailable. This matters
// when the ReplicaSet controller lags behind (it shares a client rate limit with every
// ReplicaSet in the cluster), and within a chained sync, whose later moves follow its own
// scale-downs. 10 replicas, maxUnavailable 2: old just scaled 8 → 5 but still reporting 8
// available, new at 8 with 5 available. Upstream counts 13 available, 5 above the minimum of
// 8, and scales old to 0, leaving 5 available; counted as 5 + 5 = 10, old goes to 3.
func (p *planner) availableNow(rs *appsv1.ReplicaSet) int32 {
	if !p.oneMove {
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
		// A stepped rollout keeps their share (oldShare) on the old ones.
		limit = sumSpec(oldActive) - p.oldShare()
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

// stepShares is StepShares at the canary's weight, or with a setCanaryScale (Canary.Scale) the
// new ReplicaSet at its scale and the old ones at their share at the weight, the new one within
// what maxSurge leaves beside them, and the old ones never below what maxUnavailable needs
// beside the new one. 10 replicas, maxSurge 3, setWeight 20 and setCanaryScale
// {"replicas":5}: 5 and 8 (13 pods); {"replicas":10}: 5 too (10 + 3 − 8). 10 replicas,
// maxUnavailable 2, setCanaryScale {"replicas":2} and setWeight 50: 2 and 6 (not 5: 2 + 5 is
// below the 8 that must stay available).
func (p *planner) stepShares() (newRS, old int32) {
	n, surge := replicas(p.d), MaxSurge(p.d)
	newRS, old = StepShares(p.canary.Weight, n, surge)
	if sc := p.canary.Scale; sc != nil {
		old = n - WeightReplicas(p.canary.Weight, n)
		newRS = max(min(sc.replicasOf(n), n+surge-old), 0)
		// The rolling update keeps n − maxUnavailable pods available: an explicit canary
		// scale below the weight's share leaves the old ones what availability needs, or the
		// step waits for a scale-down the rolling update never makes.
		old = max(old, min(n-MaxUnavailable(p.d)-newRS, n))
	}
	return newRS, old
}
