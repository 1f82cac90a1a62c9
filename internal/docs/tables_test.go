package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/k8s"
)

const root = "../../"

func read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(root + file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of file's "## title" section, up to the next "## ".
func section(t *testing.T, file, title string) string {
	t.Helper()
	s := read(t, file)
	i := strings.Index(s, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", file, title)
	}
	s = s[i+len(title)+5:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// tableRows is the cells of each row of the Markdown tables in s (the header and the
// separator left out).
func tableRows(s string) [][]string {
	var rows [][]string
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") || (i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---")) {
			continue
		}
		rows = append(rows, splitRow(strings.TrimSpace(l)))
	}
	return rows
}

// splitRow splits a table row at its pipes, but not at \| nor inside `code`.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case c == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// stringConsts is every string constant of the Go files of dir (tests left out) whose name
// matches name, by name, with its value.
func stringConsts(t *testing.T, dir string, name *regexp.Regexp) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) || !name.MatchString(n.Name) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

var flagName = regexp.MustCompile("`--([a-z][a-z0-9-]*)`")

// TestOperationsSettings: docs/operations.md's configuration reference has a row for every
// setting (config.Flags, the worker's, which hold every one), each with its ROLLOUT_* variable
// and its default, and no row for a setting that does not exist.
func TestOperationsSettings(t *testing.T) {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.Flags(fs)
	seen := map[string]bool{}
	for _, row := range tableRows(section(t, "docs/operations.md", "Configuration reference")) {
		if len(row) < 4 {
			t.Errorf("row %q: want 4 cells", row)
			continue
		}
		names := flagName.FindAllStringSubmatch(row[0], -1)
		if len(names) == 0 {
			t.Errorf("row %q names no flag", row[0])
		}
		for _, m := range names {
			f := fs.Lookup(m[1])
			if f == nil {
				t.Errorf("docs/operations.md: --%s is no setting", m[1])
				continue
			}
			seen[f.Name] = true
			if env := config.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")); !strings.Contains(row[1], "`"+env+"`") {
				t.Errorf("docs/operations.md: --%s: env %q, want %s", f.Name, row[1], env)
			}
			checkDefault(t, f, row[2])
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !seen[f.Name] {
			t.Errorf("docs/operations.md's configuration reference lacks --%s", f.Name)
		}
	})
}

// checkDefault: the default cell shows f's default; an empty, false or zero default may be
// left blank or described ("all", "in-cluster").
func checkDefault(t *testing.T, f *pflag.Flag, cell string) {
	t.Helper()
	plain := strings.ReplaceAll(cell, "`", "")
	if f.Value.Type() == "duration" {
		want, _ := time.ParseDuration(f.DefValue)
		tok, _, _ := strings.Cut(strings.TrimSpace(plain), " ")
		if tok == "0" {
			tok = "0s"
		}
		if got, err := time.ParseDuration(tok); err != nil || got != want {
			t.Errorf("docs/operations.md: --%s: default %q, want %s", f.Name, cell, f.DefValue)
		}
		return
	}
	switch f.DefValue {
	case "", "false", "0":
		if plain != "" && !strings.Contains(plain, f.DefValue) && f.DefValue != "" {
			t.Errorf("docs/operations.md: --%s: default %q, want %s or blank", f.Name, cell, f.DefValue)
		}
		return
	}
	if !strings.Contains(plain, f.DefValue) {
		t.Errorf("docs/operations.md: --%s: default %q, want %s", f.Name, cell, f.DefValue)
	}
}

