package release

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestNormalizeApprover(t *testing.T) {
	tests := []struct{ give, want string }{
		{"alice@laptop", "alice"},
		{" Alice@bastion ", "alice"},
		{"ALICE", "alice"},
		{"alice@example.com", "alice"},
		{"@laptop", ""},
	}
	for _, tt := range tests {
		if got := NormalizeApprover(tt.give); got != tt.want {
			t.Errorf("NormalizeApprover(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestChangeDigestCanonical: the same patch spelled with other key order and blanks has the
// same digest; another change has another.
func TestChangeDigestCanonical(t *testing.T) {
	a := ChangeDigest(Change{Patch: []byte(`{"metadata":{"labels":{"x":"1","y":"2"}}}`)})
	b := ChangeDigest(Change{Patch: []byte(`{ "metadata": { "labels": { "y": "2", "x": "1" } } }`)})
	c := ChangeDigest(Change{Images: map[string]string{"app": "nginx:1.27"}})
	if a != b || a == c {
		t.Errorf("digests %s %s %s: want the first two equal, the third different", a, b, c)
	}
}

// TestSignaturesInteroperateWithSSHKeygen: a signature SignApproval makes verifies with
// `ssh-keygen -Y verify` against the same allowed-signers list, and one `ssh-keygen -Y sign`
// makes verifies here, so approvals can be made and audited with OpenSSH alone.
func TestSignaturesInteroperateWithSSHKeygen(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("no ssh-keygen")
	}
	dir := t.TempDir()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "alice")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	list := "alice@example.com " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	signersFile := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signersFile, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := ApprovalMessage("web-1-27", "canary", ChangeDigest(Change{Images: map[string]string{"app": "nginx:1.27"}}))
	msgFile := filepath.Join(dir, "msg")
	if err := os.WriteFile(msgFile, msg, 0o600); err != nil {
		t.Fatal(err)
	}

	ours, err := SignApproval(signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	sigFile := filepath.Join(dir, "ours.sig")
	if err := os.WriteFile(sigFile, []byte(ours), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(keygen, "-Y", "verify", "-f", signersFile, "-I", "alice@example.com", "-n", SignatureNamespace, "-s", sigFile)
	cmd.Stdin = bytes.NewReader(msg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("ssh-keygen -Y verify of our signature: %v: %s", err, out)
	}

	cmd = exec.Command(keygen, "-Y", "sign", "-f", keyFile, "-n", SignatureNamespace, msgFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	theirs, err := os.ReadFile(msgFile + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	signers, err := ParseAllowedSigners(list)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyApproval(string(theirs), msg, "alice", signers); err != nil {
		t.Errorf("verify ssh-keygen's signature: %v", err)
	}
}

func TestParseAllowedSignersRefuses(t *testing.T) {
	key := string(ssh.MarshalAuthorizedKey(testSigner(t, 1).PublicKey()))
	tests := []struct{ name, give, want string }{
		{"pattern", "*@example.com " + key, `line 1: principal pattern "*@example.com": patterns are not supported, name each principal`},
		{"cert-authority", "alice cert-authority " + key, `line 1: principals alice: option "cert-authority" is not supported (only namespaces)`},
		{"other namespace only", `alice namespaces="git" ` + key, "no signer for namespace temporal-rollout-approval"},
		{"bad key", "alice ssh-ed25519 AAAA", "line 1: principals alice: key: ssh: no key found; last parsing error for ignored line: ssh: short read"},
	}
	for _, tt := range tests {
		if _, err := ParseAllowedSigners(tt.give); err == nil || err.Error() != tt.want {
			t.Errorf("%s: error = %v, want %q", tt.name, err, tt.want)
		}
	}
}
