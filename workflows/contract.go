// Package workflows holds the Deployment workflow: deterministic code that observes through
// activities, decides with the pure engine in package k8s, and acts through activities.
//
// What other processes and users rely on (task queues, workflow IDs, the input, status and
// payloads, signal, update and query names, search attributes) is package contract; the
// aliases below keep this package's code reading as before.
package workflows

import (
	"github.com/temporal-rollout/rollout/contract"
)

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
