// Package contract is what other processes and users rely on for the Deployment workflow:
// its task queues and workflow IDs, its input, result and status, the names and payloads of
// its signals, updates and queries, its search attributes and memo keys, and the IDs of the
// fleet freeze it asks. The worker, the CLI (starter), the watcher and the activities import
// it; only the worker's registration imports package workflows. The names and JSON fields
// here are in recorded histories and users' commands: they never change.
//
// The README's Temporal CLI cookbook refers to this package.
package contract

import (
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// DefaultTaskQueue is the task queue the worker polls unless configured otherwise.
	DefaultTaskQueue = "deployment-controller"
	// WorkflowType is the registered name of the Deployment workflow.
	WorkflowType = "DeploymentWorkflow"

	// SignalTrigger asks for a sync. Any payload is ignored; a burst costs one sync.
	SignalTrigger = "trigger"
	// SignalLink carries a link (the request's Links, which the Temporal UI shows on the
	// signal's event) between a release and a Deployment run it changed, sent by the release
	// to both (release.LinkRollout). No workflow reads it or decides on it: the Deployment
	// workflow leaves it unread, the release drains it.
	SignalLink = "link"
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

// More than one Kubernetes cluster on one Temporal namespace: each cluster runs its own worker
// (and watcher) with --cluster NAME, which polls the cluster's own task queue and starts and
// signals the workflows of that cluster's Deployments under IDs of their own, so the same
// namespace/name in two clusters is two workflows. Without --cluster (the cluster "") the task
// queue and IDs are the single-cluster ones, unchanged.
//
//	cluster  task queue                  workflow ID of shop/web
//	""       deployment-controller       deployment/shop/web
//	"eu"     deployment-controller.eu    deployment/eu/shop/web
//
// The worker's --task-queue, when set, wins over TaskQueueFor.

// SearchAttrCluster (Keyword) is the cluster of a named cluster's run, set at start:
// `temporal workflow list --query 'RolloutCluster="eu"'` lists the eu cluster's Deployments.
// Runs of the cluster "" do not carry it.
const SearchAttrCluster = "RolloutCluster"

// TaskQueueFor is the task queue of a cluster's worker: DefaultTaskQueue for "", else
// DefaultTaskQueue + "." + cluster.
func TaskQueueFor(cluster string) string {
	if cluster == "" {
		return DefaultTaskQueue
	}
	return DefaultTaskQueue + "." + cluster
}

// WorkflowIDIn is the workflow ID of a Deployment in a cluster: WorkflowID(namespace, name)
// for the cluster "", else "deployment/<cluster>/<namespace>/<name>".
func WorkflowIDIn(cluster, namespace, name string) string {
	if cluster == "" {
		return WorkflowID(namespace, name)
	}
	return "deployment/" + cluster + "/" + namespace + "/" + name
}

// ParseWorkflowIDIn splits a workflow ID made by WorkflowIDIn: the cluster is "" for the
// three-part form.
func ParseWorkflowIDIn(id string) (cluster, namespace, name string, ok bool) {
	parts := strings.Split(id, "/")
	if parts[0] != "deployment" || len(parts) < 3 || len(parts) > 4 {
		return "", "", "", false
	}
	for _, p := range parts[1:] {
		if p == "" {
			return "", "", "", false
		}
	}
	if len(parts) == 3 {
		return "", parts[1], parts[2], true
	}
	return parts[1], parts[2], parts[3], true
}

// ValidateCluster checks a cluster name: empty, or a DNS-1123 label (it goes into task queue
// names and workflow IDs, where a "/" would be ambiguous).
func ValidateCluster(cluster string) error {
	if cluster == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return fmt.Errorf("invalid cluster name %q: %s", cluster, strings.Join(errs, "; "))
	}
	return nil
}

// WorkflowID is the ID of the input's Deployment's workflow, in its cluster.
func (in Input) WorkflowID() string { return WorkflowIDIn(in.Cluster, in.Namespace, in.Name) }

// Memo keys the workflow upserts: a readable line, and a stepped or blue-green rollout's state
// as the status query shows it.
const (
	MemoSummary     = "summary"
	MemoSteps       = "steps"
	MemoAbortReason = "abortReason"
	MemoBlueGreen   = "blueGreen"
)

// The fleet freeze (docs/releases.md): one workflow on the releases task queue, which a
// DeploymentWorkflow asks (the FleetFreeze local activity) before a step. Package release runs
// it under these names.
const (
	// ReleasesTaskQueue is where release and freeze workflows run (worker --releases).
	ReleasesTaskQueue = "releases"
	// FleetFreezeID is the fleet freeze workflow's ID.
	FleetFreezeID = "freeze/fleet"
	// QueryFleetFreeze returns the fleet freeze's state.
	QueryFleetFreeze = "state"
)
