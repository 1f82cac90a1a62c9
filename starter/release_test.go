package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/release"
)

func TestReleaseApplyValidates(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`
name: web
change: {}
targets: [{name: a, namespace: shop, names: [web]}]
waves: [{name: w, targets: [a, b], bake: -1s}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"name":"web","change":{"images":{"app":"nginx:1.27"}},
"targets":[{"name":"a","namespace":"shop","names":["web"]}],"waves":[{"name":"w","targets":["a"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("name: x\nwavez: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{name: "invalid: every problem, nothing started", give: []string{"release", "apply", "-f", bad, "--temporal-address", "127.0.0.1:1"}, wantCode: 2, wantStderr: []string{
			"invalid release, 3 problems:",
			"  - change: neither images nor patch is set",
			`  - waves[0] (w): target group "b" is not in targets`,
			"  - waves[0] (w): bake -1s is negative",
		}},
		{name: "unknown field", give: []string{"release", "apply", "-f", unknown}, wantCode: 2, wantStderr: []string{`unknown field "wavez"`}},
		{name: "missing file", give: []string{"release", "apply", "-f", filepath.Join(dir, "none.yaml")}, wantCode: 2, wantStderr: []string{"read release file"}},
		{name: "no -f", give: []string{"release", "apply"}, wantCode: 2, wantStderr: []string{"release apply needs -f FILE"}},
		{name: "dry run", give: []string{"release", "apply", "--dry-run", "-f", good}, wantCode: 0, wantStdout: "release web is valid: 1 target groups, 1 waves\n"},
		{name: "abort without reason", give: []string{"release", "abort", "web"}, wantCode: 2, wantStderr: []string{"release abort needs --reason"}},
		{name: "status without name", give: []string{"release", "status"}, wantCode: 2, wantStderr: []string{"needs exactly one release NAME"}},
		{name: "freeze without reason", give: []string{"freeze", "--until", "1h"}, wantCode: 2, wantStderr: []string{"freeze needs --until and --reason"}},
		{name: "freeze bad until", give: []string{"freeze", "--until", "soon", "--reason", "x"}, wantCode: 2, wantStderr: []string{`--until "soon" is neither`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.give...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if tt.wantStdout != "" && stdout != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, tt.wantStdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestParseUntil(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		give    string
		want    time.Time
		wantErr bool
	}{
		{give: "2026-12-01T08:00:00Z", want: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)},
		{give: "90m", want: now.Add(90 * time.Minute)},
		{give: "-1h", wantErr: true},
		{give: "tomorrow", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseUntil(tt.give, now)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !got.Equal(tt.want)) {
			t.Errorf("parseUntil(%q) = %v, %v; want %v (error %v)", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestWriteReleaseStatus(t *testing.T) {
	bake := time.Date(2026, 11, 26, 12, 10, 0, 0, time.UTC)
	st := release.Status{Name: "web-1-27", Phase: release.PhaseBaking, Wave: 1, WaitingFor: release.WaitingForBake, Message: "wave 1 (canary): baking",
		Waves: []release.WaveStatus{
			{Name: "canary", State: release.WaveBaking, ApprovalsNeeded: 2, Approvals: []release.ApprovalAt{{Approver: "alice"}, {Approver: "bob"}}, BakeUntil: &bake},
			{Name: "rest", State: release.WavePending},
		},
		Targets: []release.TargetStatus{
			{Namespace: "shop", Name: "web", Wave: "canary", State: release.TargetDone, RevisionBefore: 3},
			{Cluster: "eu", Namespace: "shop", Name: "web", Wave: "rest", State: release.TargetPending},
		}}
	var b strings.Builder
	if err := writeReleaseStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "Release:      web-1-27\n" +
		"Phase:        Baking\n" +
		"Wave:         1 of 2\n" +
		"Waiting for:  Bake\n" +
		"Message:      wave 1 (canary): baking\n" +
		"\n" +
		"WAVE      STATE    APPROVALS      BAKE UNTIL            ANALYSIS\n" +
		"1 canary  Baking   2/2 alice,bob  2026-11-26T12:10:00Z  -\n" +
		"2 rest    Pending  -              -                     -\n" +
		"\n" +
		"TARGET       WAVE    STATE    REVISION BEFORE  REASON\n" +
		"shop/web     canary  Done     3                \n" +
		"eu:shop/web  rest    Pending  0                \n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestApprovalWave(t *testing.T) {
	st := release.Status{Name: "web", Phase: release.PhaseWaiting, Wave: 2, Waves: []release.WaveStatus{{Name: "canary"}, {Name: "eu"}}}
	tests := []struct {
		name, give, want, wantErr string
	}{
		{name: "the waiting wave", want: "eu"},
		{name: "by name", give: "canary", want: "canary"},
		{name: "by number", give: "1", want: "canary"},
		{name: "no such wave", give: "us", wantErr: `release web has no wave "us"`},
	}
	for _, tt := range tests {
		got, err := approvalWave(st, tt.give)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("%s: got %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestWriteReleaseStatusAuthorAndRun: the status names the author and how it is known
// ("unsigned" plainly), the run value every signed approval signs, the policy in force, and
// which approvals were signed.
func TestWriteReleaseStatusAuthorAndRun(t *testing.T) {
	st := release.Status{Name: "web-1-27", Phase: release.PhaseWaiting, Wave: 1, Author: "alice", AuthorProof: "unsigned", Run: "0f7c-run",
		PolicyDigest: "sha256:abc", PolicySource: "file /etc/rollout/policy.yaml",
		Waves: []release.WaveStatus{{Name: "canary", State: release.WaveWaiting, ApprovalsNeeded: 2, Approvals: []release.ApprovalAt{{Approver: "carol", Signed: true}}}}}
	var b strings.Builder
	if err := writeReleaseStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Author:   alice (unsigned)\n",
		"Run:      0f7c-run\n",
		"Policy:   sha256:abc (file /etc/rollout/policy.yaml)\n",
		"1 canary  Waiting  1/2 carol (signed)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("got:\n%s\nwant a line %q", b.String(), want)
		}
	}
}

// TestBindingFor: the approval's binding comes from the status, its digest recomputed from
// the status' spec, targets and policy; a workflow digest that differs (another spec than
// the one shown) is refused, as is a status without the run's values.
func TestBindingFor(t *testing.T) {
	spec, err := release.Parse([]byte(`
name: web-1-27
change: {images: {app: "nginx:1.27"}}
targets: [{name: one, namespace: shop, names: [a]}]
waves: [{name: canary, targets: [one]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	policy := release.Policy{Unsigned: true}
	targets := []release.TargetStatus{{Namespace: "shop", Name: "a", Wave: "canary"}}
	st := release.Status{Name: spec.Name, Phase: release.PhaseWaiting, Wave: 1, Run: "run-1", Spec: &spec, Policy: &policy, Targets: targets,
		Waves: []release.WaveStatus{{Name: "canary", Digest: release.WaveDigest(spec, 0, targets, policy)}}}
	notAfter := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b, err := bindingFor(st, io.Discard, "", "Carol@laptop", notAfter)
	if err != nil {
		t.Fatal(err)
	}
	want := "temporal-rollout approval v2\nrelease web-1-27\nwave canary\nrun run-1\napprover carol\nnot-after 2026-11-29T12:00:00Z\ndigest " + st.Waves[0].Digest + "\n"
	if got := string(b.Message()); got != want {
		t.Errorf("message:\n%s\nwant:\n%s", got, want)
	}
	st.Waves[0].Digest = "sha256:other"
	if _, err := bindingFor(st, io.Discard, "", "carol", notAfter); err == nil || !strings.Contains(err.Error(), "the worker and this starter differ") {
		t.Errorf("another digest: error %v, want refused", err)
	}
	st.Run = ""
	if _, err := bindingFor(st, io.Discard, "", "carol", notAfter); err == nil {
		t.Error("no run: accepted, want refused")
	}
}
