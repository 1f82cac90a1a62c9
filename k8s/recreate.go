package k8s

import appsv1 "k8s.io/api/apps/v1"

// rolloutRecreate is one Recreate sync: scale every old ReplicaSet to 0, wait until none of
// their pods runs, and only then create or scale up the new ReplicaSet.
func (p *planner) rolloutRecreate() {
	d := p.d
	newRS, old := p.getNewReplicaSet(false)
	all := withNew(old, newRS)

	scaledDown := false
	for _, rs := range filterActive(old) {
		if p.scaleReplicaSet(rs, 0, false) {
			scaledDown = true
		}
	}
	if scaledDown || p.oldPodsRunning(newRS, old) {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if newRS == nil {
		newRS, old = p.getNewReplicaSet(true)
		all = withNew(old, newRS)
	}
	if newRS != nil {
		p.scaleReplicaSet(newRS, replicas(d), false)
	}
	if DeploymentComplete(d, &d.Status) {
		p.cleanupDeployment(old)
	}
	p.syncRolloutStatus(all, newRS)
}

// oldPodsRunning reports whether any old ReplicaSet still reports pods, or still has a pod that
// has not Succeeded or Failed.
func (p *planner) oldPodsRunning(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) bool {
	if sumActual(old) > 0 {
		return true
	}
	for _, pc := range p.pods {
		if newRS != nil && newRS.UID == pc.ReplicaSetUID {
			continue
		}
		if pc.Running > 0 {
			return true
		}
	}
	return false
}
