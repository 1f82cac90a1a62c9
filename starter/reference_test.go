package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/config"
)

// update rewrites the generated references instead of comparing them:
//
//	go generate ./starter/ ./worker/     (or: go test ./starter/ -run '^TestCLIReference$' -update)
var updateReference = flag.Bool("update", false, "rewrite docs/reference/cli/ from the commands")

//go:generate go test -run ^TestCLIReference$ -update .

// referenceDir holds the CLI reference generated from the commands (the worker's worker.md is
// written by the worker's test).
const referenceDir = "../docs/reference/cli"

// referenceHeader opens each generated file.
const referenceHeader = "<!-- Generated from the cobra commands by `go generate ./starter/`; do not edit. -->\n\n"

// generateReference writes the reference of every starter command into dir, one file a
// command (cobra/doc's Markdown), as the binary shows them: the completion command included.
func generateReference(t *testing.T, dir string) {
	t.Helper()
	root := newRootCmd()
	root.InitDefaultCompletionCmd()
	var disable func(*cobra.Command)
	disable = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			disable(sub)
		}
	}
	disable(root)
	prepend := func(string) string { return referenceHeader }
	link := func(name string) string { return name }
	if err := doc.GenMarkdownTreeCustom(root, dir, prepend, link); err != nil {
		t.Fatal(err)
	}
}

// starterFiles reads the starter*.md files of dir.
func starterFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "starter*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = b
	}
	return files
}

// TestCLIReference: docs/reference/cli/starter*.md is what the commands generate today, so the
// reference cannot drift from the binary. On a difference: go generate ./starter/.
func TestCLIReference(t *testing.T) {
	tmp := t.TempDir()
	generateReference(t, tmp)
	want := starterFiles(t, tmp)
	if *updateReference {
		old := starterFiles(t, referenceDir)
		if err := os.MkdirAll(referenceDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range old {
			if _, ok := want[name]; !ok {
				if err := os.Remove(filepath.Join(referenceDir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(referenceDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got := starterFiles(t, referenceDir)
	var names []string
	for name := range want {
		names = append(names, name)
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		g, ok := got[name]
		switch w, wok := want[name]; {
		case !ok:
			t.Errorf("docs/reference/cli/%s is missing; run go generate ./starter/", name)
		case !wok:
			t.Errorf("docs/reference/cli/%s names no command; run go generate ./starter/", name)
		case !bytes.Equal(g, w):
			t.Errorf("docs/reference/cli/%s differs from the commands (first difference at line %d); run go generate ./starter/", name, firstDiffLine(g, w))
		}
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// foreignFlags are flags docs/cli.md names of other programs (temporal, jq, brew).
var foreignFlags = map[string]bool{"codec-endpoint": true, "workflow-id": true, "unbuffered": true, "prefix": true}

// TestCLIDocFlags: every --flag docs/cli.md names is a flag of a starter command or of the
// worker, so the guide cannot keep a flag the binaries lost.
func TestCLIDocFlags(t *testing.T) {
	known := map[string]bool{"help": true, "version": true}
	var visit func(*cobra.Command)
	visit = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(newRootCmd())
	all := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.Flags(all)
	all.VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
	b, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(b), -1) {
		if !known[m[1]] && !foreignFlags[m[1]] {
			t.Errorf("docs/cli.md names --%s, which no command has", m[1])
			known[m[1]] = true
		}
	}
}
