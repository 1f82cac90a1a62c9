package k8s

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations and reasons written by the Deployment controller. They are the upstream values,
// so kubectl reads them as usual.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	ChangeCauseAnnotation     = "kubernetes.io/change-cause"

	RollbackRevisionNotFound  = "DeploymentRollbackRevisionNotFound"
	RollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	RollbackDone              = "DeploymentRollback"

	ReplicaSetUpdatedReason = "ReplicaSetUpdated"
	FailedRSCreateReason    = "ReplicaSetCreateError"
	NewReplicaSetReason     = "NewReplicaSetCreated"
	FoundNewRSReason        = "FoundNewReplicaSet"
	NewRSAvailableReason    = "NewReplicaSetAvailable"
	TimedOutReason          = "ProgressDeadlineExceeded"
	PausedDeployReason      = "DeploymentPaused"
	ResumedDeployReason     = "DeploymentResumed"
	// CanaryPausedReason and CanaryResumedReason are ours: a stepped rollout waits at a step
	// (a pause, an analysis), and goes on from it.
	CanaryPausedReason = "CanaryPaused"
	// FleetFreezeHeldText is in the message of a hold the fleet freeze makes ("Held before
	// step 3 of 4 (setWeight 60): fleet freeze until ..."): HeldByFleetFreeze tells it from
	// a step's own pause by it.
	FleetFreezeHeldText = "fleet freeze until"
	// ReleaseRestoredHashAnnotation is written with a release's rollback (RestoreTemplate):
	// the pod-template-hash of the template it restored. While the Deployment's template is
	// that one, its rollout is a rollback, and the fleet freeze does not hold it.
	ReleaseRestoredHashAnnotation = "temporal-rollout.io/release-restored-hash"
	CanaryResumedReason           = "CanaryResumed"
	MinimumReplicasAvailable      = "MinimumReplicasAvailable"
	MinimumReplicasUnavailable    = "MinimumReplicasUnavailable"

	// maxRevHistoryLengthInChars bounds the revision-history annotation.
	maxRevHistoryLengthInChars = 2000
)

// annotationsToSkip are Deployment annotations that are never copied to a ReplicaSet, and never
// copied back on rollback.
var annotationsToSkip = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
	appsv1.DeprecatedRollbackTo:        true,
	// Ours: the stable template is the Deployment's fact, not its template's.
	StableAnnotation: true,
}

// ResolveFenceposts turns maxSurge and maxUnavailable into replica counts for `desired`
// replicas. Surge rounds up and unavailable rounds down; if both come to 0, unavailable is 1 so
// the rollout can move.
//
// 10 replicas, maxSurge 25%, maxUnavailable 25%: surge ceil(2.5)=3, unavailable floor(2.5)=2.
// 1 replica, maxSurge 0, maxUnavailable 25%: surge 0, unavailable floor(0.25)=0, so 1.
func ResolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, intstr.FromInt32(0)), int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("resolve maxSurge: %w", err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, intstr.FromInt32(0)), int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("resolve maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// IsRollingUpdate reports whether the Deployment uses the RollingUpdate strategy.
func IsRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// MaxSurge is the number of pods allowed above the desired count (0 for Recreate).
func MaxSurge(d *appsv1.Deployment) int32 {
	if !IsRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	surge, _, _ := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicas(d))
	return surge
}

// MaxUnavailable is the number of pods allowed to be unavailable, never above the desired
// count (0 for Recreate or 0 replicas).
func MaxUnavailable(d *appsv1.Deployment) int32 {
	if !IsRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil || replicas(d) == 0 {
		return 0
	}
	_, unavailable, _ := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicas(d))
	return min(unavailable, replicas(d))
}