// annotations is every annotation the code reads or writes: the temporal-rollout.io/ string
// constants named ...Annotation or Annotation... of packages k8s and release (labels, such as
// the analysis Job's, are not annotations).
func annotations(t *testing.T) []string {
	var out []string
	for _, dir := range []string{"k8s", "release"} {
		for _, v := range stringConsts(t, dir, regexp.MustCompile(`^Annotation|Annotation$`)) {
			if strings.HasPrefix(v, "temporal-rollout.io/") {
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	if len(out) < 9 {
		t.Fatalf("found only the annotations %q in the code: has a constant been renamed?", out)
	}
	return out
}

// TestOperationsAnnotations: the annotation table of docs/operations.md (which the README
// calls "the annotations") has exactly the code's temporal-rollout.io/ annotations.
func TestOperationsAnnotations(t *testing.T) {
	var got []string
	for _, row := range tableRows(section(t, "docs/operations.md", "Annotations")) {
		if a := strings.Trim(row[0], "`"); strings.HasPrefix(a, "temporal-rollout.io/") {
			got = append(got, a)
		}
	}
	sort.Strings(got)
	if want := annotations(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/operations.md's annotations:\n  %q\nthe code's:\n  %q", got, want)
	}
}

// phases is every k8s.Phase constant, in the order of the code.
func phases(t *testing.T) []string {
	t.Helper()
	src := read(t, "k8s/types.go")
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*Phase\w+\s+Phase = "(\w+)"`).FindAllStringSubmatch(src, -1) {
		out = append(out, m[1])
	}
	if len(out) < 8 {
		t.Fatalf("found only the phases %q in k8s/types.go", out)
	}
	return out
}

// outcomes is every value of the RolloutOutcome search attribute: a run that ends on its own
// ends at a converged phase other than Paused (a paused rollout stays in its run, see
// workflows/deployment.go), or with one of the contract.Outcome constants.
func outcomes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range phases(t) {
		if k8s.Phase(p).Converged() && k8s.Phase(p) != k8s.PhasePaused {
			out = append(out, p)
		}
	}
	for _, v := range stringConsts(t, "contract", regexp.MustCompile(`^Outcome[A-Z]`)) {
		out = append(out, v)
	}
	sort.Strings(out)
	return slicesCompact(out)
}

func slicesCompact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// backticked is the `words` of s, sorted and without duplicates.
func backticked(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return slicesCompact(out)
}

// TestOperationsOutcomesAndPhases: the cookbook's list of RolloutOutcome values and the status
// query's list of phases are the code's.
func TestOperationsOutcomesAndPhases(t *testing.T) {
	s := section(t, "docs/operations.md", "Temporal CLI cookbook")
	m := regexp.MustCompile(`\(a run's outcome: ([^;)]*)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal(`docs/operations.md: no "(a run's outcome: ..." list`)
	}
	if got, want := backticked(m[1]), outcomes(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/operations.md's outcomes %q, the code's %q", got, want)
	}
	m = regexp.MustCompile(`returns the phase \(([^)]*)\)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal(`docs/operations.md: no "returns the phase (...)" list`)
	}
	want := phases(t)
	sort.Strings(want)
	if got := backticked(m[1]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/operations.md's phases %q, the code's %q", got, want)
	}
}

// TestSearchAttributesNamed: docs/operations.md and docs/codec.md name every search attribute.
func TestSearchAttributesNamed(t *testing.T) {
	for _, file := range []string{"docs/operations.md", "docs/codec.md"} {
		s := read(t, file)
		for _, sa := range contract.SearchAttributes() {
			if !strings.Contains(s, "`"+sa.Name+"`") {
				t.Errorf("%s does not name the search attribute %s", file, sa.Name)
			}
		}
	}
}

// TestCodecClearText: docs/codec.md's list of what stays in clear names every signal, update
// and query of the Deployment, release and freeze workflows (constants Signal..., Update...,
// Query... of packages workflows and release).
func TestCodecClearText(t *testing.T) {
	s := read(t, "docs/codec.md")
	i, j := strings.Index(s, "What stays in clear"), strings.Index(s, "## How it works")
	if i < 0 || j < i {
		t.Fatal(`docs/codec.md: no "What stays in clear" paragraph before "## How it works"`)
	}
	clear := s[i:j]
	for _, dir := range []string{"workflows", "release"} {
		for name, v := range stringConsts(t, dir, regexp.MustCompile(`^(Signal|Update|Query)[A-Z]`)) {
			if !strings.Contains(clear, "`"+v+"`") {
				t.Errorf("docs/codec.md: what stays in clear lacks %s.%s (%q)", dir, name, v)
			}
		}
	}
}

// TestCLIWorkerOnlyFlags: docs/cli.md's list of the worker's own flags is config.WorkerFlags.
func TestCLIWorkerOnlyFlags(t *testing.T) {
	m := regexp.MustCompile(`(?s)The worker's own flags \((.*?)\) belong`).FindStringSubmatch(read(t, "docs/cli.md"))
	if m == nil {
		t.Fatal(`docs/cli.md: no "The worker's own flags (...) belong" sentence`)
	}
	var got, want []string
	for _, f := range flagName.FindAllStringSubmatch(m[1], -1) {
		got = append(got, f[1])
	}
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.WorkerFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) { want = append(want, f.Name) })
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/cli.md's worker flags %q, config.WorkerFlags %q", got, want)
	}
}
