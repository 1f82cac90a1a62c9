package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestChangesTable: every entry names recorded histories that exist, and the replay of each
// (testdata/golden/replay) says what the entry claims: an Old history asks the ID and takes
// the old branch (version -1), or, when no recorded history takes the old branch, does not ask
// it; a New history holds the marker (version 1).
func TestChangesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range changes() {
		if seen[c.ID] {
			t.Errorf("change %s: twice in the table", c.ID)
		}
		seen[c.ID] = true
		if c.Branch == "" || len(c.Old) == 0 {
			t.Errorf("change %s: needs its branch point and at least one history that replays on the old branch", c.ID)
		}
		oldInCorpus := len(historiesAsking(t, c.ID, -1)) > 0
		for _, h := range c.Old {
			golden := replayGolden(t, h)
			switch asked := strings.Contains(golden, "version "+c.ID+" "); {
			case oldInCorpus && !strings.Contains(golden, "version "+c.ID+" -1\n"):
				t.Errorf("change %s: old history %s does not take the old branch on replay (%s take it)", c.ID, h, strings.Join(historiesAsking(t, c.ID, -1), ", "))
			case !oldInCorpus && asked:
				t.Errorf("change %s: old history %s asks the change and takes the new branch", c.ID, h)
			}
		}
		for _, h := range c.New {
			if !strings.Contains(replayGolden(t, h), "version "+c.ID+" 1\n") {
				t.Errorf("change %s: new history %s holds no marker", c.ID, h)
			}
		}
	}
}

// replayGolden is the golden replay record of a history, failing when the history is missing.
func replayGolden(t *testing.T, history string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join("testdata", "histories", history+".json")); err != nil {
		t.Errorf("history: %v", err)
		return ""
	}
	b, err := os.ReadFile(filepath.Join(goldenDir, "replay", history+".golden"))
	if err != nil {
		t.Errorf("golden replay of %s: %v", history, err)
	}
	return string(b)
}

// historiesAsking lists the recorded histories whose replay asks the change and gets version.
func historiesAsking(t *testing.T, id string, version int) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "replay", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	want := "version " + id + " " + strconv.Itoa(version) + "\n"
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), want) {
			out = append(out, strings.TrimSuffix(filepath.Base(f), ".golden"))
		}
	}
	return out
}

