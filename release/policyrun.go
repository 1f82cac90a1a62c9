package release

// This file is how a run applies the worker's policy (policy.go): read once at the release's
// start, the author proven against it, and each approval judged by it. Everything but
// readPolicy is pure: it reads the spec, the state and its arguments.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/ssh"
)

// readPolicy reads the worker's policy (ReleasePolicy: its answer is in the history), proves
// the author, sets what each wave needs and the run value, and keeps the policy in the state.
// A policy that does not validate, an author who is refused or a wave no one could approve
// fails the start, InvalidRelease.
func (r *run) readPolicy(ctx workflow.Context) error {
	var fa *Activities
	var res PolicyResult
	if err := workflow.ExecuteActivity(summarized(workflow.WithActivityOptions(ctx, freezeCheckOptions), "read the worker's release policy"), fa.ReleasePolicy).Get(ctx, &res); err != nil {
		return fmt.Errorf("read the worker's release policy: %s", errMessage(err))
	}
	st := &r.st.Status
	author, proof, err := proveAuthor(&r.spec, &res.Policy)
	if err != nil {
		return invalid(err.Error())
	}
	st.Author, st.AuthorProof = author, proof
	for wi := range r.spec.Waves {
		g, err := res.Policy.gateFor(&r.spec, wi)
		if err != nil {
			return invalid(fmt.Sprintf("wave %d (%s): %v", wi+1, r.spec.Waves[wi].Name, err))
		}
		if err := g.satisfiable(); err != nil {
			return invalid(fmt.Sprintf("wave %d (%s): %v", wi+1, r.spec.Waves[wi].Name, err))
		}
		st.Waves[wi].ApprovalsNeeded = g.Approvers
	}
	st.Run = workflow.GetInfo(ctx).WorkflowExecution.RunID
	r.st.Policy = &res
	return nil
}

func invalid(msg string) error {
	return temporal.NewNonRetryableApplicationError("invalid release: "+msg, ErrInvalid, nil)
}

