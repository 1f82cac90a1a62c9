package packaging

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/kube"
)

const rbacPath = "../../deploy/base/rbac.yaml"

// rbacDocs reads rbac.yaml's ServiceAccount, ClusterRole and ClusterRoleBinding, and fails on
// any other kind.
func rbacDocs(t *testing.T) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, string) {
	t.Helper()
	b, err := os.ReadFile(rbacPath)
	if err != nil {
		t.Fatal(err)
	}
	var (
		role    *rbacv1.ClusterRole
		binding *rbacv1.ClusterRoleBinding
		sa      string
	)
	for i, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rbac.yaml document %d: %v", i, err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			sa = meta.Metadata.Name
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict(doc, role)
		case "ClusterRoleBinding":
			binding = &rbacv1.ClusterRoleBinding{}
			err = yaml.UnmarshalStrict(doc, binding)
		default:
			t.Errorf("rbac.yaml document %d is a %q; want only the ServiceAccount, ClusterRole and ClusterRoleBinding", i, meta.Kind)
		}
		if err != nil {
			t.Fatalf("rbac.yaml %s: %v", meta.Kind, err)
		}
	}
	if role == nil || binding == nil || sa == "" {
		t.Fatalf("rbac.yaml: ServiceAccount %q, ClusterRole %v, ClusterRoleBinding %v: want all three", sa, role != nil, binding != nil)
	}
	return role, binding, sa
}

func triple(group, resource, verb string) string {
	if group == "" {
		group = `""`
	}
	return group + " " + resource + " " + verb
}

// TestRBACGrantsWhatTheCodeCalls: deploy/base/rbac.yaml's ClusterRole grants each (group,
// resource, verb) of kube.Permissions, the audited list of the worker's and watcher's API
// calls, and nothing else: no wildcard, no resourceNames or non-resource URLs, no verb or
// resource the code does not call. Its binding gives it to the ServiceAccount deploy/ runs the
// workers as, and neither mode's kustomization adds or patches any RBAC.
func TestRBACGrantsWhatTheCodeCalls(t *testing.T) {
	role, binding, sa := rbacDocs(t)
	granted := map[string]bool{}
	for i, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %d has resourceNames or nonResourceURLs: %+v", i, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %d has a wildcard: %+v", i, r)
					}
					k := triple(g, res, v)
					if granted[k] {
						t.Errorf("rbac.yaml grants %s twice", k)
					}
					granted[k] = true
				}
			}
		}
	}
	needed := map[string]bool{}
	for _, p := range kube.Permissions {
		if p.Where == "" {
			t.Errorf("kube.Permissions %s %s says not where it is called", p.Group, p.Resource)
		}
		for _, v := range p.Verbs {
			k := triple(p.Group, p.Resource, v)
			if needed[k] {
				t.Errorf("kube.Permissions lists %s twice", k)
			}
			needed[k] = true
		}
	}
	var missing, extra []string
	for k := range needed {
		if !granted[k] {
			missing = append(missing, k)
		}
	}
	for k := range granted {
		if !needed[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("rbac.yaml does not grant what the code calls (kube.Permissions): %s", strings.Join(missing, "; "))
	}
	if len(extra) > 0 {
		t.Errorf("rbac.yaml grants what the code never calls (not in kube.Permissions): %s", strings.Join(extra, "; "))
	}

	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("binding's roleRef %+v, want the ClusterRole %s", binding.RoleRef, role.Name)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "temporal-rollout"}}
	if fmt.Sprint(binding.Subjects) != fmt.Sprint(want) {
		t.Errorf("binding's subjects %+v, want %+v", binding.Subjects, want)
	}

	// No RBAC anywhere else under deploy/ (managed mode shares base's).
	err := filepath.WalkDir("../../deploy", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) == "rbac.yaml" || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range []string{"kind: Role", "kind: ClusterRole", "rbac.authorization.k8s.io"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s has %q: the worker's RBAC is deploy/base/rbac.yaml's alone", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rbacTable is kube.Permissions as docs/operations.md's table.
func rbacTable() string {
	var b strings.Builder
	b.WriteString("| API group | resource | verbs | called by |\n|---|---|---|---|\n")
	for _, p := range kube.Permissions {
		g := p.Group
		if g == "" {
			g = `"" (core)`
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g, p.Resource, strings.Join(p.Verbs, ", "), p.Where)
	}
	return b.String()
}

// TestRBACDocs: docs/operations.md's RBAC table is kube.Permissions.
func TestRBACDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- rbac-table: kube.Permissions; TestRBACDocs checks it -->\n", "<!-- end rbac-table -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/operations.md has no %q ... %q section", strings.TrimSpace(begin), end)
	}
	if got, want := doc[i+len(begin):j], rbacTable(); got != want {
		t.Errorf("docs/operations.md's RBAC table is not kube.Permissions; want:\n%s", want)
	}
}

// TestRBACCallersExist: every function kube.Permissions names as a caller (a `name` or
// `pkg.Name` in Where) is declared in the worker's or watcher's code, so that a renamed or
// removed caller sends its author to the list (and to rbac.yaml).
func TestRBACCallersExist(t *testing.T) {
	declared := map[string]bool{}
	for _, dir := range []string{"activities", "kube", "watcher", "worker", "starter"} {
		files, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok {
					declared[fn.Name.Name] = true
				}
			}
		}
	}
	ident := regexp.MustCompile("`(?:[a-z]+\\.)?([A-Za-z][A-Za-z0-9]*)`")
	for _, p := range kube.Permissions {
		for _, m := range ident.FindAllStringSubmatch(p.Where, -1) {
			if strings.Contains(m[0], ".go") || strings.Contains(m[0], "k8s.io") {
				continue
			}
			if !declared[m[1]] {
				t.Errorf("kube.Permissions %s %s names %s, which no longer exists", p.Resource, strings.Join(p.Verbs, ","), m[0])
			}
		}
	}
}
