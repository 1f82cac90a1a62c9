package workflows

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
