package workflows

import (
	"testing"
	"time"
)

func TestProbeCancelIdle(t *testing.T) {
	f := steady()
	env := newEnv(t, f)
	env.SetTestTimeout(3 * time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Second)
	func() {
		defer func() { t.Logf("recovered: %.200v", recover()) }()
		env.ExecuteWorkflow(WorkflowType, input())
	}()
	t.Logf("completed=%v err=%v observes=%d", env.IsWorkflowCompleted(), env.GetWorkflowError(), f.callCount("Observe"))
}

func TestProbeCancelMidRollout(t *testing.T) {
	f := midRollout()
	env := newEnv(t, f)
	env.SetTestTimeout(3 * time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Second)
	func() {
		defer func() { t.Logf("recovered: %.300v", recover()) }()
		env.ExecuteWorkflow(WorkflowType, input())
	}()
	t.Logf("completed=%v err=%.300v observes=%d", env.IsWorkflowCompleted(), env.GetWorkflowError(), f.callCount("Observe"))
}
