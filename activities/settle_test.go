package activities

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A wait that writes the status completing its plain rollout reports OthersMoving only while
// another plain rollout of the worker is under way and the client budget has tokens to spare.
func TestAwaitChangeReportsOthersMoving(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		moving  int64
		backlog time.Duration
		want    bool
	}{
		{name: "alone", want: false},
		{name: "another under way", moving: 1, want: true},
		{name: "another under way, the budget saturated", moving: 1, backlog: 300 * time.Millisecond, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss, old := finishing(t)
			f := awaitFixture(t, d, rss)
			f.a.Admission = NewAdmission(&lockedBudget{backlog: tt.backlog})
			f.a.moving.Add(tt.moving)
			after(t, 100*time.Millisecond, func() error {
				return f.setReplicaSetStatus(ctx, old.Name, func(st *appsv1.ReplicaSetStatus) { st.Replicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0 })
			})
			got, err := runAwait(t, f.a, AwaitInput{Namespace: testNS, Name: "web", UID: dUID, MaxWait: 30 * time.Second})
			if err != nil || got.Reason != AwaitDecide || !got.Completed {
				t.Fatalf("result %+v, error %v; want %s, completed", got, err, AwaitDecide)
			}
			if got.OthersMoving != tt.want {
				t.Errorf("othersMoving %t, want %t", got.OthersMoving, tt.want)
			}
			if n := f.a.moving.Load(); n != tt.moving {
				t.Errorf("moving after the wait: %d, want %d (the wait's own count released)", n, tt.moving)
			}
		})
	}
}

// runSettle runs Settle in the SDK's activity test environment.
func runSettle(t *testing.T, a *Activities, in SettleInput) (SettleResult, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	val, err := env.ExecuteActivity(a.Settle, in)
	if err != nil {
		return SettleResult{}, err
	}
	var res SettleResult
	if err := val.Get(&res); err != nil {
		t.Fatalf("decode result: %v", err)
	}
	return res, nil
}

// Settle returns at once when no other plain rollout is under way; while one is and the
// worker writes, once it is done or the writes stop for settleQuiet; at Max when they never
// stop; at once when its Deployment moves to another generation.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// others: another rollout under way for this long (forever if < 0), writing unless
		// silent.
		others time.Duration
		silent bool
		// changeAt, when set: the Deployment's spec changes this long in.
		changeAt   time.Duration
		max        time.Duration
		wantReason string
		// wantAbout: about how long it waits.
		wantAbout time.Duration
	}{
		{name: "none under way", max: 10 * time.Second, wantReason: SettleQuiet, wantAbout: 0},
		{name: "another moving for 1.2s", others: 1200 * time.Millisecond, max: 10 * time.Second, wantReason: SettleQuiet, wantAbout: 1200 * time.Millisecond},
		{name: "another under way, writing nothing", others: -1, silent: true, max: 10 * time.Second, wantReason: SettleQuiet, wantAbout: settleQuiet},
		{name: "writes never stop", others: -1, max: 1500 * time.Millisecond, wantReason: SettleMax, wantAbout: 1500 * time.Millisecond},
		{name: "its Deployment changes", others: -1, changeAt: 700 * time.Millisecond, max: 10 * time.Second, wantReason: SettleChanged, wantAbout: 700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rss := rolledTo2(t, allReady)
			f := awaitFixture(t, d, rss)
			if tt.changeAt > 0 {
				after(t, tt.changeAt, func() error {
					d, err := f.client.AppsV1().Deployments(testNS).Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						return err
					}
					d.Spec.Template = podTemplate("nginx:3", "")
					d.Generation++
					_, err = f.client.AppsV1().Deployments(testNS).Update(ctx, d, metav1.UpdateOptions{})
					return err
				})
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			if tt.others != 0 {
				f.a.moving.Add(1)
			}
			go func() {
				defer close(done)
				defer func() {
					if tt.others != 0 {
						f.a.moving.Add(-1)
					}
				}()
				for start := time.Now(); tt.others != 0 && (tt.others < 0 || time.Since(start) < tt.others); time.Sleep(20 * time.Millisecond) {
					select {
					case <-stop:
						return
					default:
					}
					if !tt.silent {
						f.a.countWrite("update", "replicasets", nil)
					}
				}
			}()
			t.Cleanup(func() { close(stop); <-done })

			start := time.Now()
			got, err := runSettle(t, f.a, SettleInput{Namespace: testNS, Name: "web", UID: dUID, Generation: d.Generation, Max: tt.max})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("settle: %v", err)
			}
			t.Logf("%+v after %s", got, elapsed)
			if got.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", got.Reason, tt.wantReason)
			}
			if elapsed < tt.wantAbout || elapsed > tt.wantAbout+settleQuiet+time.Second {
				t.Errorf("returned after %s, want about %s", elapsed, tt.wantAbout)
			}
			if got.Waited > elapsed || got.Waited < tt.wantAbout-10*time.Millisecond {
				t.Errorf("waited %s (returned after %s), want about %s", got.Waited, elapsed, tt.wantAbout)
			}
		})
	}
	t.Run("no namespace", func(t *testing.T) {
		if _, err := runSettle(t, &Activities{}, SettleInput{Name: "web"}); err == nil || !IsKind(err, ErrInvalid) {
			t.Fatalf("error %v, want %s", err, ErrInvalid)
		}
	})
}
