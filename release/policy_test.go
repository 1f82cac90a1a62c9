package release

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/ssh"

	"github.com/temporal-rollout/rollout/k8s"
)

// Issue 46: the approval policy is the worker's, the author is proven, and a signature is
// bound to what it approves.

// signerLine is an allowed-signers line giving principal the key of s.
func signerLine(principal string, s ssh.Signer) string {
	return principal + " " + string(ssh.MarshalAuthorizedKey(s.PublicKey()))
}

// updateFn is update with its payload made when it is sent (a signature over the run's
// values, read from the status then).
func updateFn(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, payload func() any) *updateResult {
	got := &updateResult{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, fmt.Sprintf("%s-%s", name, d), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { got.rejected = err },
			OnComplete: func(v any, err error) {
				got.done, got.err = true, err
				if st, ok := v.(Status); ok {
					got.status = st
				}
			},
		}, payload())
	}, d)
	return got
}

// signed is an approval of the waiting wave by approver with key s, its binding changed by
// mutate (nil: as the status says), valid for an hour from the workflow's clock.
func signed(t *testing.T, env *testsuite.TestWorkflowEnvironment, s ssh.Signer, approver string, mutate func(*ApprovalBinding)) func() any {
	return func() any {
		st := query(t, env)
		ws := st.Waves[st.Wave-1]
		b := ApprovalBinding{Release: st.Name, Wave: ws.Name, Run: st.Run, Approver: NormalizeApprover(approver), NotAfter: env.Now().Add(time.Hour), Digest: ws.Digest}
		if mutate != nil {
			mutate(&b)
		}
		sig, err := SignApproval(s, b.Message())
		if err != nil {
			t.Error(err)
		}
		notAfter := b.NotAfter
		return ApproveRequest{Approver: approver, Signature: sig, NotAfter: &notAfter}
	}
}

