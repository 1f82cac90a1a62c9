// Package workflows holds the Deployment workflow: deterministic code that observes through
// activities, decides with the pure engine in package k8s, and acts through activities.
//
// This file is the user-facing contract: task queue, workflow ID scheme, signal and query
// names, and payload types. The README's Temporal CLI cookbook refers to it.
package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

const (
	// DefaultTaskQueue is the task queue the worker polls unless configured otherwise.
	DefaultTaskQueue = "deployment-controller"
	// WorkflowType is the registered name of the Deployment workflow.
	WorkflowType = "DeploymentWorkflow"

	// SignalTrigger asks for a sync. Any payload is ignored; a burst costs one sync.
	SignalTrigger = "trigger"
	// SignalPause sets spec.paused=true on the Deployment. No payload.
	SignalPause = "pause"
	// SignalResume sets spec.paused=false on the Deployment. No payload.
	SignalResume = "resume"
	// SignalRollback rolls back to a revision: {"revision": N}, 0 for the previous one.
	SignalRollback = "rollback"
	// QueryStatus returns a Status.
	QueryStatus = "status"
	// UpdatePromote (a Workflow Update) moves a stepped rollout past the step it waits at:
	// {} to the next step, {"full":true} past every remaining step. It is rejected when nothing
	// waits (no stepped rollout, or a setWeight step still scaling). A blue-green rollout it
	// promotes, or moves past its analysis (docs/blue-green.md). Returns the Status as
	// soon as the promote is applied and recorded (the step it moved to); the sync that
	// carries it out follows at once.
	UpdatePromote = "promote"
	// UpdateAbort (a Workflow Update) aborts the rollout under way: {"reason":"..."}. The
	// Deployment returns to the last revision that completed at full speed, skipping all
	// steps; the run ends with RolloutOutcome "Aborted". Rejected when nothing is rolling out.
	// Returns the Status as soon as the abort is applied and recorded (abortReason set); the
	// rollback follows at once.
	UpdateAbort = "abort"

	// Search attributes the watcher sets and the workflow upserts; SearchAttributes lists
	// them with their types.
	SearchAttrNamespace  = "K8sNamespace"
	SearchAttrDeployment = "K8sDeployment"
	SearchAttrRevision   = "K8sRevision"
	SearchAttrOutcome    = "RolloutOutcome"
	// SearchAttrWaitingFor (Keyword) is what a stepped or blue-green rollout waits for:
	// Promote, Timer, Analysis, Weight, ReplicaSet, Freeze (the fleet freeze), or empty. `temporal workflow list --query 'RolloutWaitingFor="Promote"'`
	// lists every Deployment waiting for promotion.
	SearchAttrWaitingFor = "RolloutWaitingFor"
	// SearchAttrRelease (Keyword) is set by the release workflow (package release) on its own
	// run: `temporal workflow list --query 'ReleaseName="web-1-27"'`.
	SearchAttrRelease = "ReleaseName"
)

// SearchAttribute is one custom search attribute: its name and its type (String() spells it
// as the Temporal CLI's --type does: Keyword, Int).
type SearchAttribute struct {
	Name string
	Type enumspb.IndexedValueType
}

