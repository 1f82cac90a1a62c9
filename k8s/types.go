package k8s

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// TemplateHash, when set, is the pod-template-hash of the Deployment's template at its
	// collisionCount, computed before the templates' pod specs were redacted for the history
	// (see activities.Observe): Decide then names a new ReplicaSet by it instead of hashing the
	// redacted template. Templates compare equal redacted as they do whole.
	TemplateHash string `json:"templateHash,omitempty"`
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
	// Canary caps the new ReplicaSet during a stepped rollout (see Canary). Nil: upstream's
	// rollout to 100%.
	Canary *Canary `json:"canary,omitempty"`
	// Managed: the worker runs in managed mode, beside kube-controller-manager's own
	// Deployment controller. Only Deployments annotated temporal-rollout.io/managed: "true"
	// are driven, parked so the built-in controller stays quiet (see DecideManaged).
	Managed bool `json:"managed,omitempty"`
	// ManagedProgress (managed mode) is the Progressing condition of the rollout as its user's
	// strategy runs it, from the last sync's Plan.ManagedProgress: while parked, the stored
	// condition is the paused sync's DeploymentPaused, so the workflow keeps the progress
	// deadline's clock.
	ManagedProgress *appsv1.DeploymentCondition `json:"managedProgress,omitempty"`
	// ManagedGuard (managed mode, --managed-guard): deploy/managed/guard.yaml's ReplicaSet
	// policy is installed, denying the built-in Deployment controller any scale of a parked
	// Deployment's ReplicaSets, so Recreate and maxSurge 0 can be driven too (see CanPark).
	ManagedGuard bool `json:"managedGuard,omitempty"`
}

// Canary is the step a stepped rollout is at, as the workflow decided it.
//
// The new ReplicaSet goes up to its share and the old ones down to theirs (StepShares:
// ceil(Weight% × replicas) and the rest, one pod each at a weight of 1–99), within maxSurge and
// maxUnavailable. A step never moves replicas back: a new ReplicaSet already above its share
// keeps its replicas; old ones below theirs (scaled by hand) are filled up on the newest one,
// never by growing the new one. 10 replicas, maxSurge 25%, maxUnavailable 25%, Weight 30: the
// new ReplicaSet goes to 3 and the old one to 7.
type Canary struct {
	// Hash is the pod-template-hash the step belongs to. A snapshot whose template hashes
	// otherwise is not capped: Decide returns a plan with CanaryStale and no steps, and the
	// workflow decides again on the new template.
	Hash string `json:"hash"`
	// Weight is the new ReplicaSet's share of replicas, 0–100.
	Weight int32 `json:"weight"`
	// Scale (setCanaryScale) sizes the new ReplicaSet apart from Weight; the old ones keep
	// their share at Weight. Nil: the new ReplicaSet follows Weight.
	Scale *CanaryScale `json:"scale,omitempty"`
	// Hold: the rollout waits at this step (a pause, an analysis, an invalid steps
	// annotation). The progress deadline does not run, and the Progressing condition says
	// why (reason CanaryPaused, Message), as upstream's does for a paused Deployment; when the
	// hold ends it turns to CanaryResumed and the deadline counts from then.
	Hold    bool   `json:"hold,omitempty"`
	Message string `json:"message,omitempty"`
	// Freeze: make no rollout move at all (no new ReplicaSet, no scaling), as for an invalid
	// steps annotation: the Deployment is left as it is.
	Freeze bool `json:"freeze,omitempty"`
	// BlueGreen: a blue-green rollout (see rolloutBlueGreen): the new ReplicaSet goes at once
	// to BlueGreenReplicas (0: replicas), beside the old ones, which keep their replicas.
	// Weight and Scale do not apply.
	BlueGreen         bool  `json:"blueGreen,omitempty"`
	BlueGreenReplicas int32 `json:"blueGreenReplicas,omitempty"`
	// StableHash (blue-green) is the stable template's pod-template-hash: on a change of
	// replicas its ReplicaSet goes to replicas and the new one to its size (scaleBlueGreen);
	// an earlier preview goes to 0 once the new ReplicaSet serves fully (rolloutBlueGreen).
	// Empty (a run recorded before the blue-green-scale change): upstream's proportional
	// scaling, and every old ReplicaSet keeps its replicas, as before.
	StableHash string `json:"stableHash,omitempty"`
}

// StepKind names a write; each maps to one activity, and the names read well in the
// Temporal UI.
type StepKind string

// The kinds of step, in the words the Temporal history shows.
const (
	StepEvent        StepKind = "RecordEvent"
	StepClaim        StepKind = "ClaimReplicaSets"
	StepCreate       StepKind = "CreateReplicaSet"
	StepScaleUp      StepKind = "ScaleUpReplicaSet"
	StepScaleDown    StepKind = "ScaleDownReplicaSet"
	StepUpdateRS     StepKind = "UpdateReplicaSet"
	StepCleanup      StepKind = "CleanupReplicaSets"
	StepRollback     StepKind = "RollbackDeployment"
	StepUpdateStatus StepKind = "UpdateDeploymentStatus"
	// StepPark and StepRelease (managed mode) park a Deployment for our workflow and hand it
	// back to kube-controller-manager; their activities read the Deployment live.
	StepPark               StepKind = "ParkDeployment"
	StepRelease            StepKind = "ReleaseDeployment"
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
	// PhaseReleased (managed mode): the Deployment is not ours to drive (it did not opt in,
	// opted out, or cannot be parked, which Message says); kube-controller-manager drives it.
	PhaseReleased Phase = "Released"
)

// Converged reports whether nothing more happens without a new change: the sync that ends here
// closes one rollout.
func (p Phase) Converged() bool {
	switch p {
	case PhaseComplete, PhasePaused, PhaseDeadlineExceeded, PhaseInvalid, PhaseReleased:
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
	// CanaryReached: with Request.Canary, the new ReplicaSet is at its step's share, all of it
	// available, and the old ones are at the rest.
	CanaryReached bool `json:"canaryReached,omitempty"`
	// CanaryStale: Request.Canary was for another template; nothing was decided.
	CanaryStale bool `json:"canaryStale,omitempty"`
	// ManagedProgress (managed mode): the rollout's Progressing condition after this sync, for
	// the next Request.ManagedProgress.
	ManagedProgress *appsv1.DeploymentCondition `json:"managedProgress,omitempty"`
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
