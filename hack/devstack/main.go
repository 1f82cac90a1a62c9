// Command devstack is `make dev`: it starts the local stack (etcd, kube-apiserver,
// kube-controller-manager without its Deployment controller, kube-scheduler, kwok, the
// Temporal dev server and UI), then our worker (running the watcher too: --watch), prints how
// to use it, and stops everything on Ctrl-C. With KUBECONFIG and ROLLOUT_TEMPORAL_ADDRESS set
// it skips the stack and runs just the worker against them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/temporal-rollout/rollout/internal/stack"
)

func main() {
	dir := flag.String("dir", ".dev", "state folder (kubeconfig, logs, Temporal db)")
	bin := flag.String("bin", "bin", "folder holding the built worker and starter")
	nodes := flag.Int("nodes", 3, "kwok nodes")
	delay := flag.Duration("pod-ready-delay", 2*time.Second, "time before a pod becomes Ready")
	jitter := flag.Duration("pod-ready-jitter", time.Second, "random extra start-up time")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *bin, *nodes, *delay, *jitter); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, bin string, nodes int, delay, jitter time.Duration) error {
	dir, _ = filepath.Abs(dir)
	bin, _ = filepath.Abs(bin)
	kubeconfig, temporal := os.Getenv("KUBECONFIG"), os.Getenv("ROLLOUT_TEMPORAL_ADDRESS")
	external := kubeconfig != "" && temporal != ""
	var s *stack.Stack
	if external {
		fmt.Printf("Using KUBECONFIG=%s and Temporal at %s; not starting a local stack.\n", kubeconfig, temporal)
		s = &stack.Stack{Opts: stack.Options{Dir: dir}, Kubeconfig: kubeconfig, TemporalAddress: temporal}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	} else {
		_ = os.RemoveAll(filepath.Join(dir, "etcd"))
		var err error
		s, err = stack.Start(ctx, stack.Options{
			Dir: dir, Nodes: nodes, PodReadyDelay: delay, PodReadyJitter: jitter,
			TemporalPort: 7233, TemporalUIPort: 8233, APIServerPort: 6443, Progress: os.Stdout,
		})
		if err != nil {
			return err
		}
	}
	defer s.Stop()
	common := []string{"--kubeconfig", s.Kubeconfig, "--temporal-address", s.TemporalAddress, "--log-format", "text"}
	// The worker runs the watcher too (--watch): new Deployments' workflows start eagerly.
	workerArgs := append(common, "--metrics-address", "127.0.0.1:9090", "--watch")
	if !external {
		workerArgs = append(workerArgs, "--search-attributes")
	}
	if _, err := s.StartProcess("worker", filepath.Join(bin, "worker"), workerArgs...); err != nil {
		return err
	}
	fmt.Printf(`
Ready. Logs are in %[1]s/*.log.

  export KUBECONFIG=%[2]s
  Temporal UI:      %[3]s
  Temporal address: %[4]s
  Metrics:          http://127.0.0.1:9090/metrics (the worker, which also runs the watcher)

Try it (kubectl and temporal are the pinned builds in %[6]s):
  export PATH=%[5]s:$PATH
  kubectl create deployment web --image=nginx:1.25 --replicas=4
  kubectl set image deployment/web nginx=nginx:1.26
  kubectl rollout status deployment/web
  temporal workflow signal --address %[4]s --workflow-id deployment/default/web --name pause
  temporal workflow signal --address %[4]s --workflow-id deployment/default/web --name resume
  temporal workflow signal --address %[4]s --workflow-id deployment/default/web --name rollback --input '{"revision":1}'
  temporal workflow query  --address %[4]s --workflow-id deployment/default/web --type status
  kubectl rollout history deployment/web

A stepped rollout (canary at 25%%, a 30s pause, 50%%, then a pause until promoted):
  kubectl annotate deployment/web temporal-rollout.io/steps='[{"setWeight":25},{"pause":{"duration":"30s"}},{"setWeight":50},{"pause":{}}]'
  kubectl set image deployment/web nginx=nginx:1.27
  temporal workflow query  --address %[4]s --workflow-id deployment/default/web --type status
  temporal workflow list   --address %[4]s --query 'RolloutWaitingFor = "Promote"'
  temporal workflow update execute --address %[4]s --workflow-id deployment/default/web --name promote
  kubectl set image deployment/web nginx=nginx:1.28
  temporal workflow update execute --address %[4]s --workflow-id deployment/default/web --name abort --input '{"reason":"trying abort"}'

Ctrl-C stops everything.
`, dir, s.Kubeconfig, s.UIAddress, s.TemporalAddress, toolsPath(), stack.DefaultTools())
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nStopping...")
			return nil
		case <-time.After(time.Second):
			for _, name := range []string{"worker"} {
				if ok, err := s.Proc(name).Exited(); ok {
					return fmt.Errorf("%s exited (%v); log tail:\n%s", name, err, s.Proc(name).Tail(3000))
				}
			}
		}
	}
}

// toolsPath is a PATH fragment with the pinned kubectl and temporal builds.
func toolsPath() string {
	tools := stack.DefaultTools()
	return filepath.Dir(stack.ToolPath(tools, "kubectl")) + ":" + filepath.Dir(stack.ToolPath(tools, "temporal"))
}