// SearchAttributes is every search attribute --search-attributes needs registered on the
// namespace: the one list that the local stacks register, the worker checks at start-up, and
// docker-compose.yml, deploy/ and the README name (internal/packaging checks them).
//
//	temporal operator search-attribute create --namespace default --name K8sRevision --type Int
func SearchAttributes() []SearchAttribute {
	return []SearchAttribute{
		{SearchAttrNamespace, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		{SearchAttrDeployment, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		{SearchAttrRevision, enumspb.INDEXED_VALUE_TYPE_INT},
		{SearchAttrOutcome, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		{SearchAttrWaitingFor, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		{SearchAttrCluster, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		{SearchAttrRelease, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	}
}

// WorkflowID is "deployment/<namespace>/<name>": one open execution per Deployment.
func WorkflowID(namespace, name string) string {
	return "deployment/" + namespace + "/" + name
}

// ParseWorkflowID splits a workflow ID made by WorkflowID or WorkflowIDIn (see
// ParseWorkflowIDIn for its cluster).
func ParseWorkflowID(id string) (namespace, name string, ok bool) {
	_, namespace, name, ok = ParseWorkflowIDIn(id)
	return namespace, name, ok
}

// Input starts the workflow. From the Temporal CLI:
//
//	temporal workflow start --task-queue deployment-controller --type DeploymentWorkflow \
//	  --workflow-id deployment/default/web --input '{"namespace":"default","name":"web"}'
type Input struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Cluster is the Kubernetes cluster of the worker that runs it (--cluster; see
	// TaskQueueFor), empty for a single cluster. Continue-As-New and the status keep it.
	Cluster string `json:"cluster,omitempty"`
	// Image optionally sets container images ({"<container>": "<image>"}) before the sync,
	// recorded as the change-cause.
	Image map[string]string `json:"image,omitempty"`
	// Carry is state handed over by Continue-As-New. Users leave it out.
	Carry *Carry `json:"carry,omitempty"`
	// Trigger is the watcher's first trigger when it starts the workflow itself (an eager
	// start, see watcher.Options.EagerStart) instead of by signal-with-start: the versions the
	// first sync must see. Users leave it out.
	Trigger *Trigger `json:"trigger,omitempty"`
}

// Carry is what one run hands to the next.
type Carry struct {
	// Idle: the previous run converged, so wait for a change before syncing.
	Idle bool `json:"idle,omitempty"`
	// Dirty: a sync is owed.
	Dirty      bool   `json:"dirty,omitempty"`
	RollbackTo *int64 `json:"rollbackTo,omitempty"`
	Pause      *bool  `json:"pause,omitempty"`
	Runs       int    `json:"runs,omitempty"`
	// UID is the Deployment's UID as the previous run last saw it, so the events a run
	// records before its first sync (a step timer that fires, a promote) name the object.
	UID types.UID `json:"uid,omitempty"`
	// LocalWait is the worker's --local-wait as the previous run last saw it.
	LocalWait time.Duration `json:"localWait,omitempty"`
	// Status is the last known status, so the query answers before the first sync.
	Status *Status `json:"status,omitempty"`
	// AtLeast and LiveNext carry read-your-writes over: the versions the next sync must see,
	// and whether it must read live (after a stale decision).
	AtLeast  []k8s.ObjectVersion `json:"atLeast,omitempty"`
	LiveNext bool                `json:"liveNext,omitempty"`
	// A stepped rollout in progress: its state and steps, the stable template,
	// an abort under way, and the invalid annotation already warned about.
	Steps      *stepsState       `json:"steps,omitempty"`
	StepList   []k8s.RolloutStep `json:"stepList,omitempty"`
	StableHash string            `json:"stableHash,omitempty"`
	Abort      *abortState       `json:"abort,omitempty"`
	Warned     string            `json:"warned,omitempty"`
	// Managed: the worker ran in managed mode.
	Managed bool `json:"managed,omitempty"`
	// ManagedProgress: the rollout's Progressing condition in managed mode.
	ManagedProgress *appsv1.DeploymentCondition `json:"managedProgress,omitempty"`
	ManagedGuard    bool                        `json:"managedGuard,omitempty"`
	// Traffic: the route as the previous run's last traffic move left it.
	Traffic *TrafficStatus `json:"traffic,omitempty"`
	// BlueGreen: a blue-green rollout in progress, and what its Services selected.
	BlueGreen         *blueGreenState    `json:"blueGreen,omitempty"`
	BlueGreenServices *BlueGreenServices `json:"blueGreenServices,omitempty"`
	// Notify is the notify annotation as the previous run last read it, UIURL the worker's
	// --ui-url, and Notifications those not yet delivered, which this run sends.
	Notify        *k8s.NotifyConfig        `json:"notify,omitempty"`
	UIURL         string                   `json:"uiURL,omitempty"`
	Notifications []activities.NotifyInput `json:"notifications,omitempty"`
}

// Validate checks the namespace and name.
func (in Input) Validate() error {
	if err := ValidateCluster(in.Cluster); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
		return fmt.Errorf("invalid namespace %q: %s", in.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(in.Name); len(errs) > 0 {
		return fmt.Errorf("invalid deployment name %q: %s", in.Name, strings.Join(errs, "; "))
	}
	containers := make([]string, 0, len(in.Image))
	// Only collects the keys, sorted below.
	//workflowcheck:ignore
	for c := range in.Image {
		containers = append(containers, c)
	}
	sort.Strings(containers)
	for _, c := range containers {
		if img := in.Image[c]; c == "" || strings.TrimSpace(img) == "" {
			return fmt.Errorf("invalid image entry %q: %q: container and image must be non-empty", c, img)
		}
	}
	return nil
}

// Trigger is the trigger signal's optional payload: the versions the watcher saw, so the sync
// it causes does not decide on an older cache. Any other payload is ignored.
type Trigger struct {
	Versions []k8s.ObjectVersion `json:"versions,omitempty"`
}

// RollbackRequest is the rollback signal's payload.
type RollbackRequest struct {
	Revision *int64 `json:"revision"`
}

// Result is how a run ends when it does not continue as new.
type Result struct {
	Outcome  string `json:"outcome"`
	Revision int64  `json:"revision,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Outcomes a Result can carry.
const (
	OutcomeDeleted = "Deleted"
	// OutcomeAborted: the rollout was aborted (by abort, a failed analysis, or a progress
	// deadline with auto-rollback) and the Deployment is back at its stable revision.
	OutcomeAborted = "Aborted"
	// OutcomeReleased (managed mode): the Deployment is kube-controller-manager's again: it
	// opted out (and was handed back), never opted in, or its strategy cannot be driven beside
	// the built-in controller (Message says why, as does a ManagedStrategyUnsupported event).
	OutcomeReleased = "Released"
)

// Status is the answer to the status query.
type Status struct {
	Namespace       string                       `json:"namespace"`
	Name            string                       `json:"name"`
	Cluster         string                       `json:"cluster,omitempty"`
	Phase           string                       `json:"phase"`
	Paused          bool                         `json:"paused"`
	CurrentRevision int64                        `json:"currentRevision"`
	TargetRevision  int64                        `json:"targetRevision"`
	NewReplicaSet   string                       `json:"newReplicaSet,omitempty"`
	Replicas        int32                        `json:"replicas"`
	ReplicaSets     []ReplicaSetStatus           `json:"replicaSets,omitempty"`
	Conditions      []appsv1.DeploymentCondition `json:"conditions,omitempty"`
	PendingRollback *int64                       `json:"pendingRollback,omitempty"`
	Syncs           int                          `json:"syncs"`
	// WaitMoves counts the scale moves of a plain rollout that its wait (AwaitChange) made
	// itself in this run, between the syncs (each listed in that activity's result).
	WaitMoves int    `json:"waitMoves,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// IgnoredSignal explains the last signal that was dropped as malformed.
	IgnoredSignal string `json:"ignoredSignal,omitempty"`
	Message       string `json:"message,omitempty"`
	// Steps is the stepped rollout in progress: the current step, what it waits for (timer
	// end, promote, analysis and its last measurement).
	Steps *StepsStatus `json:"steps,omitempty"`
	// AbortReason says why the last rollout was aborted.
	AbortReason string `json:"abortReason,omitempty"`
	// AbortScaleDownAt: after a blue-green abort, the aborted ReplicaSet keeps its pods until
	// then (abortScaleDownDelaySeconds).
	AbortScaleDownAt *time.Time `json:"abortScaleDownAt,omitempty"`
	// AnnotationError names an invalid rollout annotation that holds the rollout.
	AnnotationError string `json:"annotationError,omitempty"`
	// Traffic: with the temporal-rollout.io/traffic annotation, the route's weights, header
	// routes and the invariant's check at the last traffic move (docs/traffic.md).
	Traffic *TrafficStatus `json:"traffic,omitempty"`
	// BlueGreen: with the temporal-rollout.io/blue-green annotation, the rollout's phase and
	// what the active and preview Services select (docs/blue-green.md).
	BlueGreen *BlueGreenStatus `json:"blueGreen,omitempty"`
}

// ReplicaSetStatus is one ReplicaSet's counts.
type ReplicaSetStatus struct {
	Name      string `json:"name"`
	Hash      string `json:"hash,omitempty"`
	Revision  int64  `json:"revision"`
	Replicas  int32  `json:"replicas"`
	Ready     int32  `json:"ready"`
	Available int32  `json:"available"`
}

// TrafficStatus is the traffic routing's part of the status query (and of StepsStatus): the
// HTTPRoute rule's weights, the pods each Service selects, the header routes, and the check of
// the invariant (no canary share of traffic above its share of available pods) at the last
// move: "holds", or what broke it.
type TrafficStatus struct {
	Route        string            `json:"route"`
	StableWeight int32             `json:"stableWeight"`
	CanaryWeight int32             `json:"canaryWeight"`
	Stable       k8s.Backend       `json:"stable"`
	Canary       k8s.Backend       `json:"canary"`
	HeaderRoutes []k8s.HeaderRoute `json:"headerRoutes,omitempty"`
	Check        string            `json:"check"`
	// Hold: why the traffic gate did not move the route as the rollout asked (k8s.GateTraffic);
	// the rollout waits for TrafficGate until the pods allow it.
	Hold string `json:"hold,omitempty"`
}