// HasProgressDeadline reports whether progressDeadlineSeconds is set and not "infinite".
func HasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// HasRevisionHistoryLimit reports whether revisionHistoryLimit is set and not "infinite".
func HasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// Revision parses the revision annotation of an object; no annotation is revision 0.
func Revision(annotations map[string]string) (int64, error) {
	v, ok := annotations[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// MaxRevision is the highest parseable revision among the ReplicaSets.
func MaxRevision(rss []*appsv1.ReplicaSet) int64 {
	var top int64
	for _, rs := range rss {
		if v, err := Revision(rs.Annotations); err == nil && v > top {
			top = v
		}
	}
	return top
}

// LastRevision is the second highest revision: the one before the current.
func LastRevision(rss []*appsv1.ReplicaSet) int64 {
	var top, second int64
	for _, rs := range rss {
		v, err := Revision(rs.Annotations)
		if err != nil {
			continue
		}
		if v >= top {
			second, top = top, v
		} else if v > second {
			second = v
		}
	}
	return second
}

// EqualIgnoreHash compares two pod templates, ignoring the pod-template-hash label.
//
// It gives upstream's answer (deep copies without the label, compared with
// equality.Semantic) without copying: the labels are compared apart, and the rest on shallow
// copies whose labels are cleared. Containers' names and images are compared first, since a
// rollout's old ReplicaSets mostly differ there: AwaitChange weighs every change of a rollout
// under way with Decide, which asks this of every ReplicaSet several times, and the copying
// rule took a quarter of the worker's CPU in the rolling-100x10 benchmark.
func EqualIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	if len(a.Spec.Containers) != len(b.Spec.Containers) {
		return false
	}
	for i := range a.Spec.Containers {
		if a.Spec.Containers[i].Name != b.Spec.Containers[i].Name || a.Spec.Containers[i].Image != b.Spec.Containers[i].Image {
			return false
		}
	}
	if !labelsEqualIgnoringHash(a.Labels, b.Labels) {
		return false
	}
	ac, bc := *a, *b
	ac.Labels, bc.Labels = nil, nil
	return equality.Semantic.DeepEqual(&ac, &bc)
}

// labelsEqualIgnoringHash compares two label maps without the pod-template-hash label (a nil
// map equals an empty one, as in equality.Semantic).
func labelsEqualIgnoringHash(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if k == appsv1.DefaultDeploymentUniqueLabelKey {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		n++
	}
	m := len(b)
	if _, ok := b[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		m--
	}
	return n == m
}

// sortByCreation orders ReplicaSets oldest first, by name on ties.
func sortByCreation(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return olderThan(rss[i], rss[j]) })
}

func olderThan(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// sortByRevision orders ReplicaSets by revision, falling back to creation order.
func sortByRevision(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		ri, erri := Revision(rss[i].Annotations)
		rj, errj := Revision(rss[j].Annotations)
		if erri != nil || errj != nil || ri == rj {
			return olderThan(rss[i], rss[j])
		}
		return ri < rj
	})
}

// FindNewReplicaSet returns the oldest ReplicaSet whose template equals the Deployment's.
func FindNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	sortByCreation(sorted)
	for _, rs := range sorted {
		if EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// FindOldReplicaSets returns every ReplicaSet except the new one.
func FindOldReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	return without(rss, FindNewReplicaSet(d, rss))
}

// without returns rss except newRS (nil: all of them).
func without(rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS != nil && rs.UID == newRS.UID && rs.Name == newRS.Name {
			continue
		}
		old = append(old, rs)
	}
	return old
}

func filterActive(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && rsReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func withNew(old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	all := append([]*appsv1.ReplicaSet(nil), old...)
	if newRS != nil {
		all = append(all, newRS)
	}
	return all
}

func sumSpec(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += rsReplicas(rs)
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(&rs.Status)
		}
	}
	return n
}

func sumAvailable(rss []*appsv1.ReplicaSet) int32 {
	return sumStatus(rss, func(s *appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas })
}

func sumActual(rss []*appsv1.ReplicaSet) int32 {
	return sumStatus(rss, func(s *appsv1.ReplicaSetStatus) int32 { return s.Replicas })
}

func sumReady(rss []*appsv1.ReplicaSet) int32 {
	return sumStatus(rss, func(s *appsv1.ReplicaSetStatus) int32 { return s.ReadyReplicas })
}

