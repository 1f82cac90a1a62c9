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
	s, err := stack.Start(ctx, stack.Options{
		Dir: filepath.Join(dir, "stack"), Tools: env.tools, Nodes: 3, Headless: true,
		PodReadyDelay: 300 * time.Millisecond, PodReadyJitter: 400 * time.Millisecond,
		Progress: os.Stderr,
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
	if err := startWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := startWatcher(); err != nil {
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
	return []string{"--kubeconfig", env.stack.Kubeconfig, "--temporal-address", env.stack.TemporalAddress,
		"--log-format", "text", "--metrics-address", ""}
}

func startWorker(extra ...string) error {
	_, err := env.stack.StartProcess("worker", filepath.Join(env.bin, "worker"), append(commonArgs(), extra...)...)
	return err
}

// startWatcher runs the watcher with signals paced at most 2s apart (8s by default), so the
// many short rollouts here do not wait on pacing meant for long ones.
func startWatcher() error {
	_, err := env.stack.StartProcess("watcher", filepath.Join(env.bin, "starter"), append([]string{"watch", "--search-attributes"}, commonArgs()...)...)
	return err
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
