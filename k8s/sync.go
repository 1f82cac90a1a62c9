package k8s

import (
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkPausedConditions sets Progressing=Unknown with DeploymentPaused or DeploymentResumed,
// unless the rollout already timed out.
func (p *planner) checkPausedConditions() {
	d := p.d
	cond, ok := p.progressCondition()
	if !ok {
		return
	}
	pausedCond := cond != nil && cond.Reason == PausedDeployReason
	switch {
	case d.Spec.Paused && !pausedCond:
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", p.now))
	case !d.Spec.Paused && pausedCond:
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ResumedDeployReason, "Deployment is resumed", p.now))
	}
}

// progressCondition is the Progressing condition that a pause or a stepped rollout's hold may
// change, and whether it may: not without a progress deadline, nor once the rollout timed out.
func (p *planner) progressCondition() (*appsv1.DeploymentCondition, bool) {
	if !HasProgressDeadline(p.d) {
		return nil, false
	}
	cond := GetCondition(p.d.Status, appsv1.DeploymentProgressing)
	return cond, cond == nil || cond.Reason != TimedOutReason
}

// checkCanaryConditions is checkPausedConditions for a stepped rollout's holds: while the
// rollout waits at a step, the Progressing condition is Unknown with reason CanaryPaused and
// the step's message, so the progress deadline does not run; once it goes on, CanaryResumed,
// so the deadline counts from then.
func (p *planner) checkCanaryConditions() {
	d := p.d
	cond, ok := p.progressCondition()
	if !ok {
		return
	}
	held := cond != nil && cond.Reason == CanaryPausedReason
	switch c := p.canary; {
	case c != nil && c.Hold && (!held || cond.Message != c.Message):
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, CanaryPausedReason, c.Message, p.now))
	case (c == nil || !c.Hold) && held:
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, CanaryResumedReason, "Rollout resumed from its step", p.now))
	}
}

// holding reports whether the rollout waits at a step.
func (p *planner) holding() bool { return p.canary != nil && p.canary.Hold }

// sync scales (proportionally when needed), cleans up while paused (unless a rollback is
// pending, as upstream), and syncs status.
func (p *planner) sync() {
	newRS, old := p.getNewReplicaSet(false)
	// A stepped rollout at rest holds its step's sizes while paused: only a change of
	// replicas rescales it. (Upstream's scale gives replicas + maxSurge − Σ spec to the
	// largest ReplicaSet, which a step's rest, at exactly replicas, would always receive.)
	switch {
	case p.canary != nil && p.canary.BlueGreen && p.canary.StableHash != "" && newRS != nil && p.isScalingEvent():
		p.scaleBlueGreen(newRS, old)
	case p.canary == nil || p.isScalingEvent():
		p.scale(newRS, old)
	}
	if p.d.Spec.Paused && !p.rollbackPending {
		p.cleanupDeployment(old)
	}
	p.syncDeploymentStatus(withNew(old, newRS), newRS)
}

