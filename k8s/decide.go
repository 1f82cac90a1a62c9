package k8s

import (
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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
	// oneMove: a RollingUpdate sync makes one scaling move, as upstream's does (see
	// rolloutRolling).
	oneMove bool
	// templateHash: see Snapshot.TemplateHash.
	templateHash string
	// canary: see Request.Canary. newCap is the new ReplicaSet's size at its step (-1: no
	// step); reached: see Plan.CanaryReached.
	canary  *Canary
	newCap  int32
	reached bool
	// keepLastOld (managed mode): while the new ReplicaSet is below replicas, the old ones
	// keep at least one replica between them, so there are never fewer than two active
	// ReplicaSets but at the end (see KeepsParkedQuiet).
	keepLastOld bool
	// found memoizes FindNewReplicaSet over rss for d's template (foundOK: it is set): a sync
	// asks for the new ReplicaSet several times, and the template comparison is its costliest
	// part. The writers of rss and of d's template keep it true: setRSS and rollbackToRevision
	// reset it, and getNewReplicaSet sets it to the ReplicaSet it creates.
	found   *appsv1.ReplicaSet
	foundOK bool
}

// newReplicaSet is FindNewReplicaSet(p.d, p.rss), memoized.
func (p *planner) newReplicaSet() *appsv1.ReplicaSet {
	if !p.foundOK {
		p.found, p.foundOK = FindNewReplicaSet(p.d, p.rss), true
	}
	return p.found
}

// oldReplicaSets is FindOldReplicaSets(p.d, p.rss), with the memoized new ReplicaSet.
func (p *planner) oldReplicaSets() []*appsv1.ReplicaSet {
	return without(p.rss, p.newReplicaSet())
}

// setRSS replaces the working ReplicaSets.
func (p *planner) setRSS(rss []*appsv1.ReplicaSet) {
	p.rss, p.foundOK = rss, false
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
//
// With req.Managed it is DecideManaged.
func Decide(s Snapshot, req Request, now time.Time) (Plan, error) {
	return decideWith(s, req, now, false)
}

// decideWith is Decide; with oneMove a RollingUpdate sync makes one scaling move, as upstream's
// does (see rolloutRolling), which tests use to hold our decisions beside upstream's.
func decideWith(s Snapshot, req Request, now time.Time, oneMove bool) (Plan, error) {
	if s.Deployment == nil {
		return Plan{}, fmt.Errorf("decide: snapshot has no deployment")
	}
	if req.Managed {
		return decideManaged(s, req, now, oneMove)
	}
	return decideFull(s, req, now, false, oneMove)
}

// decideFull is Decide in full mode; keepLastOld is set for the unparked view of managed mode.
func decideFull(s Snapshot, req Request, now time.Time, keepLastOld, oneMove bool) (Plan, error) {
	p := &planner{
		keepLastOld: keepLastOld,
		now:         metav1.NewTime(now).Rfc3339Copy(),
		orig:        s.Deployment,
		d:           s.Deployment.DeepCopy(),
		pods:        s.Pods,
		oneMove:     oneMove,

		templateHash: s.TemplateHash,
		canary:       req.Canary,
		newCap:       -1,
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(s.ReplicaSets))
	for _, rs := range s.ReplicaSets {
		rss = append(rss, rs.DeepCopy())
	}
	p.setRSS(rss)
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

	if c := req.Canary; c != nil {
		hash := s.TemplateHash
		if hash == "" {
			hash = PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
		}
		if c.Hash != hash {
			return Plan{Phase: PhaseProgressing, Status: d.Status, CanaryStale: true}, nil
		}
	}

	p.claim(selector)

	if d.DeletionTimestamp != nil {
		newRS, old := p.getNewReplicaSet(false)
		p.syncDeploymentStatus(withNew(old, newRS), newRS)
		return p.finish(PhaseDeleting, ""), nil
	}

	p.checkPausedConditions()
	if !d.Spec.Paused {
		p.checkCanaryConditions()
	}
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
	p.setRSS(kept)
	if len(step.Adopt)+len(step.Release) > 0 {
		step.Kind = StepClaim
		p.steps = append(p.steps, step)
	}
}

func (p *planner) event(typ, reason, msg string) {
	p.steps = append(p.steps, Step{Kind: StepEvent, Events: []Event{{Type: typ, Reason: reason, Message: msg}}})
}

// finish turns the working copies into a plan: a status write when the Deployment's status or
// annotations changed, and the phase.
func (p *planner) finish(phase Phase, msg string) Plan {
	d := p.d
	if !equality.Semantic.DeepEqual(p.orig.Status, d.Status) || !reflect.DeepEqual(p.orig.Annotations, d.Annotations) && !p.hasRollbackStep() {
		p.insertStatusStep()
	}
	plan := Plan{Steps: p.steps, Status: d.Status, RecheckAt: p.recheck, RollbackHandled: p.rollback, Message: msg, CanaryReached: p.reached}
	plan.Revision, _ = Revision(d.Annotations)
	if newRS := p.newReplicaSet(); newRS != nil {
		plan.NewReplicaSet = newRS.Name
	}
	if phase == "" {
		switch c := GetCondition(d.Status, appsv1.DeploymentProgressing); {
		case c != nil && c.Reason == TimedOutReason:
			phase = PhaseDeadlineExceeded
		case p.rolloutComplete(&d.Status):
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
//
// A status that completes a rollout of ours (a Deployment with steps, traffic or blue-green)
// also records its template as the stable one (StableAnnotation), in the same write.
func (p *planner) insertStatusStep() {
	step := Step{Kind: StepUpdateStatus, Deployment: stripDeployment(p.d)}
	if h := p.completedTemplate(); h != "" {
		if step.Deployment.Annotations == nil {
			step.Deployment.Annotations = map[string]string{}
		}
		step.Deployment.Annotations[StableAnnotation] = h
	}
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

// completedTemplate is the pod-template-hash that the status being written completes, for a
// Deployment rolled out with steps, traffic or blue-green ("" otherwise, or when the status
// does not complete a rollout).
func (p *planner) completedTemplate() string {
	a := p.d.Annotations
	if a[StepsAnnotation] == "" && a[TrafficAnnotation] == "" && a[BlueGreenAnnotation] == "" {
		return ""
	}
	newRS := p.newReplicaSet()
	if newRS == nil || !p.rolloutComplete(&p.d.Status) {
		return ""
	}
	return newRS.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}