// sumTerminating is nil when a ReplicaSet that has been observed does not report
// terminatingReplicas, as upstream.
func sumTerminating(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.ObservedGeneration == 0 && rs.Status.TerminatingReplicas == nil:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

// NewRSNewReplicas is the size the new ReplicaSet may grow to now.
//
// RollingUpdate: bounded by replicas+maxSurge over all ReplicaSets and by replicas. 10 replicas,
// maxSurge 3, old RS at 10 and new at 0: 13-10 = 3, so the new RS goes to 3.
// Recreate: straight to replicas.
func NewRSNewReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		current := sumSpec(all)
		maxTotal := replicas(d) + MaxSurge(d)
		if current >= maxTotal {
			return rsReplicas(newRS), nil
		}
		up := min(maxTotal-current, replicas(d)-rsReplicas(newRS))
		return rsReplicas(newRS) + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return replicas(d), nil
	default:
		return 0, fmt.Errorf("deployment strategy %q is not supported", d.Spec.Strategy.Type)
	}
}

// IsSaturated reports whether the ReplicaSet runs exactly the Deployment's replicas, all
// available, with a matching desired-replicas annotation.
func IsSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	return rsReplicas(rs) == replicas(d) && int32(desired) == replicas(d) && rs.Status.AvailableReplicas == replicas(d)
}

// DeploymentComplete reports whether every replica is updated and available and the status
// describes the current generation; `kubectl rollout status` uses the same rule.
func DeploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	n := replicas(d)
	return st.UpdatedReplicas == n && st.Replicas == n && st.AvailableReplicas == n && st.ObservedGeneration >= d.Generation
}

// DeploymentProgressing reports whether the new status shows progress over the old one: more
// updated, ready or available replicas, or fewer old replicas.
func DeploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// copyAnnotationsToReplicaSet copies Deployment annotations (minus the skip list) onto the RS.
func copyAnnotationsToReplicaSet(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if cur, ok := rs.Annotations[k]; annotationsToSkip[k] || (ok && cur == v) {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setReplicasAnnotations writes desired-replicas and max-replicas.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	if s := strconv.Itoa(int(desired)); rs.Annotations[DesiredReplicasAnnotation] != s {
		rs.Annotations[DesiredReplicasAnnotation] = s
		changed = true
	}
	if s := strconv.Itoa(int(maxReplicas)); rs.Annotations[MaxReplicasAnnotation] != s {
		rs.Annotations[MaxReplicasAnnotation] = s
		changed = true
	}
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// setNewReplicaSetAnnotations copies the Deployment's annotations, raises the revision to
// newRevision (recording the old one in revision-history when an old RS is reused), and for a
// new RS sets the replicas annotations. It reports whether anything changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := copyAnnotationsToReplicaSet(d, rs)
	oldRevision, had := rs.Annotations[RevisionAnnotation]
	oldRev, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false
		}
		oldRev = 0
	}
	if oldRev < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
	}
	if had && oldRev < newRevision {
		history := rs.Annotations[RevisionHistoryAnnotation]
		olds := strings.Split(history, ",")
		if olds[0] == "" {
			rs.Annotations[RevisionHistoryAnnotation] = oldRevision
		} else {
			total := len(history) + len(oldRevision) + 1
			start := 0
			for total > maxRevHistoryLengthInChars && start < len(olds) {
				total -= len(olds[start]) + 1
				start++
			}
			if total <= maxRevHistoryLengthInChars {
				rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(olds[start:], oldRevision), ",")
			}
		}
	}
	if !exists && setReplicasAnnotations(rs, replicas(d), replicas(d)+MaxSurge(d)) {
		changed = true
	}
	return changed
}

// setDeploymentRevision sets the revision annotation on the Deployment.
func setDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}

// annotationInt32 parses a non-negative int32 annotation.
func annotationInt32(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// HeldByFleetFreeze: the stepped rollout waits at a step because the fleet is frozen (the
// Progressing condition CanaryPaused with FleetFreezeHeldText), and the hold's message.
func HeldByFleetFreeze(st appsv1.DeploymentStatus) (string, bool) {
	c := GetCondition(st, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != CanaryPausedReason || !strings.Contains(c.Message, FleetFreezeHeldText) {
		return "", false
	}
	return c.Message, true
}
