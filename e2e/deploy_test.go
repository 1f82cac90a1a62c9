//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// TestDeployManifests applies deploy/ to the real apiserver, checks the ServiceAccount's
// least-privilege RBAC, then runs our worker as the manifest does (running the watcher too:
// --watch) with nothing but that ServiceAccount's token through a RollingUpdate and a Recreate
// rollout, and reads its /metrics.
func TestDeployManifests(t *testing.T) {
	ctx := context.Background()
	out := kubectl(t, "apply", "--server-side", "-k", "../deploy")
	for _, want := range []string{"serviceaccount/temporal-rollout", "clusterrole.rbac.authorization.k8s.io/temporal-rollout",
		"statefulset.apps/temporal-rollout-worker", "configmap/temporal-rollout", "job.batch/temporal-rollout-search-attributes"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "temporal-rollout-watcher") {
		t.Errorf("apply output has a watcher of its own; the workers run it (--watch):\n%s", out)
	}
	t.Cleanup(func() {
		_, _ = runKubectl("delete", "-k", "../deploy", "--wait=false")
		restoreWorkerRBAC(t)
	})
	sts, err := env.kube.AppsV1().StatefulSets("temporal-rollout").Get(ctx, "temporal-rollout-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("worker StatefulSet: %v", err)
	}
	if args := strings.Join(sts.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--watch") {
		t.Errorf("worker args %q lack --watch (the run below uses it)", args)
	}

	sa := "system:serviceaccount:temporal-rollout:temporal-rollout"
	for _, tt := range []struct {
		verb, resource string
		want           string
	}{
		{"update", "deployments.apps", "yes"},
		{"update", "deployments.apps/status", "yes"},
		{"delete", "replicasets.apps", "yes"},
		{"watch", "pods", "yes"},
		{"create", "events", "yes"},
		{"list", "events", "yes"}, // a release's wait for a rollout
		{"update", "events", "no"},
		{"patch", "services", "no"},
		{"list", "jobs.batch", "no"},
		{"delete", "deployments.apps", "no"},
		{"create", "pods", "no"},
		{"get", "secrets", "no"},
		{"update", "statefulsets.apps", "no"},
	} {
		got, _ := runKubectl("auth", "can-i", tt.verb, tt.resource, "--as", sa, "-A")
		if strings.TrimSpace(got) != tt.want {
			t.Errorf("can-i %s %s as the ServiceAccount = %q, want %s", tt.verb, tt.resource, strings.TrimSpace(got), tt.want)
		}
	}

	// Run ours on the ServiceAccount's token alone.
	kc := saKubeconfig(t)
	restart := stopOurs(t)
	defer func() {
		env.stack.StopProcess("worker")
		restart()
	}()
	wport, _ := stack.FreePort()
	args := []string{"--kubeconfig", kc, "--temporal-address", env.stack.TemporalAddress, "--log-format", "json"}
	if _, err := env.stack.StartProcess("worker", filepath.Join(env.bin, "worker"), append(args, "--metrics-address", fmt.Sprintf("127.0.0.1:%d", wport), "--watch", "--search-attributes")...); err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0")))
	create(t, newDeployment(ns, "db", 2, "postgres:16", recreate()))
	waitComplete(t, ns, "web")
	waitComplete(t, ns, "db")
	setImage(t, ns, "web", "nginx:1.26")
	setImage(t, ns, "db", "postgres:17")
	for _, name := range []string{"web", "db"} {
		d := waitComplete(t, ns, name)
		if got, want := rsSummary(replicaSets(t, ns)), ""; got == want {
			t.Fatalf("no replicasets")
		}
		if d.Annotations["deployment.kubernetes.io/revision"] != "2" {
			t.Errorf("%s revision = %s, want 2", name, d.Annotations["deployment.kubernetes.io/revision"])
		}
	}
	waitEvent(t, ns, "web", "ScalingReplicaSet: Scaled down replica set")

	base := fmt.Sprintf("http://127.0.0.1:%d", wport)
	for _, path := range []string{"/healthz", "/readyz"} {
		if body, code := httpGet(t, base+path); code != 200 {
			t.Errorf("GET %s = %d %s", path, code, body)
		}
	}
	var metrics string
	eventually(t, 30*time.Second, func() string {
		metrics, _ = httpGet(t, base+"/metrics")
		for _, want := range []string{
			"temporal_workflow_continue_as_new_total", // SDK metric
			"temporal_local_activity_total",           // SDK metric
			`rollout_apiserver_writes_total{code="ok",resource="replicasets",verb="update"}`,
			`rollout_apiserver_writes_total{code="ok",resource="replicasets",verb="create"}`,
			`rollout_apiserver_writes_total{code="ok",resource="deployments/status",verb="update"}`,
			"rollout_rollouts_started",
			`rollout_rollouts_completed_total{`,
			`outcome="Complete"`,
			"rollout_duration",
		} {
			if !strings.Contains(metrics, want) {
				return "worker /metrics lacks " + want + "; it has: " + metricNames(metrics)
			}
		}
		return ""
	})

	// JSON logs carry the namespace and deployment keys.
	logs, err := os.ReadFile(env.stack.Proc("worker").LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), `"namespace":"`+ns+`"`) || !strings.Contains(string(logs), `"deployment":"web"`) {
		t.Errorf("worker JSON logs lack namespace/deployment keys for %s/web", ns)
	}

	// The workflow list filters by Kubernetes namespace, Deployment name and outcome.
	eventually(t, 30*time.Second, func() string {
		out, err := temporalCLIErr("workflow", "list", "--query", fmt.Sprintf(`K8sNamespace = %q AND K8sDeployment = "web" AND RolloutOutcome = "Complete"`, ns), "-o", "json")
		if err != nil || !strings.Contains(out, workflowID(ns, "web")) || strings.Contains(out, workflowID(ns, "db")) {
			return "filtered list: " + out
		}
		return ""
	})
}

// saKubeconfig writes a kubeconfig holding nothing but a token of deploy/'s ServiceAccount.
func saKubeconfig(t *testing.T) string {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, "create", "token", "temporal-rollout", "-n", "temporal-rollout", "--duration", "1h"))
	kc := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    insecure-skip-tls-verify: true\nusers:\n- name: sa\n  user:\n    token: %s\ncontexts:\n- name: c\n  context: {cluster: c, user: sa}\ncurrent-context: c\n", env.stack.APIServer, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

func runKubectl(args ...string) (string, error) {
	cmd := execCommand(stack.ToolPath(env.tools, "kubectl"), append([]string{"--kubeconfig", env.stack.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

func metricNames(text string) string {
	seen := map[string]bool{}
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if !seen[name] && (strings.HasPrefix(name, "temporal_") || strings.HasPrefix(name, "rollout_")) {
			seen[name] = true
			names = append(names, name)
		}
	}
	return strings.Join(names, " ")
}
