package k8s

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Managed mode: our workflow drives chosen Deployments while kube-controller-manager's own
// Deployment controller keeps running (docs/managed-mode-design.md has the reasoning, with the
// upstream lines it rests on).
//
// An opted-in Deployment is parked: spec.paused true and strategy Recreate, the user's own
// paused flag and strategy saved in ParkedAnnotation. The built-in controller then runs only its
// paused sync (sync.go: getAllReplicaSetsAndSyncRevision without creating, scale, cleanup,
// status), and scale writes in three states only: (1) one active ReplicaSet (or none) not at
// spec.replicas; (2) a saturated new ReplicaSet while an old one is active; (3) several active
// under RollingUpdate, which parking turns off. Our rollout never passes through (1) or (2)
// (KeepsParkedQuiet): the new ReplicaSet goes up before an old one goes down, the last old one
// keeps a replica until the new one is full, and the new one's desired-replicas annotation is
// withheld while an old one is active. Our status is the paused sync's status, so neither
// rewrites the other's.

const (
	// ManagedAnnotation opts a Deployment in: "true" drives it in managed mode.
	ManagedAnnotation = "temporal-rollout.io/managed"
	// ParkedAnnotation holds the user's spec.paused and spec.strategy (ParkedSpec, JSON) while
	// the Deployment is parked.
	ParkedAnnotation = "temporal-rollout.io/parked"
	// WithheldReplicas is the desired-replicas annotation of a new ReplicaSet while an old one
	// is active in managed mode: not a number, so the built-in controller's IsSaturated is false.
	WithheldReplicas = "withheld"
)

// ParkedSpec is what parking replaced: the user's paused flag and strategy.
type ParkedSpec struct {
	Paused   bool                      `json:"paused,omitempty"`
	Strategy appsv1.DeploymentStrategy `json:"strategy"`
}

// WantsManaged reports whether the Deployment opted in to managed mode.
func WantsManaged(d *appsv1.Deployment) bool {
	return d.Annotations[ManagedAnnotation] == "true"
}

// ManagedInvolved reports whether managed mode has anything to do with the Deployment: it
// opted in, or it is still parked (it opted out, and must be handed back).
func ManagedInvolved(d *appsv1.Deployment) bool {
	_, parked := d.Annotations[ParkedAnnotation]
	return WantsManaged(d) || parked
}

// Parked returns the user's spec saved by Park, and whether the Deployment is parked. A
// parked annotation that is not a ParkedSpec is an error.
func Parked(d *appsv1.Deployment) (ParkedSpec, bool, error) {
	raw, ok := d.Annotations[ParkedAnnotation]
	if !ok {
		return ParkedSpec{}, false, nil
	}
	var ps ParkedSpec
	if err := json.Unmarshal([]byte(raw), &ps); err != nil {
		return ParkedSpec{}, true, fmt.Errorf("annotation %s=%q: %w", ParkedAnnotation, raw, err)
	}
	switch ps.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType, appsv1.RecreateDeploymentStrategyType:
	default:
		return ParkedSpec{}, true, fmt.Errorf("annotation %s=%q: strategy type %q is not RollingUpdate or Recreate", ParkedAnnotation, raw, ps.Strategy.Type)
	}
	return ps, true, nil
}

// CanPark says why the Deployment's own strategy cannot be driven in managed mode, or "".
// Recreate passes through "no active ReplicaSet", where the paused sync scales the newest
// ReplicaSet to spec.replicas; maxSurge 0 leaves one active ReplicaSet below spec.replicas at
// its first step, which the paused sync scales back. With guard (the ReplicaSet policy of
// deploy/managed/guard.yaml denies those scales) every strategy can.
func CanPark(strategy appsv1.DeploymentStrategy, guard bool) string {
	if guard {
		return ""
	}
	if strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return fmt.Sprintf("strategy %s cannot be driven beside the built-in Deployment controller (it passes through a state the controller's paused sync rescales); only RollingUpdate with maxSurge of at least 1 can", strategy.Type)
	}
	surge := intstr.FromString("25%")
	if ru := strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	// A percentage rounds up, so any non-zero one gives at least one replica.
	if n, err := intstr.GetScaledValueFromIntOrPercent(&surge, 1, true); err != nil || n < 1 {
		return fmt.Sprintf("maxSurge %s cannot be driven beside the built-in Deployment controller (its first step leaves one active ReplicaSet below replicas, which the controller's paused sync rescales); use a maxSurge of at least 1", surge.String())
	}
	return ""
}

