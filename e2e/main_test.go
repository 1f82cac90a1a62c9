//go:build e2e

// Package e2e runs the orchestrator end to end on the real local stack: etcd,
// kube-apiserver, kube-controller-manager without its Deployment controller, kube-scheduler,
// kwok, the Temporal dev server, and our worker and watcher as separate processes. Each test
// uses its own namespace and checks exact object state.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// env is the shared stack; tests run one at a time because some restart its processes.
var env struct {
	stack  *stack.Stack
	kube   kubernetes.Interface
	tc     client.Client
	bin    string
	tools  string
	logDir string
	// builtin: E2E_CONTROLLER=built-in runs kube-controller-manager's own Deployment
	// controller instead of ours. qps, burst: E2E_KUBE_BUDGET.
	builtin    bool
	qps, burst int
	// prom is the suite's Prometheus, scraping a target the tests set series on; the worker
	// queries it for analysis steps.
	prom *suiteProm
	// workerKubeconfig is the kubeconfig of our worker and watcher: deploy/'s ServiceAccount's
	// permissions, or the admin's with E2E_WORKER_CREDENTIALS=admin (worker_rbac_test.go).
	workerKubeconfig string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rollout-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	keep := os.Getenv("E2E_KEEP") != ""
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	env.bin = filepath.Join(dir, "bin")
	env.tools = stack.DefaultTools()
	for _, pkg := range []string{"worker", "starter"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(env.bin, pkg), "../"+pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build", pkg+":", err)
			return 1
		}
	}
	env.builtin = os.Getenv("E2E_CONTROLLER") == "built-in"
	qps, burst, err := budget(os.Getenv("E2E_KUBE_BUDGET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env.qps, env.burst = qps, burst
	// E2E_TEMPORAL=cluster runs the suite on the Temporal server on PostgreSQL with several
	// history shards (make test-cluster) instead of the dev server.
	mode, err := stack.ParseTemporalMode(os.Getenv("E2E_TEMPORAL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: E2E_TEMPORAL:", err)
		return 1
	}
	s, err := stack.Start(ctx, stack.Options{
		Temporal: mode,
		// The Temporal UI is served: TestUI* take screenshots of it (docs/ui.md).
		Dir: filepath.Join(dir, "stack"), Tools: env.tools, Nodes: 3, Headless: false,
		PodReadyDelay: 300 * time.Millisecond, PodReadyJitter: 400 * time.Millisecond,
		Progress: os.Stderr, BuiltinDeploymentController: env.builtin,
		KubeAPIQPS: float32(qps), KubeAPIBurst: burst,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start stack:", err)
		return 1
	}
	env.logDir = s.Opts.Dir
	defer func() {
		s.Stop()
		if keep {
			fmt.Fprintln(os.Stderr, "e2e: logs kept in", env.logDir)
		}
	}()
	env.stack, env.kube = s, s.Client
	if env.workerKubeconfig, err = workerCredentials(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the worker's credentials:", err)
		return 1
	}
	if env.prom, err = startSuiteProm(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: prometheus:", err)
		return 1
	}
	defer env.prom.close()
	if env.builtin {
		fmt.Fprintln(os.Stderr, "e2e: E2E_CONTROLLER=built-in: kube-controller-manager's own Deployment controller, no worker or watcher (for comparisons; tests of our worker fail)")
	} else if err := startWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if env.builtin {
	} else if err := startWatcher(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	tc, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Logger: quiet{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: dial temporal:", err)
		return 1
	}
	defer tc.Close()
	env.tc = tc
	code := m.Run()
	if code != 0 {
		for _, name := range []string{"worker", "watcher"} {
			if p := s.Proc(name); p != nil {
				fmt.Fprintf(os.Stderr, "---- %s log tail ----\n%s\n", name, p.Tail(6000))
			}
		}
	}
	return code
}

func commonArgs() []string {
	return []string{"--kubeconfig", env.workerKubeconfig, "--temporal-address", env.stack.TemporalAddress,
		"--log-format", "text", "--metrics-address", "",
		"--kube-qps", strconv.Itoa(env.qps), "--kube-burst", strconv.Itoa(env.burst)}
}

// budget parses E2E_KUBE_BUDGET ("<qps>/<burst>"): the client budget of kube-controller-manager
// and of our worker and watcher alike. Empty is kube-controller-manager's default, 20/30.
func budget(s string) (qps, burst int, err error) {
	if s == "" {
		return 20, 30, nil
	}
	if _, err := fmt.Sscanf(s, "%d/%d", &qps, &burst); err != nil || qps <= 0 || burst <= 0 {
		return 0, 0, fmt.Errorf("E2E_KUBE_BUDGET=%q: want <qps>/<burst>, like 200/300", s)
	}
	return qps, burst, nil
}

func startWorker(extra ...string) error {
	// --releases: the suite's worker also runs the release workflows (e2e/release_test.go).
	// --held-at-rest: the suite's watcher (starter watch) runs beside it.
	args := append(append(commonArgs(), "--releases", "--held-at-rest"), extra...)
	if env.prom != nil {
		args = append(args, "--prometheus-address", env.prom.address)
	}
	_, err := env.stack.StartProcess("worker", filepath.Join(env.bin, "worker"), args...)
	return err
}

// startWatcher runs the watcher, with the search attributes the dev server registers.
func startWatcher(extra ...string) error {
	_, err := env.stack.StartProcess("watcher", filepath.Join(env.bin, "starter"), append(append([]string{"watch", "--search-attributes"}, commonArgs()...), extra...)...)
	return err
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// atBudget runs kube-controller-manager, and our worker and watcher, at another client budget
// until the test ends, then at the suite's again.
func atBudget(t *testing.T, qps, burst int) {
	t.Helper()
	restart := func(qps, burst int) error {
		env.qps, env.burst = qps, burst
		if err := env.stack.RestartControllerManager(float32(qps), burst); err != nil {
			return err
		}
		if env.builtin {
			return nil
		}
		env.stack.StopProcess("watcher")
		env.stack.StopProcess("worker")
		if err := startWorker(); err != nil {
			return err
		}
		return startWatcher()
	}
	suiteQPS, suiteBurst := env.qps, env.burst
	t.Cleanup(func() {
		if err := restart(suiteQPS, suiteBurst); err != nil {
			t.Errorf("restore the client budget %d/%d: %v", suiteQPS, suiteBurst, err)
		}
	})
	if err := restart(qps, burst); err != nil {
		t.Fatalf("client budget %d/%d: %v", qps, burst, err)
	}
}
