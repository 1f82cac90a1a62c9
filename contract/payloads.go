package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/temporal-rollout/rollout/k8s"
)

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
	// Trigger is the watcher's first trigger when it starts the workflow itself (an eager
	// start, see watcher.Options.EagerStart) instead of by signal-with-start: the versions the
	// first sync must see. Users leave it out.
	Trigger *Trigger `json:"trigger,omitempty"`
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
	// Holds lists why the rollout waits, first what must end first: an abort under way, an
	// invalid annotation, a user's pause, the traffic gate, the step's or blue-green phase's
	// wait. Empty: nothing holds it.
	Holds []Hold `json:"holds,omitempty"`
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

// PromoteRequest is the promote update's payload: {} goes to the next step, {"full":true}
// skips the remaining ones.
type PromoteRequest struct {
	Full bool `json:"full,omitempty"`
}

// AbortRequest is the abort update's payload.
type AbortRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StepsStatus is a stepped rollout's part of the status query.
type StepsStatus struct {
	// Step is 1-based, of Steps; Step > Steps once every step passed.
	Step       int             `json:"step"`
	Steps      int             `json:"steps"`
	Current    string          `json:"current,omitempty"`
	Weight     int32           `json:"weight"`
	WaitingFor string          `json:"waitingFor,omitempty"`
	Message    string          `json:"message,omitempty"`
	PauseUntil *time.Time      `json:"pauseUntil,omitempty"`
	Full       bool            `json:"full,omitempty"`
	Analysis   *AnalysisStatus `json:"analysis,omitempty"`
	LastValue  *Measurement    `json:"lastMeasurement,omitempty"`
	// Freeze: the fleet freeze the rollout holds for (WaitingFor Freeze).
	Freeze *FreezeHold `json:"freeze,omitempty"`
	// Traffic: the route's weights and header routes (traffic.go).
	Traffic *TrafficStatus `json:"traffic,omitempty"`
}

// AnalysisStatus is one analysis step's progress (StepsStatus.Analysis, BlueGreenStatus.Analysis).
type AnalysisStatus struct {
	Step int `json:"step"`
	// Provider measures: prometheus, web or job; Job is the analysis Job's name.
	Provider     string        `json:"provider,omitempty"`
	Job          string        `json:"job,omitempty"`
	Taken        int           `json:"taken"`
	Failures     int           `json:"failures"`
	Measurements []Measurement `json:"measurements,omitempty"`
	Verdict      string        `json:"verdict,omitempty"`
	Message      string        `json:"message,omitempty"`
}

// Measurement is one measurement and its verdict, as the history records it.
type Measurement struct {
	// Provider is web or job for those providers; empty for Prometheus.
	Provider string `json:"provider,omitempty"`
	// Job is the analysis Job's name (job provider).
	Job     string    `json:"job,omitempty"`
	Value   *float64  `json:"value,omitempty"`
	Verdict string    `json:"verdict"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// What a stepped rollout waits for (the status query's waitingFor and the RolloutWaitingFor
// search attribute).
const (
	WaitingForWeight   = "Weight"
	WaitingForTimer    = "Timer"
	WaitingForPromote  = "Promote"
	WaitingForAnalysis = "Analysis"
	// WaitingForTrafficGate: the traffic gate held a route or Service move the rollout asked
	// for (k8s.GateTraffic, k8s.GateSelector); it is made once the pods allow it.
	WaitingForTrafficGate = "TrafficGate"
)

// WaitingForReplicaSet: a blue-green rollout waits for the new ReplicaSet's pods.
const WaitingForReplicaSet = "ReplicaSet"

// WaitingForFreeze: a stepped rollout holds before its next step for the fleet freeze.
const WaitingForFreeze = "Freeze"

// Kinds of Hold beyond the WaitingFor values (which RolloutWaitingFor carries): these are in
// the status and the run's details, not in the search attribute.
const (
	// HoldAbort: an abort returns the Deployment to its stable template.
	HoldAbort = "Abort"
	// HoldInvalidAnnotation: an invalid rollout annotation holds the rollout until fixed.
	HoldInvalidAnnotation = "InvalidAnnotation"
	// HoldPaused: spec.paused (kubectl rollout pause, the pause signal).
	HoldPaused = "Paused"
)

// Hold is one reason a rollout waits: its kind (a WaitingFor value or a Hold* kind), what it
// says, when it ends by itself (nil: it does not), and what a user can do about it.
type Hold struct {
	Kind    string     `json:"kind"`
	Message string     `json:"message"`
	Until   *time.Time `json:"until,omitempty"`
	// Do is the command that ends or overrides the hold ("kubectl rollout resume ...",
	// "temporal workflow update execute ... --name promote"), empty when none does.
	Do string `json:"do,omitempty"`
}

// Blue-green phases (the status query's blueGreen.phase).
const (
	BlueGreenPreview               = "Preview"
	BlueGreenPrePromotionAnalysis  = "PrePromotionAnalysis"
	BlueGreenPaused                = "Paused"
	BlueGreenPromoting             = "Promoting"
	BlueGreenPostPromotionAnalysis = "PostPromotionAnalysis"
	BlueGreenScaleDownDelay        = "ScaleDownDelay"
	BlueGreenScalingDown           = "ScalingDown"
)

// BlueGreenServices is what the blue-green Services select at the last sync.
type BlueGreenServices struct {
	Active         string `json:"activeService"`
	ActiveSelects  string `json:"activeSelects,omitempty"`
	Preview        string `json:"previewService,omitempty"`
	PreviewSelects string `json:"previewSelects,omitempty"`
	// Hold: why the traffic gate left a Service where it was (k8s.GateSelector).
	Hold string `json:"hold,omitempty"`
}

// BlueGreenStatus is a blue-green Deployment's part of the status query: the phase of the
// rollout in progress ("" at rest) and what its Services select.
type BlueGreenStatus struct {
	Phase      string          `json:"phase,omitempty"`
	Hash       string          `json:"hash,omitempty"`
	StableHash string          `json:"stableHash,omitempty"`
	WaitingFor string          `json:"waitingFor,omitempty"`
	Message    string          `json:"message,omitempty"`
	Promoted   bool            `json:"promoted,omitempty"`
	Until      *time.Time      `json:"until,omitempty"`
	Analysis   *AnalysisStatus `json:"analysis,omitempty"`
	// Freeze: the fleet freeze the automatic promotion holds for (WaitingFor Freeze).
	Freeze *FreezeHold `json:"freeze,omitempty"`
	BlueGreenServices
}

// FreezeHold is the fleet freeze a stepped rollout holds for.
type FreezeHold struct {
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
}

// ParseUpdate decodes an update's payload strictly, as the Deployment and release workflows
// both take theirs: unknown fields and trailing data are errors; no payload (or null) leaves v
// as it is, the zero value.
func ParseUpdate(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("payload %s: %w", string(raw), err)
	}
	if dec.More() {
		return fmt.Errorf("payload %s has data after the object", string(raw))
	}
	return nil
}
