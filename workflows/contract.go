// Package workflows holds the Deployment workflow: deterministic code that observes through
// activities, decides with the pure engine in package k8s, and acts through activities.
//
// What other processes and users rely on (task queues, workflow IDs, the input, status and
// payloads, signal, update and query names, search attributes) is package contract; the
// aliases below keep this package's code reading as before.
package workflows

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Input is the workflow's input: the contract's (what a user or the watcher starts it with) and
// the state a run hands to the next. Its JSON is contract.Input's with "carry" after it.
type Input struct {
	contract.Input
	// Carry is state handed over by Continue-As-New. Users leave it out.
	Carry *Carry `json:"carry,omitempty"`
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

// The contract's names, as this package's code uses them.
const (
	WorkflowType     = contract.WorkflowType
	DefaultTaskQueue = contract.DefaultTaskQueue
	SignalTrigger    = contract.SignalTrigger
	SignalPause      = contract.SignalPause
	SignalResume     = contract.SignalResume
	SignalRollback   = contract.SignalRollback
	QueryStatus      = contract.QueryStatus
	UpdatePromote    = contract.UpdatePromote
	UpdateAbort      = contract.UpdateAbort

	SearchAttrNamespace  = contract.SearchAttrNamespace
	SearchAttrDeployment = contract.SearchAttrDeployment
	SearchAttrRevision   = contract.SearchAttrRevision
	SearchAttrOutcome    = contract.SearchAttrOutcome
	SearchAttrWaitingFor = contract.SearchAttrWaitingFor
	SearchAttrCluster    = contract.SearchAttrCluster

	OutcomeDeleted  = contract.OutcomeDeleted
	OutcomeAborted  = contract.OutcomeAborted
	OutcomeReleased = contract.OutcomeReleased

	WaitingForWeight      = contract.WaitingForWeight
	WaitingForTimer       = contract.WaitingForTimer
	WaitingForPromote     = contract.WaitingForPromote
	WaitingForAnalysis    = contract.WaitingForAnalysis
	WaitingForTrafficGate = contract.WaitingForTrafficGate
	WaitingForReplicaSet  = contract.WaitingForReplicaSet
	WaitingForFreeze      = contract.WaitingForFreeze

	BlueGreenPreview               = contract.BlueGreenPreview
	BlueGreenPrePromotionAnalysis  = contract.BlueGreenPrePromotionAnalysis
	BlueGreenPaused                = contract.BlueGreenPaused
	BlueGreenPromoting             = contract.BlueGreenPromoting
	BlueGreenPostPromotionAnalysis = contract.BlueGreenPostPromotionAnalysis
	BlueGreenScaleDownDelay        = contract.BlueGreenScaleDownDelay
	BlueGreenScalingDown           = contract.BlueGreenScalingDown
)

// The contract's payloads, as this package's code uses them.
type (
	Trigger           = contract.Trigger
	RollbackRequest   = contract.RollbackRequest
	PromoteRequest    = contract.PromoteRequest
	AbortRequest      = contract.AbortRequest
	Result            = contract.Result
	Status            = contract.Status
	ReplicaSetStatus  = contract.ReplicaSetStatus
	StepsStatus       = contract.StepsStatus
	TrafficStatus     = contract.TrafficStatus
	BlueGreenStatus   = contract.BlueGreenStatus
	BlueGreenServices = contract.BlueGreenServices
	FreezeHold        = contract.FreezeHold
	analysisState     = contract.AnalysisStatus
)