// TestWorkerPolicyGatesTheWave (defects 1, 3): the worker's policy asks two signed approvals
// from carol, dave and alice (the author) for namespace shop; the release file asks none and
// lists the author's own two keys as signers "alice" and "bob". Refused, each with its
// reason: the author's key under the name bob (the policy does not list it), the author's own
// listed key, a look-alike of carol, a signature for another run, one for the wave with other
// targets and no bake (another spec), one whose not-after passed, carol twice. carol and dave
// then approve, and the wave is applied after dave. With the change off (a run begun before
// it) the release file's two keys approve the wave at once.
func TestWorkerPolicyGatesTheWave(t *testing.T) {
	alice, alice2, carol, dave := testSigner(t, 1), testSigner(t, 2), testSigner(t, 3), testSigner(t, 4)
	policy := &Policy{Unsigned: true, Groups: map[string][]string{"sre": {"carol", "dave", "alice"}},
		Rules: []PolicyRule{{Namespace: "shop", Approvers: 2, From: []string{"sre"},
			Signers: signerLine("carol", carol) + signerLine("dave", dave) + signerLine("alice", alice)}}}
	spec := oneWaveOfThree(t, func(s *Spec) {
		s.Author = "alice@laptop"
		s.Waves[0].Bake = k8s.Duration(30 * time.Minute)
	})
	own := func(s *Spec) {
		s.Waves[0].Approval = &Approval{Signers: signerLine("alice", alice) + signerLine("bob", alice2)}
	}
	t.Run("worker policy", func(t *testing.T) {
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		f.policy = policy
		other := spec
		other.Waves = append([]Wave(nil), spec.Waves...)
		other.Waves[0].Bake = 0
		got := map[string]*updateResult{
			"bob is the author's key": updateFn(env, 1*time.Minute, UpdateApprove, signed(t, env, alice2, "bob", nil)),
			"author's own key":        updateFn(env, 2*time.Minute, UpdateApprove, signed(t, env, alice, "alice", nil)),
			"look-alike":              updateFn(env, 3*time.Minute, UpdateApprove, signed(t, env, carol, "c\u0430rol", nil)),
			"another run":             updateFn(env, 4*time.Minute, UpdateApprove, signed(t, env, carol, "carol", func(b *ApprovalBinding) { b.Run = "an-earlier-run" })),
			"another spec": updateFn(env, 5*time.Minute, UpdateApprove, signed(t, env, carol, "carol", func(b *ApprovalBinding) {
				b.Digest = WaveDigest(other, 0, []TargetStatus{{Namespace: "shop", Name: "a", Wave: "only"}}, *policy)
			})),
			"expired":  updateFn(env, 6*time.Minute, UpdateApprove, signed(t, env, carol, "carol", func(b *ApprovalBinding) { b.NotAfter = env.Now().Add(-time.Second) })),
			"carol":    updateFn(env, 7*time.Minute, UpdateApprove, signed(t, env, carol, "carol@bastion", nil)),
			"carol 2":  updateFn(env, 8*time.Minute, UpdateApprove, signed(t, env, carol, "Carol", nil)),
			"dave":     updateFn(env, 9*time.Minute, UpdateApprove, signed(t, env, dave, "dave", nil)),
			"unsigned": update(env, 30*time.Second, UpdateApprove, ApproveRequest{Approver: "dave"}),
		}
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		if r := result(t, env); r.Phase != PhaseSucceeded {
			t.Fatalf("result = %+v", r)
		}
		fp := func(s ssh.Signer) string { return ssh.FingerprintSHA256(s.PublicKey()) }
		tests := []struct {
			give string
			want string // prefix of the rejection; "" accepted
		}{
			{"unsigned", "wave 1 (only) takes signed approvals only (the worker's policy or approval.signers)"},
			{"bob is the author's key", "bob's signed approval of wave 1 (only) rejected: forged: signed with key " + fp(alice2) + ", which the worker's policy does not list for bob"},
			{"author's own key", "alice started the release (as alice@laptop, unsigned): its author cannot approve it"},
			{"look-alike", `approver "c\u0430rol" mixes scripts (Cyrillic, Latin)`},
			{"another run", "carol's signed approval of wave 1 (only) rejected: carol's key " + fp(carol) + " did not sign this approval"},
			{"another spec", "carol's signed approval of wave 1 (only) rejected: carol's key " + fp(carol) + " did not sign this approval"},
			{"expired", "carol's signed approval of wave 1 (only) expired at "},
			{"carol", ""},
			{"carol 2", "carol already approved wave 1 (only) (as carol@bastion); it needs 2 distinct approvers"},
			{"dave", ""},
		}
		for _, tt := range tests {
			u := got[tt.give]
			switch {
			case tt.want == "" && u.rejected != nil:
				t.Errorf("%s: rejected %v, want accepted", tt.give, u.rejected)
			case tt.want != "" && (u.rejected == nil || !strings.HasPrefix(u.rejected.Error(), tt.want)):
				t.Errorf("%s: rejected = %v\nwant %s...", tt.give, u.rejected, tt.want)
			}
		}
		st := query(t, env)
		if a := st.Waves[0].Approvals; len(a) != 2 || a[0].Principal != "carol" || a[1].Principal != "dave" || !a[0].Signed || !a[1].Signed || a[0].NotAfter == nil {
			t.Errorf("approvals %+v, want carol and dave, signed", a)
		}
		if st.Waves[0].ApprovalsNeeded != 2 || st.Author != "alice" || st.AuthorProof != "unsigned" || st.Run != "default-test-run-id" {
			t.Errorf("needed %d, author %q (%s), run %q: want 2, alice (unsigned), default-test-run-id", st.Waves[0].ApprovalsNeeded, st.Author, st.AuthorProof, st.Run)
		}
		if st.Policy == nil || st.PolicyDigest != policy.Digest() {
			t.Errorf("status policy %v (%s), want the worker's (%s)", st.Policy, st.PolicyDigest, policy.Digest())
		}
		if want := WaveDigest(spec, 0, st.Targets, *policy); st.Waves[0].Digest != want {
			t.Errorf("wave digest %s, want %s", st.Waves[0].Digest, want)
		}
		equalLines(t, "wave", f.lines("apply"), []string{"9m0s apply /shop/a nginx:1.27", "9m0s apply /shop/b nginx:1.27", "9m0s apply /shop/c nginx:1.27"})
	})
	t.Run("worker policy, the author's keys in the file", func(t *testing.T) {
		spec := spec
		own(&spec)
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		f.policy = &Policy{Unsigned: true}
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		var appErr *temporal.ApplicationError
		if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != ErrInvalid || !strings.Contains(appErr.Message(), "a release file cannot add keys") {
			t.Fatalf("error = %v, want InvalidRelease: a release file cannot add keys", err)
		}
		equalLines(t, "applies", f.lines("apply"), nil)
	})
	t.Run("run from before the change", func(t *testing.T) {
		spec := spec
		own(&spec)
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		env.OnGetVersion(changeWorkerPolicy, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		self := func(s ssh.Signer, name string) func() any {
			return func() any {
				sig, _ := SignApproval(s, ApprovalMessage(spec.Name, "only", legacyChangeDigest(spec.Change)))
				return ApproveRequest{Approver: name, Signature: sig}
			}
		}
		bob := updateFn(env, time.Minute, UpdateApprove, self(alice2, "bob"))
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		if bob.rejected != nil {
			t.Fatalf("bob (the author's second key) rejected: %v", bob.rejected)
		}
		equalLines(t, "wave", f.lines("apply /shop/a"), []string{"1m0s apply /shop/a nginx:1.27"})
	})
}

// TestAuthorProven (defect 2): under a policy with authors, a start needs the author's
// signature of the release by a key the list gives the author: none, mallory's key, a
// signature of another spec are refused before anything runs; alice's is the author, shown
// with her key. Under an unsigned policy an author that is no name ("@laptop") or a
// look-alike is refused, and the status says "unsigned". A run begun before the change takes
// "@laptop", and its author check is off: the author approves her own wave.
func TestAuthorProven(t *testing.T) {
	alice, mallory := testSigner(t, 1), testSigner(t, 3)
	signedPolicy := &Policy{Authors: signerLine("alice", alice)}
	sign := func(s ssh.Signer, spec Spec) string {
		sig, err := SignRelease(s, ReleaseMessage(spec))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	base := oneWaveOfThree(t, func(s *Spec) { s.Author = "alice@laptop" })
	other := base
	other.Change.Images = map[string]string{"app": "nginx:1.28"}
	tests := []struct {
		name    string
		policy  *Policy
		author  string
		sig     func(Spec) string
		wantErr string
		want    string // AuthorProof
	}{
		{"no signature", signedPolicy, "alice@laptop", func(Spec) string { return "" }, "the worker's policy takes signed starts only", ""},
		{"another key", signedPolicy, "alice@laptop", func(s Spec) string { return sign(mallory, s) }, "alice's start signature refused: forged: signed with key " + ssh.FingerprintSHA256(mallory.PublicKey()), ""},
		{"another spec", signedPolicy, "alice@laptop", func(Spec) string { return sign(alice, other) }, "alice's start signature refused: alice's key " + ssh.FingerprintSHA256(alice.PublicKey()) + " did not sign this release", ""},
		{"signed", signedPolicy, "alice@laptop", func(s Spec) string { return sign(alice, s) }, "", "signed with alice's key " + ssh.FingerprintSHA256(alice.PublicKey())},
		{"unsigned, no name", &Policy{Unsigned: true}, "@laptop", func(Spec) string { return "" }, `the release's author: author "@laptop" is no name`, ""},
		{"unsigned, empty", &Policy{Unsigned: true}, "", func(Spec) string { return "" }, `the release's author: author "" is no name`, ""},
		{"unsigned, look-alike", &Policy{Unsigned: true}, "\u0430lice", func(Spec) string { return "" }, `the release's author: approver "\u0430lice" mixes scripts`, ""},
		{"unsigned", &Policy{Unsigned: true}, "alice@laptop", func(Spec) string { return "" }, "", "unsigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := base
			spec.Author = tt.author
			spec.AuthorSignature = tt.sig(spec)
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
			f.policy = tt.policy
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			err := env.GetWorkflowError()
			if tt.wantErr != "" {
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) || appErr.Type() != ErrInvalid || !strings.HasPrefix(appErr.Message(), "invalid release: "+tt.wantErr) {
					t.Fatalf("error = %v\nwant invalid release: %s...", err, tt.wantErr)
				}
				equalLines(t, "applies", f.lines("apply"), nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := query(t, env); st.Author != "alice" || st.AuthorProof != tt.want {
				t.Errorf("author %q (%s), want alice (%s)", st.Author, st.AuthorProof, tt.want)
			}
		})
	}
	t.Run("run from before the change", func(t *testing.T) {
		spec := oneWaveOfThree(t, func(s *Spec) { s.Author = "@laptop"; s.Waves[0].Approval = &Approval{} })
		env := newEnv(t, spec)
		f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
		env.OnGetVersion(changeWorkerPolicy, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		self := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "alice"})
		env.ExecuteWorkflow(ReleaseWorkflow, spec)
		if self.rejected != nil {
			t.Fatalf("alice (who started as @laptop) rejected: %v", self.rejected)
		}
		equalLines(t, "wave", f.lines("apply /shop/a"), []string{"1m0s apply /shop/a nginx:1.27"})
	})
}

// TestChangeDigestExactNumbers (defect 4): patches with runAsUser 9007199254740993 and
// 9007199254740992 (2^53 + 1 and 2^53: one float64) have two digests; the digest before the
// change had one.
func TestChangeDigestExactNumbers(t *testing.T) {
	a := Change{Patch: []byte(`{"spec":{"securityContext":{"runAsUser":9007199254740993}}}`)}
	b := Change{Patch: []byte(`{"spec":{"securityContext":{"runAsUser":9007199254740992}}}`)}
	if ChangeDigest(a) == ChangeDigest(b) {
		t.Errorf("ChangeDigest: one digest %s for two numbers", ChangeDigest(a))
	}
	if legacyChangeDigest(a) != legacyChangeDigest(b) {
		t.Errorf("legacyChangeDigest told them apart; the test no longer shows the old collision")
	}
}

// TestCanonicalJSON: members sorted by UTF-16 code units (RFC 8785's example order: "\r",
// "1", "\u0080", "ö", "€", "😀", "\ufb33"), no blanks, numbers as written, minimal escapes.
func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{`{"b": 1, "a": [true, null, 2.50, -0, 1e3]}`, `{"a":[true,null,2.50,-0,1e3],"b":1}`},
		{`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
			"{\"\\r\":2,\"1\":4,\"\u0080\":6,\"\u00f6\":7,\"\u20ac\":1,\"\U0001F600\":5,\"\ufb33\":3}"},
		{`"a\u001fb\u2028<>&\/"`, "\"a\\u001fb\u2028<>&/\""},
		{`12345678901234567890123`, `12345678901234567890123`},
	}
	for _, tt := range tests {
		got, err := canonicalize([]byte(tt.give))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("canonicalize(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

// TestCronRefused (defect 5): a release started on a cron schedule fails at once, so no run
// after the first (which looks continued) takes a forged resume; before the change every run
// changed the Deployments. The test environment sets a cron schedule only on a child
// workflow, so a parent starts the release as one, every minute, and stops after 3 minutes.
func TestCronRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		give workflow.Version
	}{{"new", 1}, {"run from before the change", workflow.DefaultVersion}} {
		t.Run(tt.name, func(t *testing.T) {
			spec := oneWaveOfThree(t, nil)
			var ts testsuite.WorkflowTestSuite
			env := ts.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(ReleaseWorkflow)
			parent := func(ctx workflow.Context, spec Spec) error {
				cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: WorkflowID(spec.Name), TaskQueue: TaskQueue, CronSchedule: "* * * * *"})
				workflow.ExecuteChildWorkflow(cctx, ReleaseWorkflow, spec)
				return workflow.Sleep(ctx, 3*time.Minute)
			}
			env.RegisterWorkflowWithOptions(parent, workflow.RegisterOptions{Name: "parent"})
			f := newFleet(env, "/shop/a", "/shop/b", "/shop/c")
			env.OnGetVersion(changeRefuseCron, workflow.DefaultVersion, 1).Return(tt.give)
			env.ExecuteWorkflow("parent", spec)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if applied := len(f.lines("apply")) > 0; applied != (tt.give == workflow.DefaultVersion) {
				t.Errorf("applied %t (%v), want %t", applied, f.lines("apply"), tt.give == workflow.DefaultVersion)
			}
		})
	}
}

// TestCarriedApprovalsVerifiedAgain (defect 5): a continued run under the worker's policy
// whose state carries wave 2's two approvals: forged ones (no signature, where the policy asks
// signed ones) fail the run before anything changes; genuine ones (signed for this run) are
// taken, and wave 2 runs without waiting.
func TestCarriedApprovalsVerifiedAgain(t *testing.T) {
	carol, dave := testSigner(t, 3), testSigner(t, 4)
	policy := Policy{Unsigned: true, Rules: []PolicyRule{{Cluster: "eu", Approvers: 2, Signers: signerLine("carol", carol) + signerLine("dave", dave)}}}
	spec := twoWaves(t, nil)
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	notAfter := at.Add(time.Hour)
	genuine := func(st *State) {
		for _, who := range []struct {
			name string
			key  ssh.Signer
		}{{"carol", carol}, {"dave", dave}} {
			b := ApprovalBinding{Release: spec.Name, Wave: "second", Run: st.Status.Run, Approver: who.name, NotAfter: notAfter, Digest: WaveDigest(spec, 1, st.Status.Targets, policy)}
			sig, err := SignApproval(who.key, b.Message())
			if err != nil {
				t.Fatal(err)
			}
			st.Status.Waves[1].Approvals = append(st.Status.Waves[1].Approvals, ApprovalAt{Approver: who.name, Principal: who.name, Signed: true, At: at, Signature: sig, NotAfter: &notAfter})
		}
	}
	tests := []struct {
		name    string
		give    func(*State)
		wantErr string
	}{
		{"forged", func(st *State) {
			st.Status.Waves[1].Approvals = []ApprovalAt{{Approver: "carol", Principal: "carol", Signed: true, At: at}, {Approver: "dave", Principal: "dave", Signed: true, At: at}}
		}, "invalid release: resumed state: approval 1 of wave 2 (second) does not verify: wave 2 (second) takes signed approvals only"},
		{"another run's", func(st *State) { st.Status.Run = "another-run"; genuine(st) }, "invalid release: resumed state: approval 1 of wave 2 (second) does not verify: carol's signed approval of wave 2 (second) rejected"},
		{"genuine", genuine, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			spec := spec
			spec.Resume = resumedAtWave1(spec)
			spec.Resume.Policy = &PolicyResult{Policy: policy, Source: "test"}
			spec.Resume.Status.Run, spec.Resume.Status.Author, spec.Resume.Status.AuthorProof = "run-1", "deployer", "unsigned"
			spec.Resume.Status.Waves[1].Approvals = nil
			tt.give(spec.Resume)
			if tt.name == "another run's" {
				spec.Resume.Status.Run = "run-1"
			}
			env.SetContinuedExecutionRunID("run-1")
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			err := env.GetWorkflowError()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v\nwant %s", err, tt.wantErr)
				}
				equalLines(t, "applies", f.lines("apply"), nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equalSet(t, "applies", f.lines("apply"), []string{"0s apply eu/shop/b nginx:1.27", "0s apply eu/shop/c nginx:1.27"})
		})
	}
}

// TestGateFor: a wave's needs are the strictest of its target groups' first matching rules,
// and the release file's approval only tightens them: more approvers, fewer names, fewer keys;
// its own keys never count.
func TestGateFor(t *testing.T) {
	carol, dave, mallory := testSigner(t, 3), testSigner(t, 4), testSigner(t, 5)
	policy := Policy{Unsigned: true, Groups: map[string][]string{"sre": {"carol", "dave", "erin"}}, Rules: []PolicyRule{
		{Cluster: "eu", Namespace: "shop", Approvers: 2, From: []string{"sre"}, Signers: signerLine("carol", carol) + signerLine("dave", dave)},
		{Namespace: "shop", Approvers: 1, From: []string{"carol", "erin", "frank"}},
		{Cluster: "*", Namespace: "*", Approvers: 0},
	}}
	principals := func(list []AllowedSigner) string {
		var out []string
		for _, s := range list {
			out = append(out, strings.Join(s.Principals, "+"))
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		name        string
		give        func(*Spec)
		wave        int
		wantN       int
		wantFrom    string // "<nil>": anyone
		wantSigned  bool
		wantSigners string
		wantSatisfy bool
	}{
		{"wave 1: shop in the default cluster", nil, 0, 1, "carol,erin,frank", false, "", true},
		{"wave 2: eu/shop", nil, 1, 2, "carol,dave,erin", true, "carol,dave", true},
		{"both groups in one wave", func(s *Spec) { s.Waves = []Wave{{Name: "all", Targets: []string{"one", "two"}}} }, 0, 2, "carol,erin", true, "carol,dave", false},
		{"the file asks three", func(s *Spec) { s.Waves[1].Approval = &Approval{Approvers: 3} }, 1, 3, "carol,dave,erin", true, "carol,dave", false},
		{"the file narrows from", func(s *Spec) { s.Waves[1].Approval = &Approval{Approvers: 1, From: []string{"dave", "mallory"}} }, 1, 2, "dave", true, "carol,dave", false},
		{"the file's own key", func(s *Spec) {
			s.Waves[1].Approval = &Approval{Signers: signerLine("mallory", mallory) + signerLine("carol", carol)}
		}, 1, 2, "carol,dave,erin", true, "carol", false},
		{"the file's signers in the default cluster", func(s *Spec) { s.Waves[0].Approval = &Approval{Signers: signerLine("carol", carol)} }, 0, 1, "carol,erin,frank", true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, tt.give)
			g, err := policy.gateFor(&spec, tt.wave)
			if err != nil {
				t.Fatal(err)
			}
			from := "<nil>"
			if g.From != nil {
				from = strings.Join(g.From, ",")
			}
			if g.Approvers != tt.wantN || from != tt.wantFrom || g.Signed != tt.wantSigned || principals(g.Signers) != tt.wantSigners {
				t.Errorf("got %d from %s signed %t by %s\nwant %d from %s signed %t by %s", g.Approvers, from, g.Signed, principals(g.Signers), tt.wantN, tt.wantFrom, tt.wantSigned, tt.wantSigners)
			}
			if ok := g.satisfiable() == nil; ok != tt.wantSatisfy {
				t.Errorf("satisfiable %t (%v), want %t", ok, g.satisfiable(), tt.wantSatisfy)
			}
		})
	}
}