// getNewReplicaSet finds the ReplicaSet for the current template, bringing its annotations up
// to date, or creates it when create is set. It returns the new ReplicaSet (nil if none) and
// all the old ones.
func (p *planner) getNewReplicaSet(create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	d := p.d
	old := p.oldReplicaSets()
	existing := p.newReplicaSet()
	newRevision := MaxRevision(old) + 1

	if existing != nil {
		annotationsChanged := setNewReplicaSetAnnotations(d, existing, newRevision, true)
		minReadyChanged := existing.Spec.MinReadySeconds != d.Spec.MinReadySeconds
		if annotationsChanged || minReadyChanged {
			existing.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			p.writeReplicaSet(existing, rsReplicas(existing))
			return existing, old
		}
		setDeploymentRevision(d, existing.Annotations[RevisionAnnotation])
		if HasProgressDeadline(d) && GetCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			msg := fmt.Sprintf("Found new replica set %q", existing.Name)
			SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, FoundNewRSReason, msg, p.now))
		}
		return existing, old
	}
	if !create {
		return nil, old
	}

	template := *d.Spec.Template.DeepCopy()
	hash := p.templateHash
	if hash == "" {
		hash = PodTemplateHash(&template, d.Status.CollisionCount)
	}
	template.Labels = cloneAndAdd(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	newRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ReplicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	n, err := NewRSNewReplicas(d, withNew(old, newRS), newRS)
	if err != nil {
		return nil, old
	}
	if p.newCap >= 0 {
		n = min(n, p.newCap)
	}
	if c := p.canary; c != nil && c.BlueGreen {
		// Blue-green: the new ReplicaSet starts at its full size (rolloutBlueGreen).
		n = p.newCap
	}
	*newRS.Spec.Replicas = n
	setNewReplicaSetAnnotations(d, newRS, newRevision, false)

	step := Step{Kind: StepCreate, ReplicaSet: newRS.DeepCopy()}
	if n > 0 {
		step.Events = []Event{{Type: eventTypeNormal, Reason: eventScalingReplicaSet, Message: fmt.Sprintf("Scaled up replica set %s from 0 to %d", newRS.Name, n)}}
	}
	p.steps = append(p.steps, step)
	// The copy is the newest ReplicaSet from here on.
	newRS.CreationTimestamp = p.now
	p.rss = append(p.rss, newRS)
	// No ReplicaSet matched the template, so the new one is the one that does.
	p.found, p.foundOK = newRS, true

	setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if HasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", newRS.Name)
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewReplicaSetReason, msg, p.now))
	}
	return newRS, old
}

func cloneAndAdd(in map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for key, val := range in {
		out[key] = val
	}
	out[k] = v
	return out
}

// scaleReplicaSet sets the ReplicaSet to newScale and refreshes its desired/max annotations.
// It reports whether the size changed. With force, annotations are refreshed even when the size
// is already right.
func (p *planner) scaleReplicaSet(rs *appsv1.ReplicaSet, newScale int32, force bool) bool {
	d := p.d
	from := rsReplicas(rs)
	if !force && from == newScale {
		return false
	}
	maxReplicas := replicas(d) + MaxSurge(d)
	sizeChanged := from != newScale
	if !sizeChanged && !replicasAnnotationsNeedUpdate(rs, replicas(d), maxReplicas) {
		return false
	}
	rs.Spec.Replicas = &newScale
	setReplicasAnnotations(rs, replicas(d), maxReplicas)
	p.writeReplicaSet(rs, from)
	return sizeChanged
}

// writeReplicaSet records an update of rs to its current in-memory state. A second write to the
// same ReplicaSet in one sync replaces the first, so each object is written once per sync and
// its event tells the whole change.
func (p *planner) writeReplicaSet(rs *appsv1.ReplicaSet, from int32) {
	for i := range p.steps {
		s := p.steps[i]
		if s.ReplicaSet == nil || s.ReplicaSet.Name != rs.Name {
			continue
		}
		if s.Kind == StepCreate {
			// Not yet created: create it at its final state, and say so.
			s.ReplicaSet = stripForCreate(rs)
			s.Events = nil
			if n := rsReplicas(rs); n > 0 {
				s.Events = []Event{{Type: eventTypeNormal, Reason: eventScalingReplicaSet, Message: fmt.Sprintf("Scaled up replica set %s from 0 to %d", rs.Name, n)}}
			}
			p.steps[i] = s
			if !p.oneMove {
				// A chained sync grew it after scaling old ones down: create it after them,
				// so the total never passes replicas + maxSurge between the writes.
				p.steps = append(append(p.steps[:i:i], p.steps[i+1:]...), s)
			}
			return
		}
		if s.Kind == StepScaleUp || s.Kind == StepScaleDown || s.Kind == StepUpdateRS {
			from = s.FromReplicas
			if p.keepLastOld && rsReplicas(rs) <= rsReplicas(s.ReplicaSet) && rsReplicas(rs) < from {
				// Managed mode: a second scale-down of an old ReplicaSet (its last replica,
				// once the new one is full) takes the first one's place: moved after the
				// new ReplicaSet's scale-up, the total would pass replicas + maxSurge
				// between the writes. 10 replicas, maxSurge 1, maxUnavailable 100%: old
				// 10 → 1, new created at 10, old 1 → 0 is old 10 → 0 first, then new.
				s.ReplicaSet = rs.DeepCopy()
				s.Kind = StepScaleDown
				s.Events = []Event{{Type: eventTypeNormal, Reason: eventScalingReplicaSet,
					Message: fmt.Sprintf("Scaled down replica set %s from %d to %d", rs.Name, from, rsReplicas(rs))}}
				p.steps[i] = s
				return
			}
			p.steps = append(p.steps[:i], p.steps[i+1:]...)
			break
		}
	}
	to := rsReplicas(rs)
	var kind StepKind
	var events []Event
	switch {
	case to > from:
		kind = StepScaleUp
	case to < from:
		kind = StepScaleDown
	default:
		kind = StepUpdateRS
	}
	if to != from {
		op := "up"
		if to < from {
			op = "down"
		}
		events = append(events, Event{Type: eventTypeNormal, Reason: eventScalingReplicaSet,
			Message: fmt.Sprintf("Scaled %s replica set %s from %d to %d", op, rs.Name, from, to)})
	}
	p.steps = append(p.steps, Step{Kind: kind, ReplicaSet: rs.DeepCopy(), FromReplicas: from, Events: events})
}

