package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
)

func ptr[T any](v T) *T { return &v }

// stepsWithAnalysis is a stepped rollout at an analysis step; its analysis state has an
// unexported type, so it comes from JSON as the query's answer does.
func stepsWithAnalysis(t *testing.T) *contract.StepsStatus {
	t.Helper()
	var s contract.StepsStatus
	raw := `{"step":3,"steps":4,"current":"analysis of sum(rate(errors[1m]))","weight":50,"waitingFor":"Analysis",
		"message":"Step 3 of 4 (analysis): 2 of 3 measurements","analysis":{"step":2,"taken":2,"failures":1}}`
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	s.LastValue = &activities.Measurement{Value: ptr(0.25), Verdict: "Failed", Message: "0.25 > 0.1",
		At: time.Date(2026, 5, 1, 12, 0, 30, 0, time.FixedZone("CEST", 2*3600))}
	return &s
}

func TestRenderStatus(t *testing.T) {
	rs := func(name string, rev int64, n, ready, avail int32) contract.ReplicaSetStatus {
		return contract.ReplicaSetStatus{Name: name, Revision: rev, Replicas: n, Ready: ready, Available: avail}
	}
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}
	tests := []struct {
		name string
		give contract.Status
		want string
	}{
		{
			name: "complete",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Complete", CurrentRevision: 4, TargetRevision: 4,
				NewReplicaSet: "web-7c9d", Replicas: 3, Syncs: 7,
				ReplicaSets: []contract.ReplicaSetStatus{rs("web-7c9d", 4, 3, 3, 3), rs("web-5f6b", 3, 0, 0, 0)},
				Conditions: []appsv1.DeploymentCondition{available,
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-7c9d" has successfully progressed.`}}},
			want: `Name:       web
Namespace:  shop
Phase:      Complete
Paused:     false
Revision:   4
Replicas:   3
Syncs:      7

REPLICASET  REVISION  REPLICAS  READY  AVAILABLE
web-7c9d    4         3         3      3          new
web-5f6b    3         0         0      0

CONDITION    STATUS  REASON                    MESSAGE
Available    True    MinimumReplicasAvailable  Deployment has minimum availability.
Progressing  True    NewReplicaSetAvailable    ReplicaSet "web-7c9d" has successfully progressed.
`,
		},
		{
			name: "waiting for promote at a pause step, rollback pending",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing", CurrentRevision: 3, TargetRevision: 4,
				NewReplicaSet: "web-7c9d", Replicas: 10, Syncs: 12, PendingRollback: ptr(int64(0)),
				Steps:       &contract.StepsStatus{Step: 2, Steps: 6, Current: "pause until promoted", Weight: 20, WaitingFor: contract.WaitingForPromote, Message: "Step 2 of 6 (pause until promoted)"},
				ReplicaSets: []contract.ReplicaSetStatus{rs("web-7c9d", 4, 2, 2, 2), rs("web-5f6b", 3, 8, 8, 8)}},
			want: `Name:          web
Namespace:     shop
Phase:         Progressing
Paused:        false
Revision:      3 → 4
Replicas:      10
Rollback:      pending, to the previous revision
Step:          2 of 6: pause until promoted
Weight:        20%
Waiting for:   Promote (starter promote shop/web)
Step message:  Step 2 of 6 (pause until promoted)
Syncs:         12

REPLICASET  REVISION  REPLICAS  READY  AVAILABLE
web-7c9d    4         2         2      2          new
web-5f6b    3         8         8      8          stable
`,
		},
		{
			name: "paused by the user at a timed pause: the holds",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Paused", Paused: true, CurrentRevision: 3, TargetRevision: 4, Replicas: 10,
				Holds: []contract.Hold{
					{Kind: contract.HoldPaused, Message: "paused (spec.paused)", Do: "kubectl rollout resume deployment/web -n shop"},
					{Kind: contract.WaitingForTimer, Message: "Step 4 of 6 (pause 30s): paused until 2026-05-01T12:00:30Z",
						Until: ptr(time.Date(2026, 5, 1, 14, 0, 30, 0, time.FixedZone("CEST", 2*3600))), Do: "starter promote shop/web"},
				}},
			want: `Name:       web
Namespace:  shop
Phase:      Paused
Paused:     true
Revision:   3 → 4
Replicas:   10
Syncs:      0

HOLD    UNTIL                 TO END IT
Paused                        kubectl rollout resume deployment/web -n shop
Timer   2026-05-01T12:00:30Z  starter promote shop/web
`,
		},
		{
			name: "timed pause, paused by the user, rollback to a revision",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Paused", Paused: true, CurrentRevision: 3, TargetRevision: 4,
				Replicas: 10, PendingRollback: ptr(int64(2)),
				Steps: &contract.StepsStatus{Step: 4, Steps: 6, Current: "pause 30s", Weight: 50, WaitingFor: contract.WaitingForTimer,
					PauseUntil: ptr(time.Date(2026, 5, 1, 14, 0, 30, 0, time.FixedZone("CEST", 2*3600)))}},
			want: `Name:         web
Namespace:    shop
Phase:        Paused
Paused:       true
Revision:     3 → 4
Replicas:     10
Rollback:     pending, to revision 2
Step:         4 of 6: pause 30s
Weight:       50%
Waiting for:  Timer, until 2026-05-01T12:00:30Z
Syncs:        0
`,
		},
		{
			name: "analysis with its last measurement",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing", CurrentRevision: 3, TargetRevision: 4, Replicas: 4,
				Steps: stepsWithAnalysis(t)},
			want: `Name:              web
Namespace:         shop
Phase:             Progressing
Paused:            false
Revision:          3 → 4
Replicas:          4
Step:              3 of 4: analysis of sum(rate(errors[1m]))
Weight:            50%
Waiting for:       Analysis
Step message:      Step 3 of 4 (analysis): 2 of 3 measurements
Analysis:          2 measurements, 1 failed
Last measurement:  0.25, Failed at 2026-05-01T10:00:30Z: 0.25 > 0.1
Syncs:             0
`,
		},
		{
			name: "promoted in full, every step done",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing", CurrentRevision: 3, TargetRevision: 4, Replicas: 4,
				Steps: &contract.StepsStatus{Step: 7, Steps: 6, Current: "done", Weight: 100, Full: true}},
			want: `Name:       web
Namespace:  shop
Phase:      Progressing
Paused:     false
Revision:   3 → 4
Replicas:   4
Step:       all 6 done
Weight:     100% (promoted in full)
Syncs:      0
`,
		},
		{
			name: "why it stopped",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Invalid", CurrentRevision: 3, TargetRevision: 3, Replicas: 4, Syncs: 2,
				AbortReason: "aborted by user: error rate", AnnotationError: "temporal-rollout.io/steps: step 1: setWeight 120 is not in 0..100",
				LastError: "scale replicaset shop/web-7c9d to 4: conflict", IgnoredSignal: "rollback: revision -1", Message: "rollout held",
				AbortScaleDownAt: ptrTime(time.Date(2026, 11, 27, 18, 0, 30, 0, time.UTC))},
			want: `Name:                web
Namespace:           shop
Phase:               Invalid
Paused:              false
Revision:            3
Replicas:            4
Abort reason:        aborted by user: error rate
Aborted pods until:  2026-11-27T18:00:30Z (abortScaleDownDelaySeconds)
Annotation error:    temporal-rollout.io/steps: step 1: setWeight 120 is not in 0..100
Last error:          scale replicaset shop/web-7c9d to 4: conflict
Ignored signal:      rollback: revision -1
Message:             rollout held
Syncs:               2
`,
		},
		{
			name: "a workflow that has not synced yet",
			give: contract.Status{Namespace: "shop", Name: "web", Phase: "Pending"},
			want: `Name:       web
Namespace:  shop
Phase:      Pending
Paused:     false
Revision:   0
Replicas:   0
Syncs:      0
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderStatus(tt.give); got != tt.want {
				t.Errorf("renderStatus() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestFormatStatus(t *testing.T) {
	st := contract.Status{Namespace: "shop", Name: "web", Phase: "Complete", CurrentRevision: 2, TargetRevision: 2, Replicas: 3}
	tests := []struct {
		give string
		want string
	}{
		{give: outputJSON, want: "{\n  \"namespace\": \"shop\",\n  \"name\": \"web\",\n  \"phase\": \"Complete\",\n  \"paused\": false,\n  \"currentRevision\": 2,\n  \"targetRevision\": 2,\n  \"replicas\": 3,\n  \"syncs\": 0\n}\n"},
		{give: outputYAML, want: "currentRevision: 2\nname: web\nnamespace: shop\npaused: false\nphase: Complete\nreplicas: 3\nsyncs: 0\ntargetRevision: 2\n"},
		{give: outputText, want: renderStatus(st)},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := formatStatus(st, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("formatStatus(%s) =\n%s\nwant\n%s", tt.give, got, tt.want)
			}
		})
	}
}

func TestWatchStatus(t *testing.T) {
	progressing := contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing", CurrentRevision: 1, TargetRevision: 2}
	moved := progressing
	moved.Syncs = 1
	complete := moved
	complete.Phase, complete.CurrentRevision = "Complete", 2
	failure := errors.New("query status of deployment/shop/web: connection refused")
	tests := []struct {
		name    string
		give    []contract.Status // answers in turn; past the end, the query fails with failure
		output  string
		want    []contract.Status // printed
		wantErr error
	}{
		{name: "each change until Complete", give: []contract.Status{progressing, progressing, moved, moved, complete, progressing},
			output: outputText, want: []contract.Status{progressing, moved, complete}},
		{name: "already complete", give: []contract.Status{complete, progressing}, output: outputJSON, want: []contract.Status{complete}},
		{name: "yaml documents", give: []contract.Status{progressing, complete}, output: outputYAML, want: []contract.Status{progressing, complete}},
		{name: "a failed query ends it", give: []contract.Status{progressing}, output: outputText, want: []contract.Status{progressing}, wantErr: failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			query := func(context.Context) (contract.Status, error) {
				defer func() { i++ }()
				if i >= len(tt.give) {
					return contract.Status{}, failure
				}
				return tt.give[i], nil
			}
			var b strings.Builder
			err := watchStatus(context.Background(), query, &b, tt.output, time.Millisecond)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("watchStatus() error = %v, want %v", err, tt.wantErr)
			}
			var want []string
			for _, st := range tt.want {
				s, err := formatStatus(st, tt.output)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, s)
			}
			sep := map[string]string{outputText: "\n", outputYAML: "---\n", outputJSON: ""}[tt.output]
			if got := b.String(); got != strings.Join(want, sep) {
				t.Errorf("watchStatus() printed\n%s\nwant\n%s", got, strings.Join(want, sep))
			}
		})
	}
}

// TestWatchStatusInterrupted: Ctrl-C (ctx ends) stops the watch without an error, during the
// wait and during a query.
func TestWatchStatusInterrupted(t *testing.T) {
	st := contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing"}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	query := func(ctx context.Context) (contract.Status, error) {
		n++
		if n == 3 {
			cancel()
			return contract.Status{}, ctx.Err()
		}
		return st, nil
	}
	var b strings.Builder
	if err := watchStatus(ctx, query, &b, outputText, time.Millisecond); err != nil {
		t.Fatalf("watchStatus() error = %v, want nil after Ctrl-C", err)
	}
	if got, want := b.String(), renderStatus(st); got != want {
		t.Errorf("watchStatus() printed\n%s\nwant\n%s", got, want)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
