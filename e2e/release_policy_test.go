//go:build e2e

package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/temporal-rollout/rollout/release"
)

// TestReleaseWorkerPolicyTwoSignedApprovals (issue 46): the suite's worker runs with a
// release policy (--release-policy) saying that releases are signed by alice, and that a
// wave changing the test's namespace needs two approvals signed by keys it lists for alice,
// carol and dave. alice starts a release whose file asks no approval, signed with her key:
// the wave waits for two. Refused: alice's own signed approval (the author), a look-alike
// "cаrol" (a Cyrillic а) with carol's key. carol approves, and the release is aborted; the
// same release started again (a new run of the name) refuses carol's signature from the
// first run (replayed). carol (signing with ssh-keygen alone, from --print-message) and dave
// (--sign-key) approve, and the wave changes the Deployment.
func TestReleaseWorkerPolicyTwoSignedApprovals(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("no ssh-keygen")
	}
	dir := t.TempDir()
	keys := map[string]string{} // name -> private key file
	var authors, signers string
	for _, name := range []string{"alice", "carol", "dave"} {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		block, err := ssh.MarshalPrivateKey(priv, name)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = filepath.Join(dir, name)
		if err := os.WriteFile(keys[name], pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		sp, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		line := name + " " + string(ssh.MarshalAuthorizedKey(sp))
		signers += line
		if name == "alice" {
			authors = line
		}
	}
	ns := newNamespace(t)
	policy, _ := json.Marshal(release.Policy{Authors: authors, Rules: []release.PolicyRule{{Namespace: ns, Approvers: 2, Signers: signers}}})
	policyFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		t.Fatal(err)
	}
	env.stack.StopProcess("worker")
	if err := startWorker("--release-policy", policyFile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.stack.StopProcess("worker")
		if err := startWorker(); err != nil {
			t.Errorf("restart the suite's worker: %v", err)
		}
	})

	create(t, newDeployment(ns, "web", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "web")
	name := "policy-" + ns[len(ns)-4:]
	id := release.WorkflowID(name)
	file := filepath.Join(dir, "release.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets: [{name: web, namespace: %s, names: [web]}]
waves: [{name: prod, targets: [web]}]
`, name, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() release.Status {
		t.Helper()
		if out, err := starterCmd(t, "release", "apply", "-f", file, "--identity", "alice@laptop", "--sign-key", keys["alice"]); err != nil {
			t.Fatalf("starter release apply --sign-key: %v\n%s", err, out)
		}
		recordHistoriesOf(t, id)
		return waitRelease(t, name, waitingFor(release.WaitingForApproval))
	}
	approve := func(who, identity string, extra ...string) (string, error) {
		return starterCmd(t, append([]string{"release", "approve", name, "--identity", identity, "--sign-key", keys[who]}, extra...)...)
	}

	st := start()
	if st.Author != "alice" || !strings.HasPrefix(st.AuthorProof, "signed with alice's key SHA256:") || st.Waves[0].ApprovalsNeeded != 2 || st.Run == "" ||
		!strings.HasPrefix(st.PolicySource, "file ") {
		t.Fatalf("status: author %q (%s), needs %d, run %q, policy %q; want alice signed, 2, a run, the file", st.Author, st.AuthorProof, st.Waves[0].ApprovalsNeeded, st.Run, st.PolicySource)
	}
	if out, err := approve("alice", "alice"); err == nil || !strings.Contains(out, "its author cannot approve it") {
		t.Errorf("alice's own approval: %v\n%s\nwant refused: the author", err, out)
	}
	if out, err := approve("carol", "c\u0430rol"); err == nil || !strings.Contains(out, "mixes scripts") {
		t.Errorf("a look-alike carol: %v\n%s\nwant refused: mixed scripts", err, out)
	}
	if out, err := approve("carol", "carol"); err != nil {
		t.Fatalf("carol's approval: %v\n%s", err, out)
	}
	first := waitRelease(t, name, func(st release.Status) string {
		if len(st.Waves[0].Approvals) != 1 {
			return fmt.Sprintf("%d approvals", len(st.Waves[0].Approvals))
		}
		return ""
	})
	carolFirst := first.Waves[0].Approvals[0]
	if out, err := starterCmd(t, "release", "abort", name, "--reason", "start again"); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseFailed {
		t.Fatalf("first run: %+v, want Failed", r)
	}

	// The same release again: a new run, whose run value differs.
	st = start()
	if st.Run == first.Run {
		t.Fatalf("run value %q again", st.Run)
	}
	replay, _ := json.Marshal(release.ApproveRequest{Approver: "carol", Signature: carolFirst.Signature, NotAfter: carolFirst.NotAfter})
	out, err := temporalCLIErr("workflow", "update", "execute", "--workflow-id", id, "--name", release.UpdateApprove, "--input", string(replay))
	if err == nil || !strings.Contains(out, "did not sign this approval") {
		t.Errorf("carol's signature from the first run: %v\n%s\nwant refused: replayed", err, out)
	}

	// carol with OpenSSH alone.
	msg, err := starterCmd(t, "release", "approve", name, "--identity", "carol", "--print-message")
	if err != nil {
		t.Fatalf("--print-message: %v\n%s", err, msg)
	}
	// The output holds stderr (what is approved, not-after) and stdout (the message): the
	// message is the first line with each of its prefixes, in its order.
	var message []string
	notAfter := ""
	for _, prefix := range []string{"temporal-rollout approval v2", "release ", "wave ", "run ", "approver ", "not-after ", "digest "} {
		for _, line := range strings.Split(msg, "\n") {
			if strings.HasPrefix(line, prefix) {
				message = append(message, line)
				if prefix == "not-after " {
					notAfter = strings.TrimPrefix(line, prefix)
				}
				break
			}
		}
	}
	msgFile := filepath.Join(dir, "carol.msg")
	text := strings.Join(message, "\n") + "\n"
	if err := os.WriteFile(msgFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(keygen, "-Y", "sign", "-f", keys["carol"], "-n", release.SignatureNamespace, msgFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	if out, err := starterCmd(t, "release", "approve", name, "--identity", "carol", "--signature", msgFile+".sig", "--not-after", notAfter); err != nil {
		t.Fatalf("carol's ssh-keygen approval: %v\n%s\nmessage:\n%s", err, out, text)
	}
	if out, err := approve("dave", "dave@bastion"); err != nil {
		t.Fatalf("dave's approval: %v\n%s", err, out)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("second run: %+v, want Succeeded", r)
	}
	st, err = queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	if a := st.Waves[0].Approvals; len(a) != 2 || a[0].Principal != "carol" || a[1].Principal != "dave" || !a[0].Signed || !a[1].Signed {
		t.Errorf("approvals %+v, want carol and dave, signed", a)
	}
	if got := imagesOf(t, env.kube, getDeployment(t, ns, "web")); got != "nginx:1.25=0 nginx:1.26=2" {
		t.Errorf("web's ReplicaSets %s, want nginx:1.25=0 nginx:1.26=2", got)
	}
}