func stripForCreate(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	c := rs.DeepCopy()
	c.CreationTimestamp = metav1.Time{}
	return c
}

// isScalingEvent reports whether an active ReplicaSet was sized for a different replica count
// than the Deployment now asks for.
func (p *planner) isScalingEvent() bool {
	newRS, old := p.getNewReplicaSet(false)
	for _, rs := range filterActive(withNew(old, newRS)) {
		desired, ok := annotationInt32(rs, DesiredReplicasAnnotation)
		if ok && desired != replicas(p.d) {
			return true
		}
	}
	return false
}

// scale brings the ReplicaSets to the Deployment's size. With one active ReplicaSet it takes
// the whole size. Otherwise, under RollingUpdate, the difference between replicas+maxSurge and
// the current total is shared out in proportion to each ReplicaSet's size before the change
// (its max-replicas annotation), see ProportionalShares.
func (p *planner) scale(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	d := p.d
	if rs := findActiveOrLatest(newRS, old); rs != nil {
		if rsReplicas(rs) != replicas(d) {
			p.scaleReplicaSet(rs, replicas(d), false)
		}
		return
	}
	if IsSaturated(d, newRS) {
		for _, rs := range filterActive(old) {
			p.scaleReplicaSet(rs, 0, false)
		}
		return
	}
	if !IsRollingUpdate(d) {
		return
	}
	all := filterActive(withNew(old, newRS))
	sizes := ProportionalShares(d, all)
	for _, rs := range all {
		p.scaleReplicaSet(rs, sizes[rs.Name], true)
	}
}

// ProportionalShares returns the new size of each active ReplicaSet after a scaling event,
// keyed by name, and sorts all into the order they are written in.
//
// allowed = replicas + maxSurge (0 when replicas is 0); toAdd = allowed − Σ spec.replicas.
// Each ReplicaSet gets round(size × allowed / max-replicas) − size, capped so the running sum
// never passes toAdd. ReplicaSets are visited largest first (newest first on ties when growing,
// oldest first when shrinking), and the leftover goes to the first one, never below 0.
//
// Example: 10 replicas, maxSurge 25% (3), new RS at 6 and old RS at 7 (13 = 10+3), both
// annotated max-replicas 13. Scaling to 20 (maxSurge 5) gives allowed 25, toAdd 12. Old (7, larger) first:
// round(7×25/13)=13, +6. New: round(6×25/13)=12, +6. Sum 12, no leftover: old 13, new 12.
func ProportionalShares(d *appsv1.Deployment, all []*appsv1.ReplicaSet) map[string]int32 {
	allowed := int32(0)
	if replicas(d) > 0 {
		allowed = replicas(d) + MaxSurge(d)
	}
	toAdd := allowed - sumSpec(all)
	switch {
	case toAdd > 0:
		sort.SliceStable(all, func(i, j int) bool {
			if rsReplicas(all[i]) == rsReplicas(all[j]) {
				return olderThan(all[j], all[i])
			}
			return rsReplicas(all[i]) > rsReplicas(all[j])
		})
	case toAdd < 0:
		sort.SliceStable(all, func(i, j int) bool {
			if rsReplicas(all[i]) == rsReplicas(all[j]) {
				return olderThan(all[i], all[j])
			}
			return rsReplicas(all[i]) > rsReplicas(all[j])
		})
	}
	sizes := make(map[string]int32, len(all))
	added := int32(0)
	for _, rs := range all {
		if toAdd != 0 {
			share := replicaSetProportion(rs, d, toAdd, added)
			sizes[rs.Name] = rsReplicas(rs) + share
			added += share
		} else {
			sizes[rs.Name] = rsReplicas(rs)
		}
	}
	if len(all) > 0 && toAdd != 0 {
		first := all[0].Name
		sizes[first] += toAdd - added
		if sizes[first] < 0 {
			sizes[first] = 0
		}
	}
	return sizes
}

func replicaSetProportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || rsReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if replicas(d) == 0 {
		return -rsReplicas(rs)
	}
	maxNow := replicas(d) + MaxSurge(d)
	maxBefore, ok := annotationInt32(rs, MaxReplicasAnnotation)
	if !ok || maxBefore == 0 {
		maxBefore = d.Status.Replicas
		if maxBefore == 0 {
			return 0
		}
	}
	size := float64(rsReplicas(rs)*maxNow) / float64(maxBefore)
	return roundToInt32(size) - rsReplicas(rs)
}

func roundToInt32(a float64) int32 {
	if a < 0 {
		return int32(a - 0.5)
	}
	return int32(a + 0.5)
}

func findActiveOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	sort.SliceStable(sorted, func(i, j int) bool { return olderThan(sorted[j], sorted[i]) })
	active := filterActive(withNew(sorted, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return sorted[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// cleanupDeployment deletes the oldest ReplicaSets beyond revisionHistoryLimit that have no
// replicas, no pods and are not being deleted.
func (p *planner) cleanupDeployment(old []*appsv1.ReplicaSet) {
	d := p.d
	if !HasRevisionHistoryLimit(d) {
		return
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil && rs.UID != "" {
			alive = append(alive, rs)
		}
	}
	diff := int32(len(alive)) - *d.Spec.RevisionHistoryLimit
	if diff <= 0 {
		return
	}
	sortByRevision(alive)
	var del []ObjectRef
	for i := int32(0); i < diff; i++ {
		rs := alive[i]
		if rs.Status.Replicas != 0 || rsReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		del = append(del, ObjectRef{Name: rs.Name, UID: rs.UID})
	}
	if len(del) > 0 {
		p.steps = append(p.steps, Step{Kind: StepCleanup, Delete: del})
	}
}

// calculateStatus derives the Deployment status from its ReplicaSets.
func (p *planner) calculateStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	d := p.d
	available := sumAvailable(all)
	unavailable := max(sumSpec(all)-available, 0)
	var newOnly []*appsv1.ReplicaSet
	if newRS != nil {
		newOnly = []*appsv1.ReplicaSet{newRS}
	}
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumActual(all),
		UpdatedReplicas:     sumActual(newOnly),
		ReadyReplicas:       sumReady(all),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
		TerminatingReplicas: sumTerminating(all),
	}
	st.Conditions = append(st.Conditions, d.Status.Conditions...)
	if available >= replicas(d)-MaxUnavailable(d) {
		SetCondition(&st, NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.", p.now))
	} else {
		SetCondition(&st, NewCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, MinimumReplicasUnavailable, "Deployment does not have minimum availability.", p.now))
	}
	return st
}

func (p *planner) syncDeploymentStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	st := p.calculateStatus(all, newRS)
	if !equality.Semantic.DeepEqual(p.d.Status, st) {
		p.d.Status = st
	}
}

// FoldStatus carries a sync's closing status write inside the ReplicaSet write before it, so
// a sync that scales costs one local activity, not two. The status is written after the
// ReplicaSet, as before.
func FoldStatus(steps []Step) []Step {
	n := len(steps)
	if n < 2 || steps[n-1].Kind != StepUpdateStatus {
		return steps
	}
	switch steps[n-2].Kind {
	case StepCreate, StepScaleUp, StepScaleDown, StepUpdateRS:
	default:
		return steps
	}
	out := append([]Step(nil), steps[:n-1]...)
	out[n-2].Deployment = steps[n-1].Deployment
	return out
}
