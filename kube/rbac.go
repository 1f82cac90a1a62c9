package kube

// Permission is what the worker and the watcher call on one resource of the Kubernetes API.
type Permission struct {
	// Group is the API group ("" for the core group).
	Group    string
	Resource string
	// Verbs are the RBAC verbs (an informer needs list and watch).
	Verbs []string
	// Where names the callers, for docs/operations.md.
	Where string
}

// Permissions is every Kubernetes API call of the worker (with --watch, --releases and every
// mode) and of `starter watch`, audited from activities/, kube/, watcher/, worker/,
// internal/startup (the start-up both share) and starter/watch.go. deploy/base/rbac.yaml's ClusterRole grants exactly these, nothing more
// (TestRBACGrantsWhatTheCodeCalls in internal/packaging checks both ways), and
// docs/operations.md's table is rendered from it (TestRBACDocs). A call added to the code
// without its verb here fails the end-to-end test that makes it: the suite's worker and
// watcher run with the ServiceAccount's permissions (e2e/worker_rbac_test.go).
//
// Discovery's /version (lifecycle.WaitAPIServer) is a non-resource URL every authenticated
// user may read (system:public-info-viewer), so it needs no rule.
var Permissions = []Permission{
	{"apps", "deployments", []string{"get"},
		"a fresh read before a write: `writeStatus` (a conflict's retry), `SetPaused`, `SetImage`, `ClaimReplicaSets`, `restoreFromDeployment`, `observeLive`, `currentDeployment`; managed mode's `rewriteDeployment`, `annotateReplicaSets`; releases' `ReadTargets`, `updateTemplate`, `AwaitRolloutDone`"},
	{"apps", "deployments", []string{"list", "watch"},
		"the informer (`kube.NewCache`, worker and watcher); list also releases' `ReadTargets` (a target's label selector)"},
	{"apps", "deployments", []string{"update"},
		"`SetImage` (a new image), `RollbackDeployment`, managed mode's `rewriteDeployment` (park, hand back), releases' `updateTemplate`"},
	{"apps", "deployments", []string{"patch"},
		"`SetPaused` (pause, resume), `setParked`"},
	{"apps", "deployments/status", []string{"update"},
		"`writeStatus`, the one writer, for `UpdateDeploymentStatus` (the worker's syncs, the watcher's status refreshes) and `updateStatusWith` (a create's collision count and failure condition)"},
	{"apps", "replicasets", []string{"get"},
		"`CreateReplicaSet` (one of that name exists), `writeReplicaSet` (a fresh read on a conflict)"},
	{"apps", "replicasets", []string{"list", "watch"},
		"the informer (`kube.NewCache`); list also `observeLive`, `restoreDeploymentWrite` (a rollback's template), managed mode's `annotateReplicaSets`, releases' `previousTemplate`"},
	{"apps", "replicasets", []string{"create"}, "`CreateReplicaSet`"},
	{"apps", "replicasets", []string{"update"}, "`writeReplicaSet` (scale, annotations)"},
	{"apps", "replicasets", []string{"patch"},
		"`ClaimReplicaSets` (adopt, release), managed mode's `annotateReplicaSets`"},
	{"apps", "replicasets", []string{"delete"}, "`CleanupReplicaSets` (revisionHistoryLimit)"},
	{"", "pods", []string{"list", "watch"},
		"the informer (`kube.NewCache`); list also `observeLive`, traffic's `endpointsFollow`"},
	{"", "events", []string{"create", "patch"},
		"the event recorder (`worker/run.go`: client-go's broadcaster creates an event and patches its count when it repeats; core/v1 only, never `events.k8s.io`, never update)"},
	{"", "events", []string{"list"},
		"releases' `AwaitRolloutDone` (`abortedSince`: a RolloutAborted event of the Deployment)"},
	{"batch", "jobs", []string{"get", "create", "delete"},
		"job analysis steps: `ensureAnalysisJob`, `RunAnalysisJob` (polls with get), `abandonAnalysisJob` (a canceled step)"},
	{"", "services", []string{"get", "update"},
		"traffic routing's `SyncTraffic` and blue-green's `SyncBlueGreen` (a Service's selector)"},
	{"gateway.networking.k8s.io", "httproutes", []string{"get", "update"},
		"traffic routing's `SyncTraffic` (weights, header routes), `awaitGateways` (polls with get)"},
	{"discovery.k8s.io", "endpointslices", []string{"list"},
		"traffic routing's `endpointsFollow` (a Service's endpoints are its pods)"},
}
