package release

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/temporal-rollout/rollout/contract"
)

// The release's user-facing contract: task queue, workflow IDs, update and query names,
// payloads, and the status the query returns. docs/releases.md refers to it.
const (
	// TaskQueue is where release and freeze workflows run: a worker started with --releases
	// polls it.
	TaskQueue = contract.ReleasesTaskQueue
	// WorkflowType is the registered name of the release workflow.
	WorkflowType = "ReleaseWorkflow"

	// QueryStatus returns a Status.
	QueryStatus = "status"
	// UpdateApprove approves the wave waiting for approval: {"approver":"alice"} or
	// {"approver":"alice","wave":"canary"} (a wave's name or its 1-based number, checked
	// against the waiting one), with "signature" (an armored SSH signature of
	// ApprovalMessage) when the wave's approval has signers. A wave needs approval.approvers
	// distinct approvers, distinct by NormalizeApprover. Rejected, with the reason, when no
	// wave waits for approval, the approver's name is refused (CheckApprover: an invisible
	// character, mixed scripts), the approver already approved it, is the release's author, is
	// not in approval.from, or the signature is missing, forged or for another approval.
	UpdateApprove = "approve"
	// UpdatePause holds the release before its next Deployment and its next wave
	// ({"reason":"..."} optional); rollouts under way finish. Rejected when already paused.
	UpdatePause = "pause"
	// UpdateResume ends a pause (and an inconclusive analysis' hold). Rejected when not
	// paused.
	UpdateResume = "resume"
	// UpdateAbort fails the release: {"reason":"..."} (required). Rollouts under way stop
	// being waited for and, with onFailure rollback, every changed target is rolled back.
	UpdateAbort = "abort"
	// UpdateSkipBake ends the current bake at once. Rejected when no wave is baking.
	UpdateSkipBake = "skipBake"

	// AnnotationRelease, on each Deployment the release changed, names the release.
	AnnotationRelease = "temporal-rollout.io/release"
	// AnnotationRolledBack, on each Deployment a release rolled back, says which and why.
	AnnotationRolledBack = "temporal-rollout.io/release-rolled-back"

	// ErrInvalid is the failure type of a release whose spec does not validate.
	ErrInvalid = "InvalidRelease"
)

// SearchAttributes are the search attributes the release workflow upserts (ReleaseName,
// Keyword). Without them registered on the namespace, its first workflow task fails for ever,
// so `worker --releases` checks them at start-up and exits naming the command that creates
// them:
//
//	temporal operator search-attribute create --namespace default --name ReleaseName --type Keyword
func SearchAttributes() []contract.SearchAttribute {
	return []contract.SearchAttribute{{Name: contract.SearchAttrRelease, Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}}
}

// WorkflowID is "release/<name>".
func WorkflowID(name string) string { return "release/" + name }

// ApproveRequest is the approve update's payload.
type ApproveRequest struct {
	Approver string `json:"approver"`
	// Wave, when set, must name the wave waiting for approval (its name or 1-based number).
	Wave string `json:"wave,omitempty"`
	// Signature is the approver's SSH signature (SSHSIG, armored, namespace
	// SignatureNamespace) of ApprovalMessage(release, wave name, ChangeDigest(change)):
	// required when the wave's approval has signers, not checked otherwise. It stays in the
	// update's payload in the history, so the history proves who approved what.
	Signature string `json:"signature,omitempty"`
	// NotAfter is the time the signature's approval expires (ApprovalBinding.NotAfter):
	// required with a signature in a run under a worker policy; an approval after it is
	// refused.
	NotAfter *time.Time `json:"notAfter,omitempty"`
}

// ReasonRequest is the payload of pause and abort.
type ReasonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Phases of a release (Status.Phase).
const (
	PhaseResolving   = "Resolving"
	PhaseWaiting     = "Waiting"
	PhaseRolling     = "Rolling"
	PhaseAnalyzing   = "Analyzing"
	PhaseBaking      = "Baking"
	PhaseSucceeded   = "Succeeded"
	PhaseRollingBack = "RollingBack"
	// PhaseRolledBack: the release failed and every target it changed is back.
	PhaseRolledBack = "RolledBack"
	// PhaseHalted: the release failed with onFailure halt, or a rollback left targets behind.
	PhaseHalted = "Halted"
	// PhaseFailed: the release failed before it changed anything (a target that cannot be
	// read, an abort before the first change).
	PhaseFailed = "Failed"
)

// What a release waits for (Status.WaitingFor).
const (
	WaitingForApproval    = "Approval"
	WaitingForFreeze      = "Freeze"
	WaitingForFleetFreeze = "FleetFreeze"
	WaitingForResume      = "Resume"
	WaitingForRollouts    = "Rollouts"
	WaitingForAnalysis    = "Analysis"
	WaitingForBake        = "Bake"
)

// States of a target (TargetStatus.State).
const (
	TargetPending        = "Pending"
	TargetUpdating       = "Updating"
	TargetDone           = "Done"
	TargetFailed         = "Failed"
	TargetRollingBack    = "RollingBack"
	TargetRolledBack     = "RolledBack"
	TargetRollbackFailed = "RollbackFailed"
	// TargetRollbackSkipped: at the rollback, the Deployment's template was no longer the one
	// the release wrote (a hotfix since): it was left as it is, Reason says what changed, and
	// the release ends Halted naming it.
	TargetRollbackSkipped = "RollbackSkipped"
)

