package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// AbortResult is `make bench BENCH_FLAGS=--abort N`: on our controller, one Deployment of N
// replicas (RollingUpdate 25%/25%), timed three ways at one client budget:
//   - Forward: a plain image update, update → complete (every new pod Ready);
//   - Abort: a stepped rollout held at setWeight 50, abort → the Deployment back on the stable
//     template with every pod Ready (the last old pod Ready);
//   - Promote: the same hold, promote {"full":true} → complete.
//
// And a blue-green Deployment of N replicas (temporal-rollout.io/blue-green, promoted
// automatically, scaleDownDelaySeconds 600), timed two ways:
//   - Switch: a new image → the active Service selects the new pods (all of them available);
//   - Rollback: the rollback signal, during the scale-down delay → the active Service selects
//     the old pods again (the warm ReplicaSet: nothing to scale up).
type AbortResult struct {
	Replicas       int     `json:"replicas"`
	Budget         Budget  `json:"budget"`
	ForwardSeconds float64 `json:"forwardSeconds"`
	AbortSeconds   float64 `json:"abortSeconds"`
	PromoteSeconds float64 `json:"promoteSeconds"`
	// BlueGreenSwitchSeconds, BlueGreenRollbackSeconds: see above.
	BlueGreenSwitchSeconds   float64 `json:"blueGreenSwitchSeconds"`
	BlueGreenRollbackSeconds float64 `json:"blueGreenRollbackSeconds"`
}

// Text is the result as a short table.
func (r AbortResult) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Abort vs forward, %d replicas, RollingUpdate 25%%/25%%, client budget %s (ours):\n", r.Replicas, r.Budget)
	fmt.Fprintf(&b, "  forward rollout (update → complete):                   %s\n", fmtDur(r.ForwardSeconds))
	fmt.Fprintf(&b, "  abort at setWeight 50 (abort → last old pod Ready):    %s (%.2f× the forward rollout)\n", fmtDur(r.AbortSeconds), r.AbortSeconds/r.ForwardSeconds)
	fmt.Fprintf(&b, "  promote full at setWeight 50 (promote → complete):     %s (%.2f×)\n", fmtDur(r.PromoteSeconds), r.PromoteSeconds/r.ForwardSeconds)
	fmt.Fprintf(&b, "  blue-green switch (update → active Service on the new pods): %s (%.2f×)\n", fmtDur(r.BlueGreenSwitchSeconds), r.BlueGreenSwitchSeconds/r.ForwardSeconds)
	fmt.Fprintf(&b, "  blue-green rollback to the warm ReplicaSet (signal → active Service on the old pods): %s (%.2f×)\n", fmtDur(r.BlueGreenRollbackSeconds), r.BlueGreenRollbackSeconds/r.ForwardSeconds)
	return b.String()
}

// runAbort measures AbortResult on a fresh stack and writes bench-out/abort.json.
func runAbort(ctx context.Context, cfg Config, replicas int) (AbortResult, error) {
	b := cfg.Budgets[len(cfg.Budgets)-1]
	res := AbortResult{Replicas: replicas, Budget: b}
	dir, err := os.MkdirTemp("", "rollout-bench-abort-")
	if err != nil {
		return res, err
	}
	defer func() {
		if cfg.Keep {
			logf(cfg.Log, "stack folder kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: cfg.Tools, Nodes: cfg.Nodes, Temporal: cfg.Temporal,
		PodReadyDelay: cfg.PodReadyDelay, PodReadyJitter: cfg.PodReadyJitter,
		KubeAPIQPS: float32(b.QPS), KubeAPIBurst: b.Burst, Headless: true, Progress: cfg.Log,
	})
	if err != nil {
		return res, fmt.Errorf("start stack: %w", err)
	}
	defer s.Stop()
	common := ourArgs(s.Kubeconfig, s.TemporalAddress, b)
	if _, err := s.StartProcess("worker", filepath.Join(cfg.Bin, "worker"), append(append([]string{}, common...), cfg.WorkerArgs...)...); err != nil {
		return res, err
	}
	if _, err := s.StartProcess("watcher", filepath.Join(cfg.Bin, "starter"), append([]string{"watch", "--search-attributes"}, common...)...); err != nil {
		return res, err
	}
	kc, _, err := kube.NewClientsetAs("rollout-bench", s.Kubeconfig, float32(cfg.HarnessQPS), cfg.HarnessBurst)
	if err != nil {
		return res, err
	}
	tc, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Logger: quietLog{}})
	if err != nil {
		return res, err
	}
	defer tc.Close()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	w := Workload{Kind: KindRolling, N: 1, R: replicas}
	const name = "app-abort"
	if _, err := kc.AppsV1().Deployments(benchNamespace).Create(ctx, w.deployment(benchNamespace, name), metav1.CreateOptions{}); err != nil {
		return res, err
	}
	if _, err := waitDeployment(ctx, kc, name, cfg.Timeout, complete(replicas)); err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	logf(cfg.Log, "abort bench: %d replicas available; forward rollout", replicas)

	t0 := time.Now()
	if err := setBenchImage(ctx, kc, name, imageV2, ""); err != nil {
		return res, err
	}
	done, err := waitDeployment(ctx, kc, name, cfg.Timeout, complete(replicas))
	if err != nil {
		return res, fmt.Errorf("forward: %w", err)
	}
	res.ForwardSeconds = done.Sub(t0).Seconds()

	hold := `[{"setWeight":50},{"pause":{}}]`
	id := contract.WorkflowID(benchNamespace, name)
	for i, step := range []struct {
		image, update string
		payload       any
		out           *float64
	}{
		{image: "registry.local/bench/app:v3", update: contract.UpdateAbort, payload: contract.AbortRequest{Reason: "bench"}, out: &res.AbortSeconds},
		{image: "registry.local/bench/app:v4", update: contract.UpdatePromote, payload: contract.PromoteRequest{Full: true}, out: &res.PromoteSeconds},
	} {
		if err := setBenchImage(ctx, kc, name, step.image, hold); err != nil {
			return res, err
		}
		held := func(d *appsv1.Deployment) bool {
			c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
			return c != nil && c.Reason == k8s.CanaryPausedReason && d.Status.UpdatedReplicas == int32(replicas/2) && d.Status.AvailableReplicas >= int32(replicas)
		}
		if _, err := waitDeployment(ctx, kc, name, cfg.Timeout, held); err != nil {
			return res, fmt.Errorf("hold %d at setWeight 50: %w", i+1, err)
		}
		logf(cfg.Log, "abort bench: held at 50%%; %s", step.update)
		t0 := time.Now()
		h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: step.update, Args: []any{step.payload}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return res, fmt.Errorf("%s: %w", step.update, err)
		}
		if err := h.Get(ctx, nil); err != nil {
			return res, fmt.Errorf("%s: %w", step.update, err)
		}
		done, err := waitDeployment(ctx, kc, name, cfg.Timeout, complete(replicas))
		if err != nil {
			return res, fmt.Errorf("after %s: %w", step.update, err)
		}
		*step.out = done.Sub(t0).Seconds()
	}
	if err := blueGreenBench(ctx, cfg, kc, tc, w, &res); err != nil {
		return res, fmt.Errorf("blue-green: %w", err)
	}
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.MkdirAll(cfg.OutDir, 0o755)
		_ = os.WriteFile(filepath.Join(cfg.OutDir, "abort.json"), b, 0o644)
	}
	return res, nil
}