// Park saves the user's paused flag and strategy in ParkedAnnotation and sets spec.paused and
// strategy Recreate. A Deployment already parked keeps its saved spec, updated with any
// change someone made to the parked fields since (see ParkedDrift).
func Park(d *appsv1.Deployment) error {
	ps, parked, err := Parked(d)
	if err != nil {
		return err
	}
	switch {
	case !parked:
		ps = ParkedSpec{Paused: d.Spec.Paused, Strategy: *d.Spec.Strategy.DeepCopy()}
	default:
		if !d.Spec.Paused {
			// `kubectl rollout resume` on a parked Deployment: the user's resume.
			ps.Paused = false
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
			// A strategy written over the parked one is the user's new strategy.
			ps.Strategy = *d.Spec.Strategy.DeepCopy()
		}
	}
	return ParkAs(d, ps)
}

// ParkAs parks d with ps as the user's spec.
func ParkAs(d *appsv1.Deployment, ps ParkedSpec) error {
	raw, err := json.Marshal(ps)
	if err != nil {
		return fmt.Errorf("encode %s: %w", ParkedAnnotation, err)
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[ParkedAnnotation] = string(raw)
	d.Spec.Paused = true
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return nil
}

// ParkedDrift reports whether a parked Deployment's parked fields were changed by someone
// (spec.paused false, or a strategy other than the bare Recreate parking sets).
func ParkedDrift(d *appsv1.Deployment) bool {
	return !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil
}

// Unpark writes the user's paused flag and strategy back and removes ParkedAnnotation. It
// touches nothing else: no template change, so no pod restarts. An unparked Deployment is
// left as it is.
func Unpark(d *appsv1.Deployment) error {
	ps, parked, err := Parked(d)
	if err != nil || !parked {
		return err
	}
	if ParkedDrift(d) {
		// Someone wrote the parked fields since: theirs are the latest word.
		if err := Park(d); err != nil {
			return err
		}
		ps, _, _ = Parked(d)
	}
	d.Spec.Paused = ps.Paused
	d.Spec.Strategy = *ps.Strategy.DeepCopy()
	delete(d.Annotations, ParkedAnnotation)
	return nil
}

// Unparked is a copy of a parked Deployment as the user wrote it: their paused flag and
// strategy, every annotation (ours included) unchanged. The rollout is decided on it.
func Unparked(d *appsv1.Deployment, ps ParkedSpec) *appsv1.Deployment {
	v := d.DeepCopy()
	v.Spec.Paused = ps.Paused
	v.Spec.Strategy = *ps.Strategy.DeepCopy()
	return v
}

// Effective is the Deployment as its user wrote it: Unparked when parked (and readable), else
// d itself.
func Effective(d *appsv1.Deployment) *appsv1.Deployment {
	if ps, parked, err := Parked(d); parked && err == nil {
		return Unparked(d, ps)
	}
	return d
}

// DecideManaged is one sync in managed mode:
//
//   - a Deployment that did not opt in is Released (nothing to do); one that opted out but is
//     still parked is handed back (StepRelease), as is one whose saved strategy cannot be
//     driven;
//   - one that opted in but is not parked yet is parked (StepPark), unless its strategy cannot
//     be (Released with the reason in Message: the workflow warns with a
//     ManagedStrategyUnsupported event and leaves it to kube-controller-manager);
//   - a parked one whose parked fields someone changed is parked again (StepPark), taking
//     their paused flag or strategy as the user's;
//   - otherwise the rollout is decided on the unparked view (the user's strategy and paused
//     flag), then made quiet for the built-in controller (see quietPlan), and the status
//     written is the built-in controller's paused-sync status of the result.
func DecideManaged(s Snapshot, req Request, now time.Time) (Plan, error) {
	return decideManaged(s, req, now, false)
}

// decideManaged is DecideManaged; oneMove as in decide.
func decideManaged(s Snapshot, req Request, now time.Time, oneMove bool) (Plan, error) {
	d := s.Deployment
	ps, parked, err := Parked(d)
	if err != nil {
		// The user's strategy is lost: hand it back as it is, and say why.
		msg := fmt.Sprintf("cannot read the parked spec: %v; remove the annotation and set spec.paused and spec.strategy by hand", err)
		return Plan{Phase: PhaseInvalid, Status: d.Status, Message: msg,
			Steps: []Step{{Kind: StepEvent, Events: []Event{{Type: eventTypeWarning, Reason: "ManagedParkInvalid", Message: msg}}}}}, nil
	}
	wants := WantsManaged(d)
	switch {
	case d.DeletionTimestamp != nil:
		return Plan{Phase: PhaseDeleting, Status: d.Status}, nil
	case !wants && !parked:
		return Plan{Phase: PhaseReleased, Status: d.Status}, nil
	case !wants:
		return Plan{Phase: PhaseProgressing, Status: d.Status, Steps: []Step{{Kind: StepRelease,
			Events: []Event{{Type: eventTypeNormal, Reason: "Released", Message: "Opted out of temporal-rollout: spec.paused and spec.strategy restored, handed back to the Deployment controller"}}}}}, nil
	case !parked:
		if why := CanPark(d.Spec.Strategy, req.ManagedGuard); why != "" {
			return Plan{Phase: PhaseReleased, Status: d.Status, Message: why}, nil
		}
		return Plan{Phase: PhaseProgressing, Status: d.Status, Steps: []Step{{Kind: StepPark,
			Events: []Event{{Type: eventTypeNormal, Reason: "Parked", Message: "Driven by temporal-rollout: spec.paused and spec.strategy parked (the user's are in the " + ParkedAnnotation + " annotation)"}}}}}, nil
	case ParkedDrift(d):
		return Plan{Phase: PhaseProgressing, Status: d.Status, Steps: []Step{{Kind: StepPark}}}, nil
	}
	if why := CanPark(ps.Strategy, req.ManagedGuard); why != "" {
		return Plan{Phase: PhaseProgressing, Status: d.Status, Message: why, Steps: []Step{{Kind: StepRelease,
			Events: []Event{{Type: eventTypeWarning, Reason: "ManagedStrategyUnsupported", Message: why + "; handed back to the Deployment controller"}}}}}, nil
	}

	view := s
	view.Deployment = Unparked(d, ps)
	setViewProgress(view.Deployment, req.ManagedProgress)
	plan, err := decideFull(view, req, now, true, oneMove)
	if err != nil {
		return Plan{}, err
	}
	quiet := quietPlan(s, plan, ps, now)
	if !quiet.quiet && !oneMove {
		// A sync of several moves passes through a state the paused sync would act on: one
		// move.
		if p1, err := decideFull(view, req, now, true, true); err == nil {
			if q1 := quietPlan(s, p1, ps, now); q1.quiet {
				quiet = q1
			}
		}
	}
	return quiet.plan, nil
}

// setViewProgress gives the unparked view the rollout's own Progressing condition: the one the
// workflow kept (mark), or, without one, a ProgressDeadlineExceeded we wrote; anything else
// stored is the paused sync's DeploymentPaused and is dropped, so the view starts the clock
// afresh (FoundNewReplicaSet, NewReplicaSetCreated or ReplicaSetUpdated at now).
func setViewProgress(v *appsv1.Deployment, mark *appsv1.DeploymentCondition) {
	stored := GetCondition(v.Status, appsv1.DeploymentProgressing)
	switch {
	case mark != nil:
		RemoveCondition(&v.Status, appsv1.DeploymentProgressing)
		v.Status.Conditions = append(v.Status.Conditions, *mark.DeepCopy())
	case stored != nil && stored.Reason == TimedOutReason:
	default:
		RemoveCondition(&v.Status, appsv1.DeploymentProgressing)
	}
}

// parkedProgress sets the Progressing condition the paused sync starts from on a parked
// Deployment's status: the rollout's ProgressDeadlineExceeded when the view timed out (the
// paused sync keeps that reason, so `kubectl rollout status` fails as usual), else none over a
// ProgressDeadlineExceeded we wrote earlier (the paused sync then writes DeploymentPaused).
func parkedProgress(st *appsv1.DeploymentStatus, view *appsv1.DeploymentCondition) {
	stored := GetCondition(*st, appsv1.DeploymentProgressing)
	switch {
	case view != nil && view.Reason == TimedOutReason:
		RemoveCondition(st, appsv1.DeploymentProgressing)
		st.Conditions = append(st.Conditions, *view.DeepCopy())
	case stored != nil && stored.Reason == TimedOutReason:
		RemoveCondition(st, appsv1.DeploymentProgressing)
	}
}

// quietResult is a managed plan and whether every state it passes through keeps the built-in
// controller's paused sync from writing a ReplicaSet.
type quietResult struct {
	plan  Plan
	quiet bool
}

// quietPlan turns a plan decided on the unparked view into the plan for the parked Deployment:
//
//   - the new ReplicaSet's desired-replicas is withheld while an old one is active after the
//     write, and given back (an UpdateReplicaSet) once none is;
//   - a rollback writes the Deployment parked again, with both of our annotations (upstream
//     copies the annotations of the ReplicaSet it returns to);
//   - the status written is the paused sync's status on the state the writes leave, placed
//     where the view's status write was (before a rollback, else last), and only when it
//     differs from the stored one.
//
// Each state after a ReplicaSet write is checked with KeepsParkedQuiet.
func quietPlan(s Snapshot, plan Plan, ps ParkedSpec, now time.Time) quietResult {
	st := newSimState(s)
	if c := GetCondition(plan.Status, appsv1.DeploymentProgressing); c != nil {
		plan.ManagedProgress = c.DeepCopy()
	}
	parkedProgress(&st.d.Status, plan.ManagedProgress)
	res := quietResult{quiet: true}
	var out []Step
	statusAt := -1
	written := map[string]bool{}
	for _, step := range plan.Steps {
		switch step.Kind {
		case StepUpdateStatus:
			// Recomputed below from the state the writes leave.
			if step.Deployment != nil {
				st.takeAnnotations(step.Deployment)
			}
			continue
		case StepRollback:
			if statusAt < 0 {
				statusAt = len(out)
			}
			d := step.Deployment.DeepCopy()
			_ = ParkAs(d, ps)
			d.Annotations[ManagedAnnotation] = "true"
			step.Deployment = d
			if pre := st.preWithhold(d, written); pre != nil {
				out = append(out, *pre)
				statusAt = len(out)
			}
			st.rollback(d)
		case StepCreate, StepScaleUp, StepScaleDown, StepUpdateRS:
			st.write(step.ReplicaSet)
			step.ReplicaSet = st.withhold(step.ReplicaSet)
			written[step.ReplicaSet.Name] = true
		case StepCleanup:
			st.remove(step.Delete)
		case StepClaim:
			st.claim(step)
		}
		out = append(out, step)
		if step.Kind != StepEvent && !st.quiet(now) {
			res.quiet = false
		}
	}
	if give := st.giveBack(written); give != nil {
		out = append(out, *give)
	}
	status, write := st.status(now)
	if write != nil {
		if statusAt < 0 || statusAt > len(out) {
			out = append(out, *write)
		} else {
			out = append(out[:statusAt], append([]Step{*write}, out[statusAt:]...)...)
		}
	}
	plan.Steps = out
	plan.Status = status
	res.plan = plan
	return res
}

// simState is the parked Deployment and its ReplicaSets as a plan's writes leave them.
type simState struct {
	orig *appsv1.Deployment
	d    *appsv1.Deployment
	rss  []*appsv1.ReplicaSet
	snap Snapshot
	// statusOf is the state whose status the plan writes: before a rollback, else the last.
	statusOf *simState
}

func newSimState(s Snapshot) *simState {
	st := &simState{orig: s.Deployment, d: s.Deployment.DeepCopy(), snap: s}
	for _, rs := range s.ReplicaSets {
		st.rss = append(st.rss, rs.DeepCopy())
	}
	return st
}

func (st *simState) snapshot() Snapshot {
	s := st.snap
	s.Deployment = st.d
	s.ReplicaSets = st.rss
	return s
}

func (st *simState) takeAnnotations(d *appsv1.Deployment) {
	st.d.Annotations = map[string]string{}
	for k, v := range d.Annotations {
		st.d.Annotations[k] = v
	}
}

func (st *simState) write(rs *appsv1.ReplicaSet) {
	for i, have := range st.rss {
		if have.Name == rs.Name {
			c := have.DeepCopy()
			c.Spec = *rs.Spec.DeepCopy()
			c.Annotations = map[string]string{}
			for k, v := range have.Annotations {
				c.Annotations[k] = v
			}
			for k, v := range rs.Annotations {
				c.Annotations[k] = v
			}
			st.rss[i] = c
			return
		}
	}
	c := rs.DeepCopy()
	c.Status = appsv1.ReplicaSetStatus{}
	st.rss = append(st.rss, c)
}

func (st *simState) remove(refs []ObjectRef) {
	gone := map[string]bool{}
	for _, r := range refs {
		gone[r.Name] = true
	}
	var kept []*appsv1.ReplicaSet
	for _, rs := range st.rss {
		if !gone[rs.Name] {
			kept = append(kept, rs)
		}
	}
	st.rss = kept
}

func (st *simState) claim(step Step) {
	// The paused sync adopts and releases by the same rule; the state after the claim is
	// what both see. Releasing drops the ReplicaSet from the Deployment's set.
	st.remove(step.Release)
}

func (st *simState) rollback(d *appsv1.Deployment) {
	if st.statusOf == nil {
		st.statusOf = st.clone()
	}
	st.d.Spec.Template = *d.Spec.Template.DeepCopy()
	st.takeAnnotations(d)
}

func (st *simState) clone() *simState {
	c := &simState{orig: st.orig, d: st.d.DeepCopy(), snap: st.snap}
	for _, rs := range st.rss {
		c.rss = append(c.rss, rs.DeepCopy())
	}
	return c
}

// withhold returns the ReplicaSet write with desired-replicas withheld when it is the new
// ReplicaSet and an old one is still active in the state (the write already applied).
func (st *simState) withhold(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	newRS := FindNewReplicaSet(st.d, st.rss)
	if newRS == nil || newRS.Name != rs.Name || sumSpec(filterActive(FindOldReplicaSets(st.d, st.rss))) == 0 {
		return rs
	}
	newRS.Annotations[DesiredReplicasAnnotation] = WithheldReplicas
	return withheld(rs)
}

// withheld is a copy of rs with its desired-replicas withheld.
func withheld(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	c := rs.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[DesiredReplicasAnnotation] = WithheldReplicas
	return c
}

// giveBack is the write that sets the new ReplicaSet's desired-replicas again once no old
// ReplicaSet is active, or nil. A new ReplicaSet this plan writes already is given back by the
// next sync (a second write of it in one plan would find it changed since the decision).
func (st *simState) giveBack(written map[string]bool) *Step {
	newRS := FindNewReplicaSet(st.d, st.rss)
	if newRS == nil || written[newRS.Name] || newRS.Annotations[DesiredReplicasAnnotation] != WithheldReplicas ||
		sumSpec(filterActive(FindOldReplicaSets(st.d, st.rss))) > 0 {
		return nil
	}
	orig := st.original(newRS.Name)
	if orig == nil {
		return nil
	}
	ps, _, _ := Parked(st.d)
	view := Unparked(st.d, ps)
	c := orig.DeepCopy()
	setReplicasAnnotations(c, replicas(view), replicas(view)+MaxSurge(view))
	newRS.Annotations[DesiredReplicasAnnotation] = c.Annotations[DesiredReplicasAnnotation]
	return &Step{Kind: StepUpdateRS, ReplicaSet: c, FromReplicas: rsReplicas(orig)}
}

// preWithhold is the write that withholds desired-replicas on the ReplicaSet a rollback to d's
// template returns to, before the rollback, when that ReplicaSet would otherwise be saturated
// beside an active old one; or nil.
func (st *simState) preWithhold(d *appsv1.Deployment, written map[string]bool) *Step {
	next := st.d.DeepCopy()
	next.Spec.Template = *d.Spec.Template.DeepCopy()
	target := FindNewReplicaSet(next, st.rss)
	if target == nil || written[target.Name] || WithheldOrDesired(target) < 0 ||
		sumSpec(filterActive(FindOldReplicaSets(next, st.rss))) == 0 {
		return nil
	}
	orig := st.original(target.Name)
	if orig == nil {
		return nil
	}
	target.Annotations[DesiredReplicasAnnotation] = WithheldReplicas
	written[target.Name] = true
	return &Step{Kind: StepUpdateRS, ReplicaSet: withheld(orig), FromReplicas: rsReplicas(orig)}
}

func (st *simState) original(name string) *appsv1.ReplicaSet {
	for _, rs := range st.snap.ReplicaSets {
		if rs.Name == name {
			return rs
		}
	}
	return nil
}

// parkedDecide is the built-in controller's paused sync on the state.
func (st *simState) parkedDecide(now time.Time) (Plan, error) {
	return decideFull(st.snapshot(), Request{}, now, false, true)
}

// quiet reports whether the built-in controller's paused sync would leave every ReplicaSet
// of the state alone (KeepsParkedQuiet).
func (st *simState) quiet(now time.Time) bool {
	plan, err := st.parkedDecide(now)
	return err == nil && KeepsParkedQuiet(plan, st.rss)
}

// status is the paused sync's status of the state the plan's status write describes, and that
// write, nil when the stored status and annotations already say it.
func (st *simState) status(now time.Time) (appsv1.DeploymentStatus, *Step) {
	at := st
	if st.statusOf != nil {
		at = st.statusOf
	}
	plan, err := at.parkedDecide(now)
	if err != nil {
		return st.orig.Status, nil
	}
	for _, step := range plan.Steps {
		if step.Kind == StepUpdateStatus && step.Deployment != nil {
			at.takeAnnotations(step.Deployment)
		}
	}
	if equality.Semantic.DeepEqual(plan.Status, st.orig.Status) && at.d.Annotations[RevisionAnnotation] == st.orig.Annotations[RevisionAnnotation] {
		return plan.Status, nil
	}
	w := st.orig.DeepCopy()
	w.ManagedFields = nil
	w.Status = plan.Status
	w.Annotations = map[string]string{}
	for k, v := range st.orig.Annotations {
		w.Annotations[k] = v
	}
	if rev, ok := at.d.Annotations[RevisionAnnotation]; ok {
		w.Annotations[RevisionAnnotation] = rev
	}
	return plan.Status, &Step{Kind: StepUpdateStatus, Deployment: w}
}

// KeepsParkedQuiet reports whether a plan of the paused sync (Decide on a parked Deployment
// with ReplicaSets rss) leaves every ReplicaSet's size alone: kube-controller-manager, running
// the same sync, then scales nothing. Allowed: copying the Deployment's annotations onto the
// new ReplicaSet (the paused sync does it after every annotation change, as our sync does, and
// both write the same values), and deleting old ReplicaSets past revisionHistoryLimit (both
// pick the same ones; the second delete finds them gone).
func KeepsParkedQuiet(plan Plan, rss []*appsv1.ReplicaSet) bool {
	for _, s := range plan.Steps {
		switch s.Kind {
		case StepCreate, StepScaleUp, StepScaleDown, StepClaim, StepRollback:
			return false
		case StepUpdateRS:
			for _, rs := range rss {
				if rs.Name != s.ReplicaSet.Name {
					continue
				}
				if rsReplicas(rs) != rsReplicas(s.ReplicaSet) ||
					rs.Annotations[DesiredReplicasAnnotation] != s.ReplicaSet.Annotations[DesiredReplicasAnnotation] ||
					rs.Annotations[MaxReplicasAnnotation] != s.ReplicaSet.Annotations[MaxReplicasAnnotation] {
					return false
				}
			}
		}
	}
	return true
}

// WithheldOrDesired is the desired-replicas annotation as a number, or -1 when withheld or
// absent.
func WithheldOrDesired(rs *appsv1.ReplicaSet) int {
	n, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return -1
	}
	return n
}
