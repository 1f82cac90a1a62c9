package release

// This file is the approval policy: who may start a release and who must approve its waves,
// held by the worker that runs releases (its configuration, `release-policy`), not by the
// release file, as git's allowed-signers file belongs to the verifier and Argo CD's sync
// windows to the AppProject. The release workflow reads it once, at its start (the
// ReleasePolicy activity, whose result is in the history), and keeps it for the whole
// release (State.Policy, handed over by continue-as-new). A release file may only tighten it
// (gateFor).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// ReleaseSignatureNamespace is the SSHSIG namespace of a release's start signature
// (ssh-keygen's -n): an approval signature is not a start signature, nor the reverse.
const ReleaseSignatureNamespace = "temporal-rollout-release"

// Policy is the worker's approval policy.
//
//	authors: |                     # who may start releases: an allowed-signers list
//	  alice ssh-ed25519 AAAAC3Nza...
//	groups: {sre: [bob, carol]}
//	rules:
//	  - {cluster: eu, namespace: shop, approvers: 2, from: [sre], signers: "bob ssh-ed25519 ..."}
//	  - {namespace: shop, approvers: 1}
//
// or, where starts are not signed, "unsigned: true" in place of authors.
type Policy struct {
	// Authors is an allowed-signers list (ParseAllowedSigners' format, namespaces honoured
	// for ReleaseSignatureNamespace): a release starts only with a signature of its canonical
	// spec (ReleaseMessage) by one of these keys, and its author is that key's principal.
	Authors string `json:"authors,omitempty"`
	// Unsigned says plainly that starts are not signed: the author is the name the start
	// gives (`starter release apply --identity`), and the status shows it as unsigned.
	// Exactly one of Authors and Unsigned.
	Unsigned bool `json:"unsigned,omitempty"`
	// Groups name sets of approvers the rules' from may name.
	Groups map[string][]string `json:"groups,omitempty"`
	// Rules: for each target group of a wave, the first rule that matches its cluster and
	// namespace applies; a wave needs what the strictest of its groups' rules asks.
	Rules []PolicyRule `json:"rules,omitempty"`
}

// PolicyRule is what the waves that change Deployments in a cluster and namespace need.
type PolicyRule struct {
	// Cluster and Namespace, when set, restrict the rule to target groups in them; "*" is any
	// (as empty). The default cluster is "default".
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Approvers is how many distinct approvers (0: none).
	Approvers int `json:"approvers,omitempty"`
	// From, when set, names who may approve: people, or groups of the policy's groups.
	From []string `json:"from,omitempty"`
	// Signers, when set, is an allowed-signers list: approvals must be signed by its keys.
	Signers string `json:"signers,omitempty"`
}

// ParsePolicy reads a policy file (YAML or JSON; unknown fields are errors) and validates it.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return p, fmt.Errorf("read release policy: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("read release policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("release policy: %w", err)
	}
	return p, nil
}