type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}

// complete is `kubectl rollout status` success at n replicas: every pod updated and Ready, no
// old pod left.
func complete(n int) func(*appsv1.Deployment) bool {
	return func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == int32(n) &&
			d.Status.Replicas == int32(n) && d.Status.AvailableReplicas == int32(n)
	}
}

func setBenchImage(ctx context.Context, kc kubernetes.Interface, name, image, steps string) error {
	d, err := kc.AppsV1().Deployments(benchNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Template.Spec.Containers[0].Image = image
	if steps != "" {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[k8s.StepsAnnotation] = steps
	}
	_, err = kc.AppsV1().Deployments(benchNamespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

// waitDeployment polls every 50ms until ok, and returns when it first held.
func waitDeployment(ctx context.Context, kc kubernetes.Interface, name string, timeout time.Duration, ok func(*appsv1.Deployment) bool) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		d, err := kc.AppsV1().Deployments(benchNamespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(d) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not reached after %s (last: %+v, %v)", timeout, statusOf(d), err)
		}
		sleep(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}

func statusOf(d *appsv1.Deployment) any {
	if d == nil {
		return nil
	}
	return d.Status
}

// blueGreenBench times a blue-green Deployment's switch and its rollback to the warm
// ReplicaSet (AbortResult).
func blueGreenBench(ctx context.Context, cfg Config, kc kubernetes.Interface, tc client.Client, w Workload, res *AbortResult) error {
	const name, active, preview = "app-bg", "app-bg-active", "app-bg-preview"
	for _, svc := range []string{active, preview} {
		if _, err := kc.CoreV1().Services(benchNamespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	d := w.deployment(benchNamespace, name)
	d.Annotations = map[string]string{k8s.BlueGreenAnnotation: fmt.Sprintf(`{"activeService":%q,"previewService":%q,"scaleDownDelaySeconds":600}`, active, preview)}
	d, err := kc.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := waitDeployment(ctx, kc, name, cfg.Timeout, complete(w.R)); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	oldHash := k8s.PodTemplateHash(&d.Spec.Template, nil)
	if _, err := waitSelects(ctx, kc, active, oldHash, cfg.Timeout); err != nil {
		return err
	}
	logf(cfg.Log, "abort bench: blue-green Deployment available; new image")
	t0 := time.Now()
	if err := setBenchImage(ctx, kc, name, imageV2, ""); err != nil {
		return err
	}
	cur, err := kc.AppsV1().Deployments(benchNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	switched, err := waitSelects(ctx, kc, active, k8s.PodTemplateHash(&cur.Spec.Template, cur.Status.CollisionCount), cfg.Timeout)
	if err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	res.BlueGreenSwitchSeconds = switched.Sub(t0).Seconds()
	logf(cfg.Log, "abort bench: blue-green switched; rollback during the scale-down delay")
	t0 = time.Now()
	prev := int64(0)
	if err := tc.SignalWorkflow(ctx, contract.WorkflowID(benchNamespace, name), "", contract.SignalRollback, contract.RollbackRequest{Revision: &prev}); err != nil {
		return err
	}
	back, err := waitSelects(ctx, kc, active, oldHash, cfg.Timeout)
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	res.BlueGreenRollbackSeconds = back.Sub(t0).Seconds()
	return nil
}

// waitSelects polls every 20ms until the Service selects pod-template-hash hash, and returns
// when it first did.
func waitSelects(ctx context.Context, kc kubernetes.Interface, svc, hash string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := kc.CoreV1().Services(benchNamespace).Get(ctx, svc, metav1.GetOptions{})
		if err == nil && s.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("service %s does not select %s after %s (%v)", svc, hash, timeout, err)
		}
		sleep(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}
