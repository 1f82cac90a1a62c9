package activities

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/kube"
)

// TestBusyBoundsTheWriteItself: a sync's write that passed the budget check is still not
// sent if other requests took the budget's tokens before it queued (syncs running at once
// all read the budget before any of them queues): its own token would come past busyBacklog,
// so it fails at once with ErrBusy, unsent, and the task ends instead of holding the
// workflow's signals and queries. A user's command is never refused.
func TestBusyBoundsTheWriteItself(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web","namespace":"default"}}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// QPS 4, burst 1: one token every 250 ms.
	cs, restCfg, err := kube.NewClientsetAs("test", kubeconfig, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Client: cs, Admission: NewAdmission(kube.BudgetOf(restCfg))}
	get := func(ctx context.Context) error {
		_, err := cs.AppsV1().ReplicaSets(testNS).Get(ctx, "web", metav1.GetOptions{})
		return err
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	var took time.Duration // the sync's own write
	sync := func(command bool) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			// The budget has a token: the check passes.
			wctx, err := a.busy(ctx, command, 0)
			if err != nil {
				return "", fmt.Errorf("check refused with a token free: %w", err)
			}
			// Four other writers queue before this one: its token is now 1 s away.
			var others errgroup.Group
			for range 4 {
				others.Go(func() error { return get(context.Background()) })
			}
			for deadline := time.Now().Add(5 * time.Second); a.Admission.budget.Backlog() < 900*time.Millisecond; {
				if time.Now().After(deadline) {
					return "", fmt.Errorf("the others did not queue: backlog %s", a.Admission.budget.Backlog())
				}
				time.Sleep(5 * time.Millisecond)
			}
			sent := time.Now()
			err = get(wctx)
			took = time.Since(sent)
			if werr := others.Wait(); werr != nil {
				return "", werr
			}
			if refused := writeRefused("get", err); refused != nil {
				return "refused", refused
			}
			return "sent", err
		}
	}

	before := served.Load()
	_, err = env.ExecuteLocalActivity(sync(false))
	if !IsKind(err, ErrBusy) {
		t.Fatalf("sync's write: error %v, want %s", err, ErrBusy)
	}
	if got := served.Load() - before; got != 4 {
		t.Errorf("API server served %d requests, want the 4 others only (the sync's write unsent)", got)
	}
	// Not waited for: its token was 1 s away, and it failed at once.
	if took > 500*time.Millisecond {
		t.Errorf("the refused write took %s", took)
	}

	time.Sleep(time.Second)
	before = served.Load()
	v, err := env.ExecuteLocalActivity(sync(true))
	if err != nil {
		t.Fatalf("user's command: %v", err)
	}
	var got string
	if err := v.Get(&got); err != nil || got != "sent" {
		t.Fatalf("user's command: %q, %v, want sent", got, err)
	}
	if n := served.Load() - before; n != 5 {
		t.Errorf("API server served %d requests, want 5 (the command's write waited and went)", n)
	}
}
