//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
)

// TestCodec: with --codec-key-file on the worker and the watcher, a Deployment's labels,
// annotations (kubernetes.io/change-cause among them) and images reach Temporal encrypted:
// `temporal workflow show` prints none of them, while with `starter codec-server` as its
// --codec-endpoint it prints them all, pod specs as keyed digests. The starter's commands decrypt with the same file, and
// fail without it; a bad key file stops the worker at start.
func TestCodec(t *testing.T) {
	if env.builtin {
		t.Skip("no worker with E2E_CONTROLLER=built-in")
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "codec.keys")
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, keyFile, "# e2e\ne2e-1="+base64.StdEncoding.EncodeToString(secret)+"\n")

	t.Run("bad key file stops the worker at start", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.keys")
		writeTestFile(t, bad, "e2e-1="+base64.StdEncoding.EncodeToString(secret[:16])+"\n")
		tests := []struct {
			name string
			give string
			want string
		}{
			{name: "wrong length", give: bad, want: `codec-key-file: codec key file ` + bad + `: line 1: key "e2e-1" is 16 bytes, want 32`},
			{name: "missing", give: filepath.Join(dir, "absent.keys"), want: "codec-key-file: read codec key file"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, bin := range [][]string{{"worker"}, {"starter", "watch"}} {
					args := append(bin[1:], isolatedArgs(t, "codec-none")...)
					p := startOurs(t, bin[0], append(args, "--codec-key-file", tt.give)...)
					code := p.wait(10 * time.Second)
					if code <= 0 || !strings.Contains(p.output(), tt.want) {
						t.Errorf("%s: exit code %d, output %q; want non-zero naming %q", strings.Join(bin, " "), code, p.output(), tt.want)
					}
				}
			})
		}
	})

	restart := func(extra ...string) error {
		env.stack.StopProcess("watcher")
		env.stack.StopProcess("worker")
		if err := startWorker(extra...); err != nil {
			return err
		}
		return startWatcher(extra...)
	}
	t.Cleanup(func() {
		if err := restart(); err != nil {
			t.Errorf("restore the suite's worker and watcher: %v", err)
		}
	})
	if err := restart("--codec-key-file", keyFile); err != nil {
		t.Fatalf("restart the worker and watcher with the codec: %v", err)
	}
	ns := newNamespace(t)
	const name = "web"
	id := contract.WorkflowID(ns, name)
	// The workflow's history is encrypted: end it before the suite's worker (no codec), which
	// cannot read it, comes back.
	t.Cleanup(func() {
		_ = env.tc.TerminateWorkflow(context.Background(), id, "", "TestCodec over")
	})

	// Values that must not be in the history in clear.
	var (
		labelValue      = "codec-label-7f3a"
		annotationValue = "codec-annotation-91c2"
		imageV1         = "registry.example/codec-image-a8b4:v1"
		imageV2         = "registry.example/codec-image-a8b4:v2"
		changeCause     = "kubectl set image deployment/web app=" + imageV2
	)
	d := newDeployment(ns, name, 2, imageV1)
	d.Labels = map[string]string{"team": labelValue}
	d.Annotations = map[string]string{"example.com/owner": annotationValue, "kubernetes.io/change-cause": "created with " + imageV1}
	create(t, d)
	waitComplete(t, ns, name)
	update(t, ns, name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = imageV2
		d.Annotations["kubernetes.io/change-cause"] = changeCause
	})
	got := waitComplete(t, ns, name)
	if img := got.Spec.Template.Spec.Containers[0].Image; img != imageV2 {
		t.Fatalf("image %s after the rollout, want %s", img, imageV2)
	}
	for _, rs := range replicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == imageV2 && *rs.Spec.Replicas != 2 {
			t.Errorf("new replicaset %s at %d replicas, want 2", rs.Name, *rs.Spec.Replicas)
		}
	}
	secrets := []string{labelValue, annotationValue, changeCause, imageV1, imageV2, "codec-image-a8b4"}

	// Without the codec: ciphertext only.
	plain := histories(t, id)
	for _, s := range secrets {
		if strings.Contains(plain, s) {
			t.Errorf("history without the codec endpoint holds %q in clear", s)
		}
	}
	if !strings.Contains(plain, "binary/encrypted") || !strings.Contains(plain, "e2e-1") {
		t.Errorf("history without the codec endpoint names no encrypted payload (binary/encrypted, key e2e-1)")
	}

	// With the codec server: everything back.
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	srv := startOurs(t, "starter", "codec-server", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--codec-key-file", keyFile,
		"--codec-cors-origin", "http://localhost:8233", "--log-format", "text")
	eventually(t, 20*time.Second, func() string {
		resp, err := http.Post(endpoint+"/decode", "application/json", strings.NewReader(`{"payloads":[]}`))
		if err != nil {
			return fmt.Sprintf("codec server: %v\n%s", err, srv.output())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("codec server: status %d", resp.StatusCode)
		}
		return ""
	})
	decoded := histories(t, id, "--codec-endpoint", endpoint)
	for _, s := range []string{labelValue, annotationValue, changeCause} {
		if !strings.Contains(decoded, s) {
			t.Errorf("history through the codec server lacks %q", s)
		}
	}
	// Pod specs are keyed digests, which cannot be checked against guessed specs.
	if !strings.Contains(decoded, "redacted.temporal-rollout.io/hmac-sha256:") || strings.Contains(decoded, "redacted.temporal-rollout.io/sha256:") {
		t.Errorf("history through the codec server: want pod specs as hmac-sha256 placeholders only")
	}

	// The starter's commands: with the key file they read the workflow; without it, they cannot.
	// status takes only the connection to Temporal (no Kubernetes flags), and prints JSON with -o json.
	starter := func(extra ...string) (string, error) {
		args := append([]string{"status", ns + "/" + name, "-o", "json", "--temporal-address", env.stack.TemporalAddress, "--log-format", "text"}, extra...)
		out, err := exec.Command(filepath.Join(env.bin, "starter"), args...).CombinedOutput()
		return string(out), err
	}
	out, err := starter("--codec-key-file", keyFile)
	if err != nil || !strings.Contains(out, "{") {
		t.Errorf("starter status with the key file: %v\n%s", err, out)
	}
	if out, err := starter(); err == nil {
		t.Errorf("starter status without the key file succeeded: %s", out)
	}
}

