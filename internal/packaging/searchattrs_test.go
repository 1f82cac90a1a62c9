package packaging

import (
	"os"
	"regexp"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/contract"
)

// wantSearchAttributes is contract.SearchAttributes() as NAME=Type, in order.
func wantSearchAttributes() []string {
	var want []string
	for _, sa := range contract.SearchAttributes() {
		want = append(want, sa.Name+"="+sa.Type.String())
	}
	return want
}

// forLoop is the `for sa in NAME=Type ...; do` list the compose service and the Job run.
var forLoop = regexp.MustCompile(`for sa in ([^;]*); do`)

func loopAttributes(t *testing.T, where, script string) []string {
	t.Helper()
	m := forLoop.FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no `for sa in ...; do` loop in %q", where, script)
	}
	if !strings.Contains(script, `temporal operator search-attribute create`) {
		t.Errorf("%s: the loop does not run temporal operator search-attribute create: %q", where, script)
	}
	return strings.Fields(m[1])
}

// TestSearchAttributesCompose: the admin-tools service registers exactly the list, and the
// worker waits for it to succeed.
func TestSearchAttributesCompose(t *testing.T) {
	c := loadCompose(t)
	s := c.Services["temporal-admin-tools"]
	got := loopAttributes(t, "docker-compose.yml temporal-admin-tools", strings.Join(s.Command, " "))
	if strings.Join(got, " ") != strings.Join(wantSearchAttributes(), " ") {
		t.Errorf("docker-compose.yml registers %v, want %v (contract.SearchAttributes)", got, wantSearchAttributes())
	}
	if cond := c.Services["worker"].DependsOn["temporal-admin-tools"]["condition"]; cond != "service_completed_successfully" {
		t.Errorf("worker depends on temporal-admin-tools with %q, want service_completed_successfully", cond)
	}
}

// TestSearchAttributesDeploy: deploy/base has a Job registering exactly the list on the
// endpoint and namespace config.yaml names, and its kustomization includes it.
func TestSearchAttributesDeploy(t *testing.T) {
	b, err := os.ReadFile("../../deploy/base/search-attributes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		t.Fatalf("deploy/base/search-attributes.yaml: %v", err)
	}
	if job.Kind != "Job" || len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deploy/base/search-attributes.yaml: kind %s with %d containers, want a Job with one", job.Kind, len(job.Spec.Template.Spec.Containers))
	}
	ctr := job.Spec.Template.Spec.Containers[0]
	if !pinned.MatchString(ctr.Image) || !strings.HasPrefix(ctr.Image, "temporalio/") {
		t.Errorf("Job image %q: want a pinned temporalio/ image with the temporal CLI", ctr.Image)
	}
	got := loopAttributes(t, "the Job", strings.Join(append(append([]string{}, ctr.Command...), ctr.Args...), " "))
	if strings.Join(got, " ") != strings.Join(wantSearchAttributes(), " ") {
		t.Errorf("the Job registers %v, want %v (contract.SearchAttributes)", got, wantSearchAttributes())
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	cm, err := os.ReadFile("../../deploy/base/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for key, name := range map[string]string{"temporal-address": "TEMPORAL_ADDRESS", "temporal-namespace": "TEMPORAL_NAMESPACE"} {
		want := regexp.MustCompile(`(?m)^\s+` + key + `: (\S+)$`).FindSubmatch(cm)
		if want == nil || env[name] != string(want[1]) {
			t.Errorf("the Job's %s = %q, config.yaml's %s = %q: they must agree", name, env[name], key, want)
		}
	}
	kust, err := os.ReadFile("../../deploy/base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+- search-attributes\.yaml$`).Match(kust) {
		t.Error("deploy/base/kustomization.yaml does not include search-attributes.yaml")
	}
}

// TestSearchAttributesREADME: every `search-attribute create` in the README is one of the
// list, and each of the list is there.
func TestSearchAttributesREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range regexp.MustCompile(`search-attribute create [^\n]*?--name (\w+) --type (\w+)`).FindAllStringSubmatch(string(b), -1) {
		found[m[1]+"="+m[2]] = true
	}
	want := map[string]bool{}
	for _, sa := range wantSearchAttributes() {
		want[sa] = true
		if !found[sa] {
			t.Errorf("README has no `temporal operator search-attribute create` for %s", sa)
		}
	}
	for sa := range found {
		if !want[sa] {
			t.Errorf("README creates %s, which is not in contract.SearchAttributes", sa)
		}
	}
}

// TestToolsCacheSetting: the tools cache has one name, ROLLOUT_TOOLS, wherever it is read
// (ROLLOUT_TOOLS_CACHE, the old name, only as a fallback after it).
func TestToolsCacheSetting(t *testing.T) {
	for _, f := range []string{"hack/tools.sh", "hack/upstream-e2e.sh"} {
		b, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "cache=${ROLLOUT_TOOLS:-${ROLLOUT_TOOLS_CACHE:-") {
			t.Errorf("%s does not read ROLLOUT_TOOLS first", f)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "export ROLLOUT_TOOLS ?=") {
		t.Error("Makefile does not export ROLLOUT_TOOLS")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "`ROLLOUT_TOOLS` to move it") {
		t.Error("README does not name ROLLOUT_TOOLS as the setting")
	}
}
