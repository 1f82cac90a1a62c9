package watcher

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/kube"
)

// TestTakeOver: a starting worker signals the workflow of every rollout under way (moving, and
// one with no workflow, whose NotFound is not an error), and none at rest.
func TestTakeOver(t *testing.T) {
	rest, restRSs := atRest(t, "rest")
	moving, movingRSs := rolling(t, "moving")
	orphan, orphanRSs := rolling(t, "orphan")
	var objs []runtime.Object
	for _, o := range [][]runtime.Object{objects(rest, restRSs), objects(moving, movingRSs), objects(orphan, orphanRSs)} {
		objs = append(objs, o...)
	}
	kc := fake.NewClientset(objs...)
	bumpResourceVersions(kc)
	c, err := kube.NewCache(kc, "")
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tc := &mocks.Client{}
	tc.On("SignalWorkflow", mock.Anything, contract.WorkflowIDIn("eu", "prod", "moving"), "", contract.SignalTrigger, nil).Return(nil).Once()
	tc.On("SignalWorkflow", mock.Anything, contract.WorkflowIDIn("eu", "prod", "orphan"), "", contract.SignalTrigger, nil).
		Return(serviceerror.NewNotFound("no workflow")).Once()

	got, err := TakeOver(context.Background(), c, tc, "eu", false, slog.New(slog.DiscardHandler))

	if err != nil {
		t.Fatalf("TakeOver error = %v", err)
	}
	tc.AssertExpectations(t)
	if got != 1 {
		t.Errorf("TakeOver signalled %d, want 1 (prod/moving)", got)
	}
}
