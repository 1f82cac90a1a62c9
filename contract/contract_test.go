package contract

import (
	"encoding/json"
	"testing"

	"github.com/temporal-rollout/rollout/k8s"
)

// TestNames: the names are in recorded histories, users' scripts and the CLI docs; they never
// change.
func TestNames(t *testing.T) {
	tests := []struct{ give, want string }{
		{DefaultTaskQueue, "deployment-controller"},
		{WorkflowType, "DeploymentWorkflow"},
		{SignalTrigger, "trigger"},
		{SignalPause, "pause"},
		{SignalResume, "resume"},
		{SignalRollback, "rollback"},
		{QueryStatus, "status"},
		{UpdatePromote, "promote"},
		{UpdateAbort, "abort"},
		{SearchAttrNamespace, "K8sNamespace"},
		{SearchAttrDeployment, "K8sDeployment"},
		{SearchAttrRevision, "K8sRevision"},
		{SearchAttrOutcome, "RolloutOutcome"},
		{SearchAttrWaitingFor, "RolloutWaitingFor"},
		{SearchAttrCluster, "RolloutCluster"},
		{SearchAttrRelease, "ReleaseName"},
		{MemoSummary, "summary"},
		{MemoSteps, "steps"},
		{MemoAbortReason, "abortReason"},
		{MemoBlueGreen, "blueGreen"},
		{ReleasesTaskQueue, "releases"},
		{FleetFreezeID, "freeze/fleet"},
		{QueryFleetFreeze, "state"},
		{WorkflowIDIn("eu", "shop", "web"), "deployment/eu/shop/web"},
		{TaskQueueFor("eu"), "deployment-controller.eu"},
	}
	for _, tt := range tests {
		if tt.give != tt.want {
			t.Errorf("got %q, want %q", tt.give, tt.want)
		}
	}
}

// TestPayloadJSON: the payloads encode as they always did (field names and order).
func TestPayloadJSON(t *testing.T) {
	rev := int64(3)
	tests := []struct {
		name string
		give any
		want string
	}{
		{"input", Input{Namespace: "default", Name: "web", Cluster: "eu", Image: map[string]string{"app": "nginx:v2"}, Trigger: &Trigger{Versions: []k8s.ObjectVersion{}}},
			`{"namespace":"default","name":"web","cluster":"eu","image":{"app":"nginx:v2"},"trigger":{}}`},
		{"rollback", RollbackRequest{Revision: &rev}, `{"revision":3}`},
		{"promote", PromoteRequest{Full: true}, `{"full":true}`},
		{"abort", AbortRequest{Reason: "bad"}, `{"reason":"bad"}`},
		{"result", Result{Outcome: OutcomeAborted, Revision: 2}, `{"outcome":"Aborted","revision":2}`},
		{"status", Status{Namespace: "default", Name: "web", Phase: "Progressing", Steps: &StepsStatus{Step: 1, Steps: 2, Analysis: &AnalysisStatus{Step: 1}}},
			`{"namespace":"default","name":"web","phase":"Progressing","paused":false,"currentRevision":0,"targetRevision":0,"replicas":0,"syncs":0,"steps":{"step":1,"steps":2,"weight":0,"analysis":{"step":1,"taken":0,"failures":0}}}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, b, tt.want)
		}
	}
}