// TestChangeIDsFromTable scans workflows/ and k8s/ (not their tests): every workflow.GetVersion
// names a constant of the table, except in router.trafficChange, which asks on k8s.DecideTraffic's
// behalf; every question put through router.trafficChange or DecideTraffic's on(...) names one too; a
// change ID is spelled as a string once, in its constant; and every entry of the table is asked
// somewhere.
func TestChangeIDsFromTable(t *testing.T) {
	table := map[string]bool{}
	for _, c := range changes() {
		table[c.ID] = true
	}
	wf := parseDir(t, ".")
	kube := parseDir(t, filepath.Join("..", "k8s"))
	wfConsts, kubeConsts := stringConsts(wf), stringConsts(kube)
	asked := map[string]bool{}
	// resolve gives the ID an argument names: a constant of the package, or k8s.X.
	resolve := func(pkg string, e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.Ident:
			if pkg == "k8s" {
				v, ok := kubeConsts[e.Name]
				return v, ok
			}
			v, ok := wfConsts[e.Name]
			return v, ok
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "k8s" {
				v, ok := kubeConsts[e.Sel.Name]
				return v, ok
			}
		}
		return "", false
	}
	check := func(pkg string, fset *token.FileSet, e ast.Expr, what string) {
		id, ok := resolve(pkg, e)
		switch {
		case !ok:
			t.Errorf("%s: %s names no change ID constant", fset.Position(e.Pos()), what)
		case !table[id]:
			t.Errorf("%s: %s asks %q, which is not in the table (changes.go)", fset.Position(e.Pos()), what, id)
		default:
			asked[id] = true
		}
	}
	for _, p := range []parsed{wf, kube} {
		for _, f := range p.files {
			var fn string
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					fn = n.Name.Name
				case *ast.CallExpr:
					switch {
					case isSelector(n.Fun, "workflow", "GetVersion") && len(n.Args) > 1:
						if id, ok := n.Args[1].(*ast.Ident); ok && p.name == "workflows" && fn == "trafficChange" && id.Name == "change" {
							return true
						}
						check(p.name, p.fset, n.Args[1], "workflow.GetVersion")
					case p.name == "workflows" && isTrafficChangeCall(n) && len(n.Args) == 1:
						check(p.name, p.fset, n.Args[0], "router.trafficChange")
					case p.name == "k8s" && isIdent(n.Fun, "on") && len(n.Args) == 1:
						check(p.name, p.fset, n.Args[0], "on")
					}
				case *ast.BasicLit:
					if n.Kind != token.STRING {
						return true
					}
					if s, err := strconv.Unquote(n.Value); err == nil && table[s] && !p.declares(n) {
						t.Errorf("%s: change ID %q spelled out; use its constant", p.fset.Position(n.Pos()), s)
					}
				}
				return true
			})
		}
	}
	for _, c := range changes() {
		if !asked[c.ID] {
			t.Errorf("change %s: in the table, asked nowhere", c.ID)
		}
	}
	for name, v := range wfConsts {
		if strings.HasPrefix(name, "change") && !table[v] {
			t.Errorf("constant %s = %q: a change ID not in the table", name, v)
		}
	}
	for name, v := range kubeConsts {
		if strings.HasPrefix(name, "Change") && !strings.HasSuffix(name, "Annotation") && !table[v] {
			t.Errorf("k8s.%s = %q: a change ID not in the table", name, v)
		}
	}
}

// TestChangesInVersioningDoc: docs/versioning.md's table of the rollout workflow's changes has a
// row for each ID of the table, and names no other.
func TestChangesInVersioningDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "versioning.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(b), "## The release workflow")
	_, doc, _ = strings.Cut(doc, "## Changes since 0.1")
	var inDoc []string
	for line := range strings.SplitSeq(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(cells[1], -1) {
			inDoc = append(inDoc, m[1])
		}
	}
	var inTable []string
	for _, c := range changes() {
		inTable = append(inTable, c.ID)
		if !slices.Contains(inDoc, c.ID) {
			t.Errorf("change %s: no row in docs/versioning.md", c.ID)
		}
	}
	for _, id := range inDoc {
		if !slices.Contains(inTable, id) {
			t.Errorf("docs/versioning.md: change %s is not in the table (workflows/changes.go)", id)
		}
	}
}

type parsed struct {
	name  string
	fset  *token.FileSet
	files []*ast.File
	// consts are the positions of the string literals that declare constants.
	consts map[token.Pos]bool
}

func (p parsed) declares(lit *ast.BasicLit) bool { return p.consts[lit.Pos()] }

// parseDir parses the Go files of a directory but its tests.
func parseDir(t *testing.T, dir string) parsed {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	p := parsed{fset: token.NewFileSet(), consts: map[token.Pos]bool{}}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.name = f.Name.Name
		p.files = append(p.files, f)
	}
	return p
}

// stringConsts maps each string constant of the package to its value, and marks where it is
// declared.
func stringConsts(p parsed) map[string]string {
	out := map[string]string{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							out[name.Name] = v
							p.consts[lit.Pos()] = true
						}
					}
				}
			}
		}
	}
	return out
}

func isSelector(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && s.Sel.Name == name && isIdent(s.X, pkg)
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// isTrafficChangeCall: rt.trafficChange(ctx)(X), r.route.trafficChange(ctx)(X).
func isTrafficChangeCall(c *ast.CallExpr) bool {
	inner, ok := c.Fun.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := inner.Fun.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "trafficChange"
}
