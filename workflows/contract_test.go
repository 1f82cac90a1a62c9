package workflows

import (
	"encoding/json"
	"testing"

	"github.com/temporal-rollout/rollout/contract"
)

// TestInputJSON: the workflow's input is contract.Input's JSON with "carry" after it, as when
// Input held the state itself (between image and trigger; a continued run's input has neither), and
// an input written with carry before trigger reads back whole.
func TestInputJSON(t *testing.T) {
	give := Input{Input: contract.Input{Namespace: "default", Name: "web", Cluster: "eu"}, State: &State{Idle: true, Runs: 2, Status: contract.Status{Namespace: "default", Name: "web", Phase: "Complete", CurrentRevision: 3}}}
	b, err := json.Marshal(give)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"namespace":"default","name":"web","cluster":"eu","carry":{"idle":true,"runs":2,"status":{"namespace":"default","name":"web","phase":"Complete","paused":false,"currentRevision":3,"targetRevision":0,"replicas":0,"syncs":0}}}`; string(b) != want {
		t.Errorf("continue-as-new input: got %s, want %s", b, want)
	}
	var got Input
	if err := json.Unmarshal([]byte(`{"namespace":"default","name":"web","image":{"app":"x"},"carry":{"dirty":true},"trigger":{"versions":[]}}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "default" || got.Name != "web" || got.Image["app"] != "x" || got.State == nil || !got.State.Dirty || got.Trigger == nil {
		t.Errorf("decoded input: got %+v, want every field", got)
	}
}
