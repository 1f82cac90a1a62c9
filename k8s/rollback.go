package k8s

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// rollbackTo returns the requested revision: a signal's request first, then the deprecated
// rollback annotation.
func (p *planner) rollbackTo(req Request) (int64, bool) {
	if req.RollbackTo != nil {
		return *req.RollbackTo, true
	}
	v := p.d.Annotations[appsv1.DeprecatedRollbackTo]
	if v == "" {
		return 0, false
	}
	rev, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return rev, true
}

// rollbackToRevision copies the template of the ReplicaSet at the revision (0: the previous
// one) into the Deployment, and always clears the request.
func (p *planner) rollbackToRevision(rev int64) {
	d := p.d
	p.rollback = true
	if target := p.alreadyRolledBack(rev); target != 0 {
		p.rollbackStep(Event{Type: eventTypeNormal, Reason: RollbackDone,
			Message: fmt.Sprintf("Rolled back deployment %q to revision %d", d.Name, target)})
		return
	}
	newRS, old := p.getNewReplicaSet(true)
	all := withNew(old, newRS)
	if rev == 0 {
		if rev = LastRevision(all); rev == 0 {
			p.rollbackStep(Event{Type: eventTypeWarning, Reason: RollbackRevisionNotFound, Message: "Unable to find last revision."})
			return
		}
	}
	for _, rs := range all {
		v, err := Revision(rs.Annotations)
		if err != nil || v != rev {
			continue
		}
		if EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
			p.rollbackStep(Event{Type: eventTypeWarning, Reason: RollbackTemplateUnchanged,
				Message: fmt.Sprintf("The rollback revision contains the same template as current deployment %q", d.Name)})
			return
		}
		d.Spec.Template.ObjectMeta = *rs.Spec.Template.ObjectMeta.DeepCopy()
		d.Spec.Template.Spec = *rs.Spec.Template.Spec.DeepCopy()
		delete(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		p.foundOK = false
		kept := map[string]string{}
		for k, v := range d.Annotations {
			if keptOnRollback(k) {
				kept[k] = v
			}
		}
		for k, v := range rs.Annotations {
			if !keptOnRollback(k) {
				kept[k] = v
			}
		}
		d.Annotations = kept
		p.rollbackStep(Event{Type: eventTypeNormal, Reason: RollbackDone,
			Message: fmt.Sprintf("Rolled back deployment %q to revision %d", d.Name, rev)})
		return
	}
	p.rollbackStep(Event{Type: eventTypeWarning, Reason: RollbackRevisionNotFound, Message: "Unable to find the revision to rollback to."})
}

// rollbackStep updates the Deployment (template and annotations) with the rollback annotation
// removed, and records the event once that update succeeds. A request that changes nothing (a
// signal for an unknown revision) writes nothing and only records the event.
func (p *planner) rollbackStep(ev Event) {
	_, hadAnnotation := p.orig.Annotations[appsv1.DeprecatedRollbackTo]
	delete(p.d.Annotations, appsv1.DeprecatedRollbackTo)
	if !hadAnnotation && equality.Semantic.DeepEqual(p.orig.Spec.Template, p.d.Spec.Template) {
		p.steps = append(p.steps, Step{Kind: StepEvent, Events: []Event{ev}})
		return
	}
	p.steps = append(p.steps, Step{Kind: StepRollback, Deployment: stripDeployment(p.d), Events: []Event{ev}})
}

// alreadyRolledBack returns the revision a request for rev (0: the previous one) resolves to
// when the Deployment already has that revision's template while the ReplicaSet still carries
// its old revision, below the newest: our own rollback write, made by a sync whose workflow
// task did not complete (the worker died), so the retried sync asks again. Upstream cannot
// meet this case (its rollback clears the request in the same write). A request for the
// template that is current by revision too is no such case: upstream warns that the template is
// unchanged. It returns 0 otherwise.
func (p *planner) alreadyRolledBack(rev int64) int64 {
	if rev == 0 {
		rev = LastRevision(p.rss)
	}
	if rev == 0 || rev >= MaxRevision(p.rss) {
		return 0
	}
	for _, rs := range p.rss {
		if v, err := Revision(rs.Annotations); err == nil && v == rev && EqualIgnoreHash(&p.d.Spec.Template, &rs.Spec.Template) {
			return rev
		}
	}
	return 0
}

// RolloutAnnotationPrefix starts every annotation of ours on a Deployment: the rollout's
// strategy (steps, traffic, blue-green, auto-rollback, notify) and managed mode's.
const RolloutAnnotationPrefix = "temporal-rollout.io/"

// keptOnRollback reports whether a rollback keeps the Deployment's own annotation k rather
// than the one the ReplicaSet it returns to recorded: upstream's skip list, and ours. The
// rollout strategy is the Deployment's, not its template's: an abort of the rollout that added
// the traffic and steps annotations keeps both, so the next rollout is still routed and
// stepped (upstream's rollback copies the ReplicaSet's annotations and would drop them).
func keptOnRollback(k string) bool {
	return annotationsToSkip[k] || strings.HasPrefix(k, RolloutAnnotationPrefix)
}
