//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// binaries are the two long-running commands: the worker, and the starter's watch.
var binaries = []struct {
	name string
	args []string
}{
	{"worker", nil},
	{"starter", []string{"watch"}},
}

// ourProcess runs one of our binaries outside the stack's process table, with its own task
// queue and an empty namespace to watch, so that it never competes with the suite's worker and
// watcher. The test's end kills it if it is still running.
type ourProcess struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

type lockedWriter struct {
	p *ourProcess
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

func startOurs(t *testing.T, bin string, args ...string) *ourProcess {
	t.Helper()
	p := &ourProcess{cmd: exec.Command(filepath.Join(env.bin, bin), args...), done: make(chan struct{})}
	p.cmd.Stdout = lockedWriter{p}
	p.cmd.Stderr = lockedWriter{p}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *ourProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// wait waits up to within for the process to exit and returns its exit code and how long
// it ran; -1 if it is still running.
func (p *ourProcess) wait(within time.Duration) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		return -1
	}
}

// lastLine is the last non-empty line of the output: the one naming the failure.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func isolatedArgs(t *testing.T, ns string) []string {
	return []string{"--kubeconfig", env.workerKubeconfig, "--temporal-address", env.stack.TemporalAddress,
		"--log-format", "text", "--task-queue", "startup-" + ns, "--watch-namespace", ns, "--metrics-address", ""}
}

// TestStartupFailures: every start-up failure of the worker and of `starter watch` exits
// non-zero within seconds, its last line naming what failed: the metrics address taken, a
// kubeconfig that does not exist, an API server or a Temporal server that does not answer
// within --startup-timeout (with progress logged while it waits), and credentials the API
// server refuses.
func TestStartupFailures(t *testing.T) {
	ns := newNamespace(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	closedPort, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	deadAPI := filepath.Join(t.TempDir(), "dead.kubeconfig")
	writeKubeconfig(t, deadAPI, fmt.Sprintf("https://127.0.0.1:%d", closedPort), "x")
	badToken := filepath.Join(t.TempDir(), "badtoken.kubeconfig")
	writeKubeconfig(t, badToken, env.stack.APIServer, "not-a-token")

	cases := []struct {
		name     string
		override []string
		within   time.Duration
		want     []string // in the last line
		progress string   // logged while waiting
	}{
		{name: "metrics address taken", override: []string{"--metrics-address", taken.Addr().String()}, within: 10 * time.Second,
			want: []string{"listen on " + taken.Addr().String() + " for metrics", "address already in use"}},
		{name: "kubeconfig missing", override: []string{"--kubeconfig", "/nonexistent/kubeconfig"}, within: 5 * time.Second,
			want: []string{"kubeconfig: file /nonexistent/kubeconfig", "no such file"}},
		{name: "API server unreachable", override: []string{"--kubeconfig", deadAPI, "--startup-timeout", "3s"}, within: 10 * time.Second,
			want:     []string{fmt.Sprintf("the Kubernetes API server at https://127.0.0.1:%d: still failing after 3s", closedPort), "connection refused"},
			progress: "Waiting for the Kubernetes API server"},
		{name: "API server refuses the credentials", override: []string{"--kubeconfig", badToken}, within: 5 * time.Second,
			want: []string{"the Kubernetes API server at " + env.stack.APIServer, "Unauthorized"}},
		{name: "Temporal unreachable", override: []string{"--temporal-address", fmt.Sprintf("127.0.0.1:%d", closedPort), "--startup-timeout", "3s"}, within: 10 * time.Second,
			want:     []string{fmt.Sprintf("Temporal at 127.0.0.1:%d: still failing after 3s", closedPort)},
			progress: "Waiting for Temporal"},
	}
	for _, b := range binaries {
		for _, tc := range cases {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				// Later flags win: the override replaces the isolated defaults.
				args := append(append(append([]string{}, b.args...), isolatedArgs(t, ns)...), tc.override...)
				start := time.Now()
				p := startOurs(t, b.name, args...)
				code := p.wait(tc.within)
				took := time.Since(start)
				out := p.output()
				if code == -1 {
					t.Fatalf("still running after %s; output:\n%s", tc.within, out)
				}
				last := lastLine(out)
				t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), last)
				if code == 0 {
					t.Errorf("exit code 0, want non-zero")
				}
				prefix := b.name + ": "
				if b.name == "starter" {
					prefix = "starter: "
				}
				if !strings.HasPrefix(last, prefix) {
					t.Errorf("last line %q does not start with %q", last, prefix)
				}
				for _, w := range tc.want {
					if !strings.Contains(last, w) {
						t.Errorf("last line %q does not name %q", last, w)
					}
				}
				if tc.progress != "" && !strings.Contains(out, tc.progress) {
					t.Errorf("no progress (%q) logged while waiting:\n%s", tc.progress, out)
				}
			})
		}
	}
}

