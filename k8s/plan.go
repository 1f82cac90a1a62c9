package k8s

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is what one sync sees: the Deployment, the ReplicaSets it owns or could adopt, and
// (for Recreate) how many pods of each ReplicaSet are still running.
type Snapshot struct {
	Deployment  *appsv1.Deployment   `json:"deployment"`
	ReplicaSets []*appsv1.ReplicaSet `json:"replicaSets,omitempty"`
	// Pods counts the pods that are neither Succeeded nor Failed, per owning ReplicaSet. It is
	// filled for the Recreate strategy only, sorted by UID.
	Pods []PodCount `json:"pods,omitempty"`
}

// PodCount is the number of running (not Succeeded or Failed) pods of one ReplicaSet.
type PodCount struct {
	ReplicaSetUID types.UID `json:"replicaSetUID"`
	Running       int32     `json:"running"`
}

// Request carries what the user asked for through Temporal, on top of the Deployment spec.
type Request struct {
	// RollbackTo is a rollback signal's revision; 0 means the previous revision.
	RollbackTo *int64 `json:"rollbackTo,omitempty"`
	// Chain lets one RollingUpdate sync go on scaling while it can: after the old ReplicaSets
	// are scaled down, the new one is scaled up in the same sync, and so on, as upstream's next
	// syncs (woken by its own writes) would do on the same observation. Without it a sync
	// makes one scaling move, as upstream's does. See rolloutRolling.
	Chain bool `json:"chain,omitempty"`
}

// StepKind names a write; each maps to one activity, and the names read well in the
// Temporal UI.
type StepKind string

// The kinds of step, in the words the Temporal history shows.
const (
	StepEvent              StepKind = "RecordEvent"
	StepClaim              StepKind = "ClaimReplicaSets"
	StepCreate             StepKind = "CreateReplicaSet"
	StepScaleUp            StepKind = "ScaleUpReplicaSet"
	StepScaleDown          StepKind = "ScaleDownReplicaSet"
	StepUpdateRS           StepKind = "UpdateReplicaSet"
	StepCleanup            StepKind = "CleanupReplicaSets"
	StepRollback           StepKind = "RollbackDeployment"
	StepUpdateStatus       StepKind = "UpdateDeploymentStatus"
	eventTypeNormal                 = corev1.EventTypeNormal
	eventTypeWarning                = corev1.EventTypeWarning
	eventScalingReplicaSet          = "ScalingReplicaSet"
)

// Event is a Kubernetes event to record on the Deployment.
type Event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ObjectRef names an object and pins its UID, used as a precondition.
type ObjectRef struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Step is one write. Only the fields of its kind are set. Events are recorded once the write
// succeeds.
type Step struct {
	Kind StepKind `json:"kind"`
	// ClaimReplicaSets.
	Adopt   []ObjectRef `json:"adopt,omitempty"`
	Release []ObjectRef `json:"release,omitempty"`
	// CreateReplicaSet, ScaleUp/DownReplicaSet, UpdateReplicaSet: the whole desired object.
	ReplicaSet   *appsv1.ReplicaSet `json:"replicaSet,omitempty"`
	FromReplicas int32              `json:"fromReplicas,omitempty"`
	// CleanupReplicaSets.
	Delete []ObjectRef `json:"delete,omitempty"`
	// UpdateDeploymentStatus and RollbackDeployment: the whole desired object.
	Deployment *appsv1.Deployment `json:"deployment,omitempty"`
	Events     []Event            `json:"events,omitempty"`
}

// Phase summarises where a Deployment stands after a sync.
type Phase string

// The phases a sync can end in.
const (
	PhaseProgressing      Phase = "Progressing"
	PhaseComplete         Phase = "Complete"
	PhasePaused           Phase = "Paused"
	PhaseDeadlineExceeded Phase = "DeadlineExceeded"
	PhaseRollingBack      Phase = "RollingBack"
	PhaseDeleting         Phase = "Deleting"
	PhaseInvalid          Phase = "Invalid"
)

