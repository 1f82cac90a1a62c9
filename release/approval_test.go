package release

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestNormalizeApprover(t *testing.T) {
	tests := []struct{ give, want string }{
		{"alice@laptop", "alice"},
		{" Alice@bastion ", "alice"},
		{"ALICE", "alice"},
		{"alice@example.com", "alice"},
		{"@laptop", ""},
		// Compatibility forms and case folding (NFKC, cases.Fold): one person.
		{"ａｌｉｃｅ", "alice"},        // fullwidth
		{"ＡＬＩＣＥ＠laptop", "alice"}, // fullwidth capitals and at sign
		{"ALİCE", "alice"},        // a dotted capital I folds to i and a dot above, which is i's own
		{"ali\u0307ce", "alice"},
		{"Straße", "strasse"},          // ß folds to ss
		{"al\u200bice", "alice"},       // invisible characters drop out (CheckApprover refuses them)
		{"\u00adalice\ufe0f", "alice"}, // soft hyphen, variation selector
		{"\u0430lice", "\u0430lice"},   // a Cyrillic а is another letter (CheckApprover refuses the name)
		{"алиса@laptop", "алиса"},      // a Cyrillic name
	}
	for _, tt := range tests {
		if got := NormalizeApprover(tt.give); got != tt.want {
			t.Errorf("NormalizeApprover(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestCheckApprover: names that look like another person's are refused, saying why; the
// others are NormalizeApprover's name.
func TestCheckApprover(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr string // "": accepted
	}{
		{"alice@laptop", "alice", ""},
		{"ａｌｉｃｅ", "alice", ""},
		{"Alice.Smith-2@bastion", "alice.smith-2", ""},
		{"алиса", "алиса", ""},
		{"山田taro", "山田taro", ""},
		{"やまだ太郎", "やまだ太郎", ""},
		{"josé", "josé", ""},
		{"jose\u0301", "josé", ""}, // a combining accent goes with any script; NFKC composes it
		{"alice@bästion.example", "alice", ""},
		{"\u0430lice", "", `approver "\u0430lice" mixes scripts (Cyrillic, Latin): a name is written in one (a look-alike letter from another script makes it another name)`},
		{"\u03b1lice@laptop", "", `approver "\u03b1lice@laptop" mixes scripts (Greek, Latin)`},
		{"ａ\u0430lice", "", "mixes scripts (Cyrillic, Latin)"},
		{"al\u200bice", "", `approver "al\u200bice" holds U+200B, an invisible or format character: spell the name without it`},
		{"alice\u200d", "", "holds U+200D"},
		{"\u202ealice", "", "holds U+202E"},
		{"ali\u00adce", "", "holds U+00AD"},
		{"alice\ufe0f", "", "holds U+FE0F"},
		{"al\tice", "", "holds U+0009"},
		{"alice\u3164", "", "holds U+3164"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := CheckApprover(tt.give)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckApprover(%+q) = %v, want %q", tt.give, err, tt.want)
			case tt.wantErr == "" && got != tt.want:
				t.Errorf("CheckApprover(%+q) = %q, want %q", tt.give, got, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckApprover(%+q) = %q, %v, want an error containing %q", tt.give, got, err, tt.wantErr)
			}
		})
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
	msg := ApprovalBinding{Release: "web-1-27", Wave: "canary", Run: "run-1", Approver: "alice", NotAfter: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Digest: ChangeDigest(Change{Images: map[string]string{"app": "nginx:1.27"}})}.Message()
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

	// A release's start signature: ssh-keygen -Y sign -n temporal-rollout-release.
	spec := Spec{Name: "web-1-27", Author: "alice@laptop"}
	relFile := filepath.Join(dir, "release")
	if err := os.WriteFile(relFile, ReleaseMessage(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(keygen, "-Y", "sign", "-f", keyFile, "-n", ReleaseSignatureNamespace, relFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	rel, err := os.ReadFile(relFile + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	spec.AuthorSignature = string(rel)
	if _, _, err := proveAuthor(&spec, &Policy{Authors: list}); err != nil {
		t.Errorf("prove the author by ssh-keygen's start signature: %v", err)
	}
	if err := verifyApproval(string(rel), ReleaseMessage(spec), "alice", signers); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("a start signature as an approval: %v, want refused for its namespace", err)
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
