// Package release holds the release workflow: one change (images, or a strategic-merge patch
// of the pod template) carried to many Deployments, possibly in several clusters, in ordered
// waves, each with a concurrency, a bake time, an optional analysis and an optional approval,
// halting and rolling back what it changed on a failure. It also holds the fleet freeze
// workflow and the freeze calendar. docs/releases.md is the user's reference.
//
// This file is the release file's schema and its validation.
package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/k8s"
)

// Failure policies (Spec.OnFailure).
const (
	// OnFailureRollback (the default) rolls every target the release changed back to its
	// template from before the release, in reverse wave order.
	OnFailureRollback = "rollback"
	// OnFailureHalt only stops: changed targets stay as they are.
	OnFailureHalt = "halt"
)

// Defaults and limits.
const (
	// DefaultClusterTimeout: how long a cluster's activities may go unanswered (its worker
	// gone, its apiserver down) before the release fails.
	DefaultClusterTimeout = 10 * time.Minute
	// DefaultRolloutTimeout: how long one Deployment's rollout may take. Its
	// progressDeadlineSeconds usually fails it first.
	DefaultRolloutTimeout = 30 * time.Minute
	// MaxApprovers bounds approval.approvers.
	MaxApprovers = 10
	// MaxTargets bounds the Deployments one release may change.
	MaxTargets = 1000
)

// Spec is a release file (YAML or JSON) and the workflow's input.
//
//	name: web-1-27
//	change: {images: {app: "nginx:1.27"}}
//	targets:
//	  - {name: canary, namespace: shop, names: [web-canary]}
//	  - {name: rest, namespace: shop, selector: "app=web,tier!=canary"}
//	waves:
//	  - {name: canary, targets: [canary], bake: 10m, approval: {approvers: 2}}
//	  - {name: rest, targets: [rest], maxConcurrent: 5}
type Spec struct {
	// Name names the release: its workflow is release/<name>.
	Name   string `json:"name"`
	Change Change `json:"change"`
	// Targets are groups of Deployments, each in one cluster and namespace, named by a list of
	// names or a label selector.
	Targets []TargetGroup `json:"targets"`
	// Waves run in order; each names the target groups it changes.
	Waves []Wave `json:"waves"`
	// OnFailure is rollback (the default) or halt.
	OnFailure string `json:"onFailure,omitempty"`
	// Freeze windows: no wave starts inside one.
	Freeze []FreezeWindow `json:"freeze,omitempty"`
	// ClusterTimeout (default 10m) and RolloutTimeout (default 30m): see the defaults above.
	ClusterTimeout k8s.Duration `json:"clusterTimeout,omitempty"`
	RolloutTimeout k8s.Duration `json:"rolloutTimeout,omitempty"`
	// Groups name sets of approvers that a wave's approval.from may name:
	// {sre: [alice, bob], leads: [carol]}. Members compare normalized (NormalizeApprover).
	Groups map[string][]string `json:"groups,omitempty"`
	// Author is who started the release: `starter release apply` sets it to its --identity
	// (the Temporal client's identity in the start event too). The author cannot approve the
	// release's waves. A release file does not set it.
	Author string `json:"author,omitempty"`
	// AuthorSignature is the author's SSH signature of ReleaseMessage (`starter release apply
	// --sign-key`): required when the worker's policy has authors (Policy.Authors), whose
	// list must give the key to Author. A release file does not set it.
	AuthorSignature string `json:"authorSignature,omitempty"`
	// Resume is the state a run hands over by Continue-As-New. Users leave it out; a run that
	// was not continued as new refuses it.
	Resume *State `json:"resume,omitempty"`
}

// Change is what the release does to each target's pod template: set images, or apply a
// strategic-merge patch (of spec.template), exactly one of the two.
type Change struct {
	// Images maps a container name to its new image.
	Images map[string]string `json:"images,omitempty"`
	// Patch is a strategic-merge patch of the pod template, as
	// `kubectl patch --type strategic -p '{"spec":{"template": PATCH}}'` would take it.
	Patch json.RawMessage `json:"patch,omitempty"`
}

