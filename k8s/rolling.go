package k8s

import (
	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling is one RollingUpdate sync: create or find the new ReplicaSet, scale it up
// within the surge, otherwise scale old ones down within the unavailability budget, clean up
// once complete, and sync the rollout status.
func (p *planner) rolloutRolling() {
	d := p.d
	newRS, old := p.getNewReplicaSet(true)
	all := withNew(old, newRS)
	if newRS == nil {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if p.reconcileNewReplicaSet(all, newRS) {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if p.reconcileOldReplicaSets(all, filterActive(old), newRS) {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if DeploymentComplete(d, &d.Status) {
		p.cleanupDeployment(old)
	}
	p.syncRolloutStatus(all, newRS)
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
	minAvailable := replicas(d) - MaxUnavailable(d)
	newUnavailable := rsReplicas(newRS) - newRS.Status.AvailableReplicas
	return sumSpec(all) - minAvailable - newUnavailable
}

// reconcileOldReplicaSets first removes unhealthy old replicas, then scales old ReplicaSets
// down while enough replicas stay available.
func (p *planner) reconcileOldReplicaSets(all, oldActive []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	if sumSpec(oldActive) == 0 {
		return false
	}
	maxDown := MaxScaledDown(p.d, all, newRS)
	if maxDown <= 0 {
		return false
	}
	cleaned := p.cleanupUnhealthyReplicas(oldActive, maxDown)
	scaled := p.scaleDownOldForRollingUpdate(withNew(oldActive, newRS), oldActive)
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
		if rsReplicas(rs) == 0 || rsReplicas(rs) == rs.Status.AvailableReplicas {
			continue
		}
		down := min(maxCleanup-total, rsReplicas(rs)-rs.Status.AvailableReplicas)
		p.scaleReplicaSet(rs, rsReplicas(rs)-down, false)
		total += down
	}
	return total
}

// scaleDownOldForRollingUpdate scales old ReplicaSets down, oldest first, by the available
// replicas above replicas − maxUnavailable.
func (p *planner) scaleDownOldForRollingUpdate(all, old []*appsv1.ReplicaSet) int32 {
	d := p.d
	minAvailable := replicas(d) - MaxUnavailable(d)
	available := sumAvailable(all)
	if available <= minAvailable {
		return 0
	}
	sortByCreation(old)
	var total int32
	budget := available - minAvailable
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