// Converged reports whether nothing more happens without a new change: the sync that ends here
// closes one rollout.
func (p Phase) Converged() bool {
	switch p {
	case PhaseComplete, PhasePaused, PhaseDeadlineExceeded, PhaseInvalid:
		return true
	}
	return false
}

// Plan is the outcome of one sync: the writes in order, and what the Deployment looks like
// once they are done.
type Plan struct {
	Steps  []Step                  `json:"steps,omitempty"`
	Phase  Phase                   `json:"phase"`
	Status appsv1.DeploymentStatus `json:"status"`
	// Revision is the Deployment's revision once the plan is applied.
	Revision int64 `json:"revision"`
	// NewReplicaSet is the ReplicaSet that matches the template, if any.
	NewReplicaSet string `json:"newReplicaSet,omitempty"`
	// RecheckAt is when to sync again if nothing happens before: the progress deadline.
	RecheckAt *metav1.Time `json:"recheckAt,omitempty"`
	// RollbackHandled is true when the plan consumes the rollback request.
	RollbackHandled bool `json:"rollbackHandled,omitempty"`
	// Message explains a Phase of Invalid.
	Message string `json:"message,omitempty"`
}

// planner holds one sync's working copies. Writes are recorded as steps and applied to the
// copies, so later decisions in the same sync see them.
type planner struct {
	now      metav1.Time
	orig     *appsv1.Deployment
	d        *appsv1.Deployment
	rss      []*appsv1.ReplicaSet
	pods     []PodCount
	steps    []Step
	recheck  *metav1.Time
	rollback bool
	// rollbackPending is set while a rollback is requested but not yet carried out (the
	// Deployment is paused): cleanup must not delete the revision it may go back to.
	rollbackPending bool
	// chain: see Request.Chain.
	chain bool
}

// Decide runs one sync of the Deployment controller over a snapshot, in upstream order:
//
//  1. an empty selector gets a SelectingAll warning and nothing else;
//  2. adopt matching orphans and release owned ReplicaSets that no longer match;
//  3. a Deployment being deleted gets its status synced only;
//  4. set the paused condition; a paused Deployment is synced (scaled) only;
//  5. handle a rollback request (annotation or signal);
//  6. a scaling event is synced only;
//  7. otherwise roll out with Recreate or RollingUpdate.
func Decide(s Snapshot, req Request, now time.Time) (Plan, error) {
	if s.Deployment == nil {
		return Plan{}, fmt.Errorf("decide: snapshot has no deployment")
	}
	p := &planner{
		now:   metav1.NewTime(now).Rfc3339Copy(),
		orig:  s.Deployment,
		d:     s.Deployment.DeepCopy(),
		pods:  s.Pods,
		chain: req.Chain,
	}
	for _, rs := range s.ReplicaSets {
		p.rss = append(p.rss, rs.DeepCopy())
	}
	d := p.d
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = new(int32)
		*d.Spec.Replicas = 1
	}

	if d.Spec.Selector == nil || (len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		p.event(eventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
		}
		return p.finish(PhaseInvalid, "the deployment selects all pods; a non-empty selector is required"), nil
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		msg := fmt.Sprintf("Deployment %q has an invalid label selector: %v", d.Name, err)
		p.event(eventTypeWarning, "InvalidSelector", msg)
		return p.finish(PhaseInvalid, msg), nil
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType, appsv1.RecreateDeploymentStrategyType:
	default:
		msg := fmt.Sprintf("Deployment %q has unsupported strategy type %q", d.Name, d.Spec.Strategy.Type)
		p.event(eventTypeWarning, "InvalidStrategy", msg)
		return p.finish(PhaseInvalid, msg), nil
	}

	p.claim(selector)

	if d.DeletionTimestamp != nil {
		newRS, old := p.getNewReplicaSet(false)
		p.syncDeploymentStatus(withNew(old, newRS), newRS)
		return p.finish(PhaseDeleting, ""), nil
	}

	p.checkPausedConditions()
	_, p.rollbackPending = p.rollbackTo(req)
	if d.Spec.Paused {
		p.sync()
		return p.finish(PhasePaused, ""), nil
	}

	if rev, ok := p.rollbackTo(req); ok {
		p.rollbackToRevision(rev)
		return p.finish(PhaseRollingBack, ""), nil
	}

	if p.isScalingEvent() {
		p.sync()
		return p.finish("", ""), nil
	}

	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		p.rolloutRecreate()
	} else {
		p.rolloutRolling()
	}
	return p.finish("", ""), nil
}