// TargetGroup is a set of Deployments in one cluster and namespace.
type TargetGroup struct {
	// Name is how waves refer to the group.
	Name string `json:"name"`
	// Cluster is the cluster's name as its worker's --cluster; empty is the default cluster.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	// Names lists Deployments; Selector is a label selector (kubectl's syntax). Exactly one.
	Names    []string `json:"names,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// Wave is one step of the release.
type Wave struct {
	Name string `json:"name"`
	// Targets names the target groups the wave changes.
	Targets []string `json:"targets"`
	// MaxConcurrent is how many of the wave's Deployments roll out at once (default 1).
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// Bake is how long the release waits after the wave completed (and its analysis passed)
	// before the next wave.
	Bake k8s.Duration `json:"bake,omitempty"`
	// Analysis is measured once the wave's rollouts are complete, as an analysis step of the
	// steps annotation is (Prometheus query or web; not job).
	Analysis *k8s.AnalysisStep `json:"analysis,omitempty"`
	// Approval, when set, holds the wave before it starts until enough people approve it.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is a wave's approval gate.
//
//	approval:
//	  approvers: 2
//	  from: [sre, carol]           # people, or groups of the release's groups
//	  signers: |                   # an SSH allowed-signers list: approvals must be signed
//	    alice@example.com ssh-ed25519 AAAAC3Nza...
//	    carol ssh-ed25519 AAAAC3Nza...
type Approval struct {
	// Approvers is how many distinct approvers the wave needs (default 1). Approvers are
	// distinct by their normalized names (NormalizeApprover): alice@laptop and Alice@bastion
	// are one.
	Approvers int `json:"approvers,omitempty"`
	// From, when set, names who may approve: people (normalized names) or groups (keys of
	// the release's groups). Empty: anyone but the release's author.
	From []string `json:"from,omitempty"`
	// Signers, when set, is an SSH allowed-signers list (ParseAllowedSigners): each approval
	// must carry an SSH signature of ApprovalMessage by a key the list gives the approver.
	Signers string `json:"signers,omitempty"`
}

// FreezeWindow is a recurring window in which no wave starts: a cron expression or an RRULE
// (the subset in calendar.go) giving its starts, a duration, and a time zone.
type FreezeWindow struct {
	Cron     string       `json:"cron,omitempty"`
	RRule    string       `json:"rrule,omitempty"`
	Duration k8s.Duration `json:"duration"`
	// TimeZone is an IANA name (Europe/Berlin); default UTC.
	TimeZone string `json:"timeZone,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Parse reads a release file, YAML or JSON. Unknown fields are errors. It does not validate.
func Parse(b []byte) (Spec, error) {
	var s Spec
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return s, fmt.Errorf("read release file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("read release file: %w", err)
	}
	if s.Resume != nil {
		return s, errors.New("read release file: resume is the workflow's own state, not a field of a release file")
	}
	if s.AuthorSignature != "" {
		return s, errors.New("read release file: authorSignature is set by `starter release apply --sign-key`, not a field of a release file")
	}
	if s.Author != "" {
		return s, errors.New("read release file: author is set by `starter release apply` from its --identity, not a field of a release file")
	}
	return s, nil
}

// Validate names every problem of the release, joined. Cluster names are checked when the
// release runs (a cluster no worker serves fails it after clusterTimeout, before any change:
// targets are read first).
func (s *Spec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if s.Name == "" {
		bad("name is empty")
	} else if e := validation.IsDNS1123Subdomain(s.Name); len(e) > 0 {
		bad("name %q: %s", s.Name, strings.Join(e, "; "))
	}

	// The change.
	switch {
	case len(s.Change.Images) == 0 && len(s.Change.Patch) == 0:
		bad("change: neither images nor patch is set; a release changes something")
	case len(s.Change.Images) > 0 && len(s.Change.Patch) > 0:
		bad("change: both images and patch are set; give exactly one")
	case len(s.Change.Patch) > 0:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(s.Change.Patch, &obj); err != nil || len(obj) == 0 {
			bad("change.patch: a strategic-merge patch of the pod template is a non-empty object, got %s", string(s.Change.Patch))
		}
	}
	for _, c := range sortedKeys(s.Change.Images) {
		if e := validation.IsDNS1123Label(c); len(e) > 0 {
			bad("change.images: container name %q: %s", c, strings.Join(e, "; "))
		}
		if img := s.Change.Images[c]; strings.TrimSpace(img) == "" || strings.ContainsAny(img, " \t\n") {
			bad("change.images[%s]: image %q is empty or has blanks", c, img)
		}
	}

	// Target groups.
	if len(s.Targets) == 0 {
		bad("targets: none; a release needs at least one target group")
	}
	groups := map[string]bool{}
	seen := map[string]string{} // cluster/namespace/name -> group
	for i, g := range s.Targets {
		where := fmt.Sprintf("targets[%d]", i)
		if g.Name != "" {
			where = fmt.Sprintf("targets[%d] (%s)", i, g.Name)
		}
		switch {
		case g.Name == "":
			bad("%s: name is empty", where)
		case groups[g.Name]:
			bad("%s: the name %q is used twice", where, g.Name)
		}
		groups[g.Name] = true
		if g.Cluster != "" {
			if e := validation.IsDNS1123Label(g.Cluster); len(e) > 0 {
				bad("%s: cluster %q: %s", where, g.Cluster, strings.Join(e, "; "))
			}
		}
		if e := validation.IsDNS1123Label(g.Namespace); len(e) > 0 {
			bad("%s: namespace %q: %s", where, g.Namespace, strings.Join(e, "; "))
		}
		switch {
		case len(g.Names) == 0 && g.Selector == "":
			bad("%s: neither names nor selector is set", where)
		case len(g.Names) > 0 && g.Selector != "":
			bad("%s: both names and selector are set; give exactly one", where)
		case g.Selector != "":
			if sel, err := labels.Parse(g.Selector); err != nil {
				bad("%s: selector %q: %v", where, g.Selector, err)
			} else if sel.Empty() {
				bad("%s: selector %q selects everything; name the Deployments", where, g.Selector)
			}
		}
		for _, n := range g.Names {
			if e := validation.IsDNS1123Subdomain(n); len(e) > 0 {
				bad("%s: deployment name %q: %s", where, n, strings.Join(e, "; "))
				continue
			}
			key := g.Cluster + "/" + g.Namespace + "/" + n
			if other, dup := seen[key]; dup {
				bad("%s: deployment %s is also in target group %q; a Deployment is in one wave", where, targetString(g.Cluster, g.Namespace, n), other)
			}
			seen[key] = g.Name
		}
	}
	if len(seen) > MaxTargets {
		bad("targets: %d Deployments; at most %d", len(seen), MaxTargets)
	}

	// Waves.
	if len(s.Waves) == 0 {
		bad("waves: none; a release needs at least one wave")
	}
	waveNames := map[string]bool{}
	inWave := map[string]int{}
	for i, w := range s.Waves {
		where := fmt.Sprintf("waves[%d]", i)
		if w.Name != "" {
			where = fmt.Sprintf("waves[%d] (%s)", i, w.Name)
		}
		switch {
		case w.Name == "":
			bad("%s: name is empty", where)
		case waveNames[w.Name]:
			bad("%s: the name %q is used twice", where, w.Name)
		}
		waveNames[w.Name] = true
		if len(w.Targets) == 0 {
			bad("%s: no targets; an empty wave changes nothing", where)
		}
		for _, t := range w.Targets {
			switch other, dup := inWave[t]; {
			case !groups[t]:
				bad("%s: target group %q is not in targets", where, t)
			case dup && other == i:
				bad("%s: target group %q is named twice", where, t)
			case dup:
				bad("%s: target group %q is also in wave %d (%s); a target is in one wave", where, t, other, s.Waves[other].Name)
			}
			inWave[t] = i
		}
		if w.MaxConcurrent < 0 {
			bad("%s: maxConcurrent %d is negative", where, w.MaxConcurrent)
		}
		if w.Bake < 0 {
			bad("%s: bake %s is negative", where, time.Duration(w.Bake))
		}
		if w.Analysis != nil {
			if w.Analysis.Job != nil {
				bad("%s: analysis: a job analysis is not supported in a release wave (use query or web)", where)
			} else if _, err := k8s.CheckAnalysis(*w.Analysis); err != nil {
				bad("%s: analysis: %v", where, strings.ReplaceAll(err.Error(), "\n", "; "))
			}
		}
		if w.Approval != nil && (w.Approval.Approvers < 0 || w.Approval.Approvers > MaxApprovers) {
			bad("%s: approval.approvers %d is not between 1 and %d", where, w.Approval.Approvers, MaxApprovers)
		}
		if w.Approval != nil {
			for _, f := range w.Approval.From {
				if _, group := s.Groups[f]; !group && legacyNormalizeApprover(f) == "" {
					bad("%s: approval.from: %q is neither a group nor a name", where, f)
				}
			}
			if may := s.mayApprove(w.Approval.From, legacyNormalizeApprover); may != nil && len(may) < w.approvers() {
				bad("%s: approval.from admits %d approvers (%s); the wave needs %d", where, len(may), strings.Join(may, ", "), w.approvers())
			}
			if w.Approval.Signers != "" {
				if _, err := parseAllowedSigners(w.Approval.Signers, legacyNormalizeApprover); err != nil {
					bad("%s: approval.signers: %v", where, err)
				}
			}
		}
	}
	for _, g := range s.Targets {
		if _, ok := inWave[g.Name]; g.Name != "" && !ok {
			bad("targets (%s): the group is in no wave", g.Name)
		}
	}

	for _, g := range sortedKeys(s.Groups) {
		switch {
		case strings.TrimSpace(g) == "":
			bad("groups: a group's name is empty")
		case len(s.Groups[g]) == 0:
			bad("groups.%s: no members", g)
		}
		for _, m := range s.Groups[g] {
			if legacyNormalizeApprover(m) == "" {
				bad("groups.%s: member %q is empty", g, m)
			}
		}
	}

	switch s.OnFailure {
	case "", OnFailureRollback, OnFailureHalt:
	default:
		bad("onFailure %q is neither %q nor %q", s.OnFailure, OnFailureRollback, OnFailureHalt)
	}
	for i, f := range s.Freeze {
		if err := f.validate(); err != nil {
			bad("freeze[%d]: %s", i, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	if s.ClusterTimeout < 0 {
		bad("clusterTimeout %s is negative", time.Duration(s.ClusterTimeout))
	}
	if s.RolloutTimeout < 0 {
		bad("rolloutTimeout %s is negative", time.Duration(s.RolloutTimeout))
	}
	return errors.Join(errs...)
}

func (s *Spec) onFailure() string {
	if s.OnFailure == "" {
		return OnFailureRollback
	}
	return s.OnFailure
}

func (s *Spec) clusterTimeout() time.Duration {
	if s.ClusterTimeout == 0 {
		return DefaultClusterTimeout
	}
	return time.Duration(s.ClusterTimeout)
}

func (s *Spec) rolloutTimeout() time.Duration {
	if s.RolloutTimeout == 0 {
		return DefaultRolloutTimeout
	}
	return time.Duration(s.RolloutTimeout)
}

func (w *Wave) maxConcurrent() int {
	if w.MaxConcurrent <= 0 {
		return 1
	}
	return w.MaxConcurrent
}

func (w *Wave) approvers() int {
	if w.Approval == nil {
		return 0
	}
	if w.Approval.Approvers == 0 {
		return 1
	}
	return w.Approval.Approvers
}

func (s *Spec) group(name string) *TargetGroup {
	for i := range s.Targets {
		if s.Targets[i].Name == name {
			return &s.Targets[i]
		}
	}
	return nil
}

// targetString is "ns/name" or "cluster:ns/name".
func targetString(cluster, ns, name string) string {
	if cluster == "" {
		return ns + "/" + name
	}
	return cluster + ":" + ns + "/" + name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	// Only collects the keys, sorted below.
	//workflowcheck:ignore
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