// States of a wave (WaveStatus.State).
const (
	WavePending    = "Pending"
	WaveWaiting    = "Waiting"
	WaveRolling    = "Rolling"
	WaveAnalyzing  = "Analyzing"
	WaveBaking     = "Baking"
	WaveDone       = "Done"
	WaveFailed     = "Failed"
	WaveRolledBack = "RolledBack"
)

// Status is the answer to the status query, and the state a run hands over by Continue-As-New
// (State). Targets are listed in wave order.
type Status struct {
	Name  string `json:"name"`
	Phase string `json:"phase"`
	// Wave is the 1-based number of the wave under way or waited at (0 before the first).
	Wave       int    `json:"wave"`
	WaitingFor string `json:"waitingFor,omitempty"`
	Message    string `json:"message,omitempty"`
	// Paused, PauseReason: a pause update (or an inconclusive analysis) holds the release.
	Paused      bool   `json:"paused,omitempty"`
	PauseReason string `json:"pauseReason,omitempty"`
	// FailureReason says why the release failed (an abort, a failed rollout or analysis, a
	// cluster that did not answer).
	FailureReason string `json:"failureReason,omitempty"`
	// FrozenUntil and FreezeReason: the freeze the release waits for.
	FrozenUntil  *time.Time     `json:"frozenUntil,omitempty"`
	FreezeReason string         `json:"freezeReason,omitempty"`
	Waves        []WaveStatus   `json:"waves"`
	Targets      []TargetStatus `json:"targets"`
	// Change and ChangeDigest are the release's change and its ChangeDigest, in the status
	// query's answer only (not in the state a run hands over): what a signed approval signs.
	Change       *Change `json:"change,omitempty"`
	ChangeDigest string  `json:"changeDigest,omitempty"`
	// Run is the value the release's first run generated (its run ID), which every signed
	// approval signs (ApprovalBinding.Run): a signature made for another run, even of a
	// release of the same name, is refused. Empty in a run begun before the worker's policy.
	Run string `json:"run,omitempty"`
	// Author is who started the release (normalized), and AuthorProof how that is known:
	// "signed with <principal>'s key SHA256:..." (the policy's authors list), or "unsigned"
	// (the policy says starts are not signed: Author is what the start said).
	Author      string `json:"author,omitempty"`
	AuthorProof string `json:"authorProof,omitempty"`
	// Policy is the worker's policy in force for this release (read at its start), its
	// digest and where the worker read it; in the status query's answer only.
	Policy       *Policy `json:"policy,omitempty"`
	PolicyDigest string  `json:"policyDigest,omitempty"`
	PolicySource string  `json:"policySource,omitempty"`
	// Spec is the release's spec, in the status query's answer only: with Targets and
	// Policy, what `starter release approve` recomputes each wave's Digest from.
	Spec *Spec `json:"spec,omitempty"`
}

// WaveStatus is one wave's progress.
type WaveStatus struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// ApprovalsNeeded distinct approvers; Approvals so far.
	ApprovalsNeeded int          `json:"approvalsNeeded,omitempty"`
	Approvals       []ApprovalAt `json:"approvals,omitempty"`
	BakeUntil       *time.Time   `json:"bakeUntil,omitempty"`
	// Analysis is the verdict of the wave's analysis and its measurements' summary.
	Analysis string `json:"analysis,omitempty"`
	// Digest is the wave's WaveDigest, once the targets are read, under a worker policy: what
	// a signed approval of it signs (ApprovalBinding.Digest). In the query's answer only.
	Digest string `json:"digest,omitempty"`
}

// ApprovalAt is one approval.
type ApprovalAt struct {
	// Approver is the name as the approval gave it; Principal the normalized name it counts
	// as (NormalizeApprover). Signed: its signature was verified against approval.signers.
	Approver  string    `json:"approver"`
	Principal string    `json:"principal,omitempty"`
	Signed    bool      `json:"signed,omitempty"`
	At        time.Time `json:"at"`
	// Signature and NotAfter are the signed approval's, kept so that a run resuming the
	// release verifies them again.
	Signature string     `json:"signature,omitempty"`
	NotAfter  *time.Time `json:"notAfter,omitempty"`
}

// TargetStatus is one Deployment's state in the release.
type TargetStatus struct {
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Wave      string `json:"wave"`
	State     string `json:"state"`
	// RevisionBefore is the Deployment's revision before the release changed it.
	RevisionBefore int64  `json:"revisionBefore,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Workflow and RunID name the Deployment's workflow run the release linked itself with
	// after its change (LinkRollout): the run under way then, which rolls the change out or
	// hands it to its next run. Empty in runs before the change release-link-rollouts, and
	// when no run was found.
	Workflow string `json:"workflow,omitempty"`
	RunID    string `json:"runId,omitempty"`
}

// Result is how a release ends.
type Result struct {
	Phase  string `json:"phase"`
	Reason string `json:"reason,omitempty"`
}