// proveAuthor is the release's author (normalized) and how it is known, under policy p: with
// authors, the start's signature of ReleaseMessage by a key the list gives the author; with
// unsigned, the name the start gave, said to be unsigned. An empty author, or one
// CheckApprover refuses, is refused either way.
func proveAuthor(s *Spec, p *Policy) (string, string, error) {
	if err := p.Validate(); err != nil {
		return "", "", fmt.Errorf("the worker's release policy: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	author, err := CheckApprover(s.Author)
	if err == nil && author == "" {
		err = fmt.Errorf("author %q is no name", s.Author)
	}
	if err != nil {
		return "", "", fmt.Errorf("the release's author: %v: start it with `starter release apply --identity NAME`", err)
	}
	if p.Unsigned {
		return author, "unsigned", nil
	}
	if strings.TrimSpace(s.AuthorSignature) == "" {
		return "", "", errors.New("the worker's policy takes signed starts only: start the release with `starter release apply --sign-key KEY`")
	}
	authors, err := parseAllowedSignersNS(p.Authors, ReleaseSignatureNamespace)
	if err != nil {
		return "", "", fmt.Errorf("the policy's authors: %w", err)
	}
	key, err := verifySSHSIG(s.AuthorSignature, ReleaseSignatureNamespace, "the policy's authors", ReleaseMessage(*s), author, authors)
	if err != nil {
		return "", "", fmt.Errorf("%s's start signature refused: %w", author, err)
	}
	return author, "signed with " + author + "'s key " + ssh.FingerprintSHA256(key), nil
}

// satisfiable: some set of approvers could approve the wave.
func (g waveGate) satisfiable() error {
	if g.Approvers == 0 {
		return nil
	}
	if g.From != nil && len(g.From) < g.Approvers {
		return fmt.Errorf("needs %d approvers, and the policy with the release's approval admits %d (%s)", g.Approvers, len(g.From), strings.Join(g.From, ", "))
	}
	if g.Signed {
		var principals []string
		for _, s := range g.Signers {
			for _, p := range s.Principals {
				if !containsString(principals, p) && (g.From == nil || containsString(g.From, p)) {
					principals = append(principals, p)
				}
			}
		}
		if len(principals) < g.Approvers {
			return fmt.Errorf("needs %d signed approvers, and the keys the worker's policy trusts (narrowed by the release's approval) give %d: a release file cannot add keys", g.Approvers, len(principals))
		}
	}
	return nil
}

// waveDigest is wave wi's WaveDigest under the policy in force.
func (r *run) waveDigest(wi int) string {
	return WaveDigest(r.spec, wi, r.st.Status.Targets, r.policy.Policy)
}

// judge decides one approval of wave wi under the policy in force, at now, after the wave's
// approvals prior: the name (CheckApprover), the signature when the wave takes signed
// approvals (of ApprovalBinding, by a key the policy gives the principal, not after its
// not-after), the author, from, and distinct approvers. It returns the approval to record
// (without its time), or why not.
func (r *run) judge(wi int, req ApproveRequest, now time.Time, prior []ApprovalAt) (ApprovalAt, error) {
	ws := &r.st.Status.Waves[wi]
	approver := strings.TrimSpace(req.Approver)
	principal, err := CheckApprover(approver)
	if err != nil {
		return ApprovalAt{}, err
	}
	if principal == "" {
		return ApprovalAt{}, fmt.Errorf("approver %q is no name", approver)
	}
	ap := ApprovalAt{Approver: approver, Principal: principal}
	g, err := r.policy.Policy.gateFor(&r.spec, wi)
	if err != nil {
		return ApprovalAt{}, fmt.Errorf("wave %d (%s): %w", wi+1, ws.Name, err)
	}
	if g.Signed {
		if strings.TrimSpace(req.Signature) == "" {
			return ApprovalAt{}, fmt.Errorf("wave %d (%s) takes signed approvals only (the worker's policy or approval.signers): sign with `starter release approve --sign-key KEY`", wi+1, ws.Name)
		}
		if req.NotAfter == nil {
			return ApprovalAt{}, fmt.Errorf("wave %d (%s): a signed approval needs its notAfter (the time it signed to expire at)", wi+1, ws.Name)
		}
		if now.After(*req.NotAfter) {
			return ApprovalAt{}, fmt.Errorf("%s's signed approval of wave %d (%s) expired at %s", principal, wi+1, ws.Name, req.NotAfter.UTC().Format(time.RFC3339))
		}
		if !r.st.Resolved {
			return ApprovalAt{}, fmt.Errorf("wave %d (%s): the release has not read its targets yet", wi+1, ws.Name)
		}
		b := ApprovalBinding{Release: r.spec.Name, Wave: ws.Name, Run: r.st.Status.Run, Approver: principal, NotAfter: *req.NotAfter, Digest: r.waveDigest(wi)}
		if _, err := verifySSHSIG(req.Signature, SignatureNamespace, "the worker's policy", b.Message(), principal, g.Signers); err != nil {
			return ApprovalAt{}, fmt.Errorf("%s's signed approval of wave %d (%s) rejected: %w", principal, wi+1, ws.Name, err)
		}
		notAfter := req.NotAfter.UTC()
		ap.Signed, ap.Signature, ap.NotAfter = true, req.Signature, &notAfter
	}
	if principal == r.st.Status.Author {
		return ApprovalAt{}, fmt.Errorf("%s started the release (as %s, %s): its author cannot approve it", principal, r.spec.Author, r.st.Status.AuthorProof)
	}
	if g.From != nil && !containsString(g.From, principal) {
		return ApprovalAt{}, fmt.Errorf("%s may not approve wave %d (%s): approval.from (and the worker's policy) admit %s", principal, wi+1, ws.Name, strings.Join(g.From, ", "))
	}
	for _, a := range prior {
		if a.Principal == principal {
			return ApprovalAt{}, fmt.Errorf("%s already approved wave %d (%s) (as %s); it needs %d distinct approvers", principal, wi+1, ws.Name, a.Approver, ws.ApprovalsNeeded)
		}
	}
	return ap, nil
}

// checkCarried verifies again, on a run resuming the release, what the state carries: the
// policy, the author's proof, and every wave's approvals, each judged as when it was given
// (at its time, after the approvals before it). Deterministic: it reads only the spec and the
// state.
func (r *run) checkCarried() error {
	r.policy = r.st.Policy
	st := &r.st.Status
	author, proof, err := proveAuthor(&r.spec, &r.policy.Policy)
	if err != nil {
		return err
	}
	if author != st.Author || proof != st.AuthorProof {
		return fmt.Errorf("the author is %s (%s), the state says %s (%s)", author, proof, st.Author, st.AuthorProof)
	}
	for wi := range st.Waves {
		ws := &st.Waves[wi]
		g, err := r.policy.Policy.gateFor(&r.spec, wi)
		if err != nil {
			return fmt.Errorf("wave %d (%s): %w", wi+1, ws.Name, err)
		}
		if ws.ApprovalsNeeded != g.Approvers {
			return fmt.Errorf("wave %d (%s) needs %d approvals, the state says %d", wi+1, ws.Name, g.Approvers, ws.ApprovalsNeeded)
		}
		for i, ap := range ws.Approvals {
			got, err := r.judge(wi, ApproveRequest{Approver: ap.Approver, Signature: ap.Signature, NotAfter: ap.NotAfter}, ap.At, ws.Approvals[:i])
			if err != nil {
				return fmt.Errorf("approval %d of wave %d (%s) does not verify: %w", i+1, wi+1, ws.Name, err)
			}
			if got.Principal != ap.Principal || got.Signed != ap.Signed {
				return fmt.Errorf("approval %d of wave %d (%s) is %s (signed %t), the state says %s (signed %t)", i+1, wi+1, ws.Name, got.Principal, got.Signed, ap.Principal, ap.Signed)
			}
		}
	}
	return nil
}

// canApproveWithPolicy is canApprove for a run under the worker's policy.
func (r *run) canApproveWithPolicy(req ApproveRequest, now time.Time) (ApprovalAt, error) {
	wi, ws, err := r.approvalWave(req)
	if err != nil {
		return ApprovalAt{}, err
	}
	return r.judge(wi, req, now, ws.Approvals)
}