// claim adopts orphans that match the selector and releases owned ReplicaSets that do not.
// Adoption patches the controllerRef; the activity first re-reads the Deployment uncached.
func (p *planner) claim(selector labels.Selector) {
	d := p.d
	var kept []*appsv1.ReplicaSet
	var step Step
	for _, rs := range p.rss {
		match := selector.Matches(labels.Set(rs.Labels))
		ref := metav1.GetControllerOf(rs)
		switch {
		case ref != nil && ref.UID != d.UID:
		case ref != nil && match:
			kept = append(kept, rs)
		case ref != nil:
			if d.DeletionTimestamp == nil {
				step.Release = append(step.Release, ObjectRef{Name: rs.Name, UID: rs.UID})
			}
		case d.DeletionTimestamp != nil || !match || rs.DeletionTimestamp != nil || rs.Namespace != d.Namespace:
		default:
			rs.OwnerReferences = append(rs.OwnerReferences, *metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment")))
			step.Adopt = append(step.Adopt, ObjectRef{Name: rs.Name, UID: rs.UID})
			kept = append(kept, rs)
		}
	}
	p.rss = kept
	if len(step.Adopt)+len(step.Release) > 0 {
		step.Kind = StepClaim
		p.steps = append(p.steps, step)
	}
}

func (p *planner) event(typ, reason, msg string) {
	p.steps = append(p.steps, Step{Kind: StepEvent, Events: []Event{{Type: typ, Reason: reason, Message: msg}}})
}

// checkPausedConditions sets Progressing=Unknown with DeploymentPaused or DeploymentResumed,
// unless the rollout already timed out.
func (p *planner) checkPausedConditions() {
	d := p.d
	if !HasProgressDeadline(d) {
		return
	}
	cond := GetCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == TimedOutReason {
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

// sync scales (proportionally when needed), cleans up while paused (unless a rollback is
// pending, as upstream), and syncs status.
func (p *planner) sync() {
	newRS, old := p.getNewReplicaSet(false)
	p.scale(newRS, old)
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
	old := FindOldReplicaSets(d, p.rss)
	existing := FindNewReplicaSet(d, p.rss)
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
	hash := PodTemplateHash(&template, d.Status.CollisionCount)
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
			if p.chain {
				// A chained sync grew it after scaling old ones down: create it after them,
				// so the total never passes replicas + maxSurge between the writes.
				p.steps = append(append(p.steps[:i:i], p.steps[i+1:]...), s)
			}
			return
		}
		if s.Kind == StepScaleUp || s.Kind == StepScaleDown || s.Kind == StepUpdateRS {
			from = s.FromReplicas
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

// syncRolloutStatus is syncDeploymentStatus plus the Progressing condition: complete,
// progressing, or timed out against progressDeadlineSeconds, and ReplicaFailure copied up.
func (p *planner) syncRolloutStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	d := p.d
	st := p.calculateStatus(all, newRS)
	if !HasProgressDeadline(d) {
		RemoveCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := GetCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == NewRSAvailableReason
	if HasProgressDeadline(d) && !complete {
		switch {
		case DeploymentComplete(d, &st):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			SetCondition(&st, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, msg, p.now))
		case DeploymentProgressing(d, &st):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			c := NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, msg, p.now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				RemoveCondition(&st, appsv1.DeploymentProgressing)
			}
			SetCondition(&st, c)
		case p.timedOut(&st):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			SetCondition(&st, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, msg, p.now))
		}
	}
	if failures := replicaFailures(all, newRS); len(failures) > 0 {
		SetCondition(&st, failures[0])
	} else {
		RemoveCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if !equality.Semantic.DeepEqual(d.Status, st) {
		d.Status = st
	}
	p.recheck = recheckAt(d, &st)
}

// timedOut reports whether the Progressing condition was last updated more than
// progressDeadlineSeconds ago.
func (p *planner) timedOut(st *appsv1.DeploymentStatus) bool {
	return timedOut(p.d, st, p.now.Time)
}

func timedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !HasProgressDeadline(d) {
		return false
	}
	c := GetCondition(*st, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == NewRSAvailableReason {
		return false
	}
	if c.Reason == TimedOutReason {
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

// recheckAt is when a rollout that makes no progress must be checked against its deadline: one
// second after the Progressing condition's last update plus progressDeadlineSeconds.
func recheckAt(d *appsv1.Deployment, st *appsv1.DeploymentStatus) *metav1.Time {
	c := GetCondition(*st, appsv1.DeploymentProgressing)
	if !HasProgressDeadline(d) || c == nil || DeploymentComplete(d, st) || c.Reason == TimedOutReason {
		return nil
	}
	t := metav1.NewTime(c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds)*time.Second + time.Second))
	return &t
}

func replicaFailures(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	collect := func(rs *appsv1.ReplicaSet) {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				out = append(out, replicaSetToDeploymentCondition(c))
			}
		}
	}
	if newRS != nil {
		collect(newRS)
	}
	if len(out) > 0 {
		return out
	}
	for _, rs := range all {
		if rs != nil {
			collect(rs)
		}
	}
	return out
}