// TestDefaultMetricsAddressesDiffer: the worker and the watcher started with their defaults
// on one host do not fight over a port. Both are started with only the flags they need; each
// serves /healthz on its own default port. The defaults (:9090, :9091) bind every interface, so
// the test skips when either port is already taken on this machine.
func TestDefaultMetricsAddressesDiffer(t *testing.T) {
	for _, port := range []int{9090, 9091} {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			t.Skipf("port %d is taken on this machine: %v", port, err)
		}
		l.Close()
	}
	ns := newNamespace(t)
	base := []string{"--kubeconfig", env.workerKubeconfig, "--temporal-address", env.stack.TemporalAddress,
		"--log-format", "text", "--task-queue", "startup-" + ns, "--watch-namespace", ns}
	worker := startOurs(t, "worker", base...)
	watcher := startOurs(t, "starter", append([]string{"watch"}, base...)...)
	for _, port := range []int{9090, 9091} {
		eventually(t, 30*time.Second, func() string {
			if body, code := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); code != 200 {
				return fmt.Sprintf(":%d/readyz = %d %s", port, code, body)
			}
			return ""
		})
	}
	for _, p := range []*ourProcess{worker, watcher} {
		if code := p.wait(0); code != -1 {
			t.Errorf("%s exited (%d):\n%s", p.cmd.Path, code, p.output())
		}
	}
}

// TestShutdownOnSIGTERM: a running worker and watcher stop on SIGTERM within the shutdown
// bound, exit 0, and say so.
func TestShutdownOnSIGTERM(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 2, "nginx:1.25", rolling("1", "0")))
	for _, b := range binaries {
		t.Run(b.name, func(t *testing.T) {
			port, err := stack.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			args := append(append(append([]string{}, b.args...), isolatedArgs(t, ns)...), "--metrics-address", fmt.Sprintf("127.0.0.1:%d", port))
			p := startOurs(t, b.name, args...)
			eventually(t, 30*time.Second, func() string {
				if body, code := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); code != 200 {
					return fmt.Sprintf("readyz = %d %s", code, body)
				}
				return ""
			})
			start := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code := p.wait(20 * time.Second)
			took := time.Since(start)
			out := p.output()
			if code != 0 {
				t.Fatalf("exit %d after %s, want 0 within the 15s shutdown bound; output:\n%s", code, took, out)
			}
			t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
			if want := map[string]string{"worker": "Worker stopped", "starter": "Watcher stopped"}[b.name]; !strings.Contains(out, want) {
				t.Errorf("no %q in the output:\n%s", want, out)
			}
		})
	}
}

func writeKubeconfig(t *testing.T, path, server, token string) {
	t.Helper()
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", server, token)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownMidRollout: the suite's worker, SIGTERMed while a 20-replica rollout is under way
// (syncs and AwaitChange activities running), stops within the shutdown bound and exits 0; a new
// worker finishes the rollout at the right revision.
func TestShutdownMidRollout(t *testing.T) {
	if env.builtin {
		t.Skip("our worker is not running")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 20, "nginx:1.25", rolling("2", "0")))
	waitComplete(t, ns, "web")
	old := replicaSets(t, ns)[0].Name
	setImage(t, ns, "web", "nginx:1.26")
	eventually(t, 30*time.Second, func() string {
		d := getDeployment(t, ns, "web")
		if d.Status.UpdatedReplicas < 2 {
			return fmt.Sprintf("updated %d, want the rollout under way", d.Status.UpdatedReplicas)
		}
		return ""
	})
	p := env.stack.Proc("worker")
	start := time.Now()
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	eventually(t, 20*time.Second, func() string {
		if ok, err := p.Exited(); !ok {
			return "worker still running"
		} else {
			exitErr = err
		}
		return ""
	})
	took := time.Since(start)
	t.Logf("worker stopped %s after SIGTERM mid-rollout (exit: %v)", took.Round(time.Millisecond), exitErr)
	if exitErr != nil {
		t.Errorf("worker exit after SIGTERM: %v, want 0; log tail:\n%s", exitErr, p.Tail(3000))
	}
	if !strings.Contains(p.Tail(3000), "Worker stopped") {
		t.Errorf("no \"Worker stopped\" in the log tail:\n%s", p.Tail(3000))
	}
	env.stack.StopProcess("worker")
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	d := waitComplete(t, ns, "web")
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
		t.Errorf("revision %s after the restart, want 2", got)
	}
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:20 %s:r1:0", expectedRSName(d), old); got != want {
		t.Errorf("replicasets = %s, want %s", got, want)
	}
}