// histories is every run of the workflow, as `temporal workflow show -o json` prints it, with
// every base64 string in it decoded beside it: a payload printed as base64 JSON is found in
// clear as well as one printed as JSON.
func histories(t *testing.T, id string, extra ...string) string {
	t.Helper()
	list := temporalCLI(t, append([]string{"workflow", "list", "--query", fmt.Sprintf("WorkflowId = '%s'", id), "-o", "json"}, extra...)...)
	var runs []struct {
		Execution struct {
			RunID string `json:"runId"`
		} `json:"execution"`
	}
	if err := json.Unmarshal([]byte(list), &runs); err != nil {
		// One JSON object a line with some CLI versions.
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			var r struct {
				Execution struct {
					RunID string `json:"runId"`
				} `json:"execution"`
			}
			if json.Unmarshal([]byte(line), &r) == nil && r.Execution.RunID != "" {
				runs = append(runs, r)
			}
		}
	}
	if len(runs) == 0 {
		t.Fatalf("no run of %s listed:\n%s", id, list)
	}
	var b strings.Builder
	for _, r := range runs {
		out := temporalCLI(t, append([]string{"workflow", "show", "-w", id, "-r", r.Execution.RunID, "-o", "json"}, extra...)...)
		b.WriteString(out)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("workflow show %s: %v\n%s", id, err, out)
		}
		appendDecoded(&b, v)
	}
	t.Logf("workflow show %s %s: %d runs, %d bytes with base64 decoded", id, strings.Join(extra, " "), len(runs), b.Len())
	return b.String()
}

// appendDecoded writes every string of v that is base64, decoded.
func appendDecoded(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			appendDecoded(b, e)
		}
	case []any:
		for _, e := range v {
			appendDecoded(b, e)
		}
	case string:
		if raw, err := base64.StdEncoding.DecodeString(v); err == nil && len(raw) > 0 {
			b.WriteByte('\n')
			b.Write(bytes.ToValidUTF8(raw, nil))
		}
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