// finish turns the working copies into a plan: a status write when the Deployment's status or
// annotations changed, and the phase.
func (p *planner) finish(phase Phase, msg string) Plan {
	d := p.d
	if !equality.Semantic.DeepEqual(p.orig.Status, d.Status) || !reflect.DeepEqual(p.orig.Annotations, d.Annotations) && !p.hasRollbackStep() {
		p.insertStatusStep()
	}
	plan := Plan{Steps: p.steps, Status: d.Status, RecheckAt: p.recheck, RollbackHandled: p.rollback, Message: msg}
	plan.Revision, _ = Revision(d.Annotations)
	if newRS := FindNewReplicaSet(d, p.rss); newRS != nil {
		plan.NewReplicaSet = newRS.Name
	}
	if phase == "" {
		switch c := GetCondition(d.Status, appsv1.DeploymentProgressing); {
		case c != nil && c.Reason == TimedOutReason:
			phase = PhaseDeadlineExceeded
		case DeploymentComplete(d, &d.Status):
			phase = PhaseComplete
		default:
			phase = PhaseProgressing
		}
	}
	plan.Phase = phase
	return plan
}

func (p *planner) hasRollbackStep() bool {
	for _, s := range p.steps {
		if s.Kind == StepRollback {
			return true
		}
	}
	return false
}

// insertStatusStep writes status and annotations after the ReplicaSet writes, and before a
// rollback, as upstream orders them.
func (p *planner) insertStatusStep() {
	step := Step{Kind: StepUpdateStatus, Deployment: stripDeployment(p.d)}
	for i, s := range p.steps {
		if s.Kind == StepRollback {
			p.steps = append(p.steps[:i], append([]Step{step}, p.steps[i:]...)...)
			return
		}
	}
	p.steps = append(p.steps, step)
}

func stripDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	c := d.DeepCopy()
	c.ManagedFields = nil
	return c
}

// ObjectVersion names a Deployment or ReplicaSet at a resourceVersion: a sync must not decide
// on a cache older than that. Kind is "Deployment" or "ReplicaSet".
type ObjectVersion struct {
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	ResourceVersion string `json:"rv,omitempty"`
	// Gone: the object was deleted and must be absent.
	Gone bool `json:"gone,omitempty"`
}