// Validate names every problem of the policy, joined.
func (p *Policy) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case p.Authors == "" && !p.Unsigned:
		bad("neither authors nor unsigned: true is set; say who signs releases, or that they are not signed")
	case p.Authors != "" && p.Unsigned:
		bad("both authors and unsigned: true are set; give one")
	case p.Authors != "":
		if _, err := parseAllowedSignersNS(p.Authors, ReleaseSignatureNamespace); err != nil {
			bad("authors: %v", err)
		}
	}
	for _, g := range sortedKeys(p.Groups) {
		if len(p.Groups[g]) == 0 {
			bad("groups.%s: no members", g)
		}
		for _, m := range p.Groups[g] {
			if _, err := CheckApprover(m); err != nil || NormalizeApprover(m) == "" {
				bad("groups.%s: member %q is not a name", g, m)
			}
		}
	}
	for i, r := range p.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		if r.Cluster != "" && r.Cluster != "*" {
			if e := validation.IsDNS1123Label(r.Cluster); len(e) > 0 {
				bad("%s: cluster %q: %s", where, r.Cluster, strings.Join(e, "; "))
			}
		}
		if r.Namespace != "" && r.Namespace != "*" {
			if e := validation.IsDNS1123Label(r.Namespace); len(e) > 0 {
				bad("%s: namespace %q: %s", where, r.Namespace, strings.Join(e, "; "))
			}
		}
		if r.Approvers < 0 || r.Approvers > MaxApprovers {
			bad("%s: approvers %d is not between 0 and %d", where, r.Approvers, MaxApprovers)
		}
		if (len(r.From) > 0 || r.Signers != "") && r.Approvers == 0 {
			bad("%s: from or signers without approvers", where)
		}
		for _, f := range r.From {
			if _, group := p.Groups[f]; !group && NormalizeApprover(f) == "" {
				bad("%s: from: %q is neither a group nor a name", where, f)
			}
		}
		if may := expandFrom(r.From, p.Groups); may != nil && len(may) < r.Approvers {
			bad("%s: from admits %d approvers (%s); the rule needs %d", where, len(may), strings.Join(may, ", "), r.Approvers)
		}
		if r.Signers != "" {
			if _, err := ParseAllowedSigners(r.Signers); err != nil {
				bad("%s: signers: %v", where, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Digest is "sha256:<hex>" of the policy's canonical JSON: what the status shows and an
// approval's signature covers.
func (p *Policy) Digest() string {
	d, _ := canonicalDigest(p)
	return d
}

// rule is the first rule that matches a target group in cluster ("" is the default cluster)
// and namespace, or nil.
func (p *Policy) rule(cluster, namespace string) *PolicyRule {
	if cluster == "" {
		cluster = "default"
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if (r.Cluster == "" || r.Cluster == "*" || r.Cluster == cluster) && (r.Namespace == "" || r.Namespace == "*" || r.Namespace == namespace) {
			return r
		}
	}
	return nil
}

// expandFrom is the normalized names from admits: its people and the members of its groups;
// nil when from is empty (anyone).
func expandFrom(from []string, groups map[string][]string) []string {
	if len(from) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, f := range from {
		if members, ok := groups[f]; ok {
			for _, m := range members {
				set[NormalizeApprover(m)] = true
			}
			continue
		}
		set[NormalizeApprover(f)] = true
	}
	return sortedKeys(set)
}

// waveGate is what one wave needs under the policy in force and the release file: the
// strictest of the policy's rules for its target groups, tightened by the wave's approval.
type waveGate struct {
	Approvers int
	// From: who may approve (normalized, sorted); nil is anyone.
	From []string
	// Signed: approvals must be signed, by one of Signers.
	Signed  bool
	Signers []AllowedSigner
}

// gateFor is what wave wi needs. The policy's rules for its groups combine strictest-first:
// the most approvers; only names every rule's from admits; signed when any rule has signers,
// by a key every such rule lists for the principal. The release file's approval then only
// tightens: more approvers, fewer names (its from, with its groups, intersected), and its
// signers only as a filter on the policy's keys: a key the policy does not list for a
// principal never counts, whatever the release file says.
func (p *Policy) gateFor(s *Spec, wi int) (waveGate, error) {
	w := &s.Waves[wi]
	var g waveGate
	var from []string
	fromSet := false
	restrict := func(names []string) {
		if !fromSet {
			from, fromSet = names, true
			return
		}
		var keep []string
		for _, n := range from {
			if containsString(names, n) {
				keep = append(keep, n)
			}
		}
		from = keep
	}
	var signers []AllowedSigner
	signersSet := false
	restrictSigners := func(list []AllowedSigner) {
		if !signersSet {
			signers, signersSet = list, true
			return
		}
		signers = intersectSigners(signers, list)
	}
	for _, name := range w.Targets {
		tg := s.group(name)
		r := p.rule(tg.Cluster, tg.Namespace)
		if r == nil {
			continue
		}
		g.Approvers = max(g.Approvers, r.Approvers)
		if len(r.From) > 0 {
			restrict(expandFrom(r.From, p.Groups))
		}
		if r.Signers != "" {
			list, err := ParseAllowedSigners(r.Signers)
			if err != nil {
				return g, fmt.Errorf("the policy's signers for %s: %w", targetString(tg.Cluster, tg.Namespace, "*"), err)
			}
			g.Signed = true
			restrictSigners(list)
		}
	}
	if a := w.Approval; a != nil {
		g.Approvers = max(g.Approvers, w.approvers())
		if len(a.From) > 0 {
			restrict(s.mayApprove(a.From, NormalizeApprover))
		}
		if a.Signers != "" {
			list, err := ParseAllowedSigners(a.Signers)
			if err != nil {
				return g, fmt.Errorf("approval.signers: %w", err)
			}
			g.Signed = true
			if !signersSet {
				// The release file names keys the policy does not trust: none counts.
				signers, signersSet = nil, true
			}
			signers = intersectSigners(signers, list)
		}
	}
	if fromSet {
		if from == nil {
			from = []string{}
		}
		g.From = from
	}
	g.Signers = signers
	return g, nil
}

// intersectSigners is the (principal, key) pairs both lists give.
func intersectSigners(a, b []AllowedSigner) []AllowedSigner {
	var out []AllowedSigner
	for _, x := range a {
		var principals []string
		for _, y := range b {
			if bytes.Equal(x.Key.Marshal(), y.Key.Marshal()) {
				for _, p := range x.Principals {
					if containsString(y.Principals, p) && !containsString(principals, p) {
						principals = append(principals, p)
					}
				}
			}
		}
		if len(principals) > 0 {
			sort.Strings(principals)
			out = append(out, AllowedSigner{Principals: principals, Key: x.Key})
		}
	}
	return out
}

// PolicyResult is the ReleasePolicy activity's answer: the policy in force and where the
// worker read it.
type PolicyResult struct {
	Policy Policy `json:"policy"`
	// Source says where it came from ("file /etc/rollout/release-policy.yaml", or "none
	// configured: unsigned, no rules").
	Source string `json:"source"`
}

// ReleasePolicy returns the worker's policy (Activities.Policy); none configured is
// "unsigned, no rules", said so in Source.
func (a *Activities) ReleasePolicy(context.Context) (PolicyResult, error) {
	if a.Policy == nil {
		return PolicyResult{Policy: Policy{Unsigned: true}, Source: "none configured: unsigned, no rules"}, nil
	}
	return PolicyResult{Policy: *a.Policy, Source: a.PolicySource}, nil
}
