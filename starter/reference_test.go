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
	"time"

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
var foreignFlags = map[string]bool{"codec-endpoint": true, "workflow-id": true, "unbuffered": true, "prefix": true, "name": true, "input": true}

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

// TestCLIDocDefaults: the defaults in docs/cli.md's flag tables are the commands' (a flag on
// several commands may show any of its defaults; an empty, false or zero default may be
// described instead, "in-cluster", "all").
func TestCLIDocDefaults(t *testing.T) {
	defaults := map[string][]*pflag.Flag{}
	var visit func(*cobra.Command)
	visit = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { defaults[f.Name] = append(defaults[f.Name], f) })
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(newRootCmd())
	b, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	flagRe := regexp.MustCompile("`--([a-z][a-z0-9-]*)`")
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| `--") || len(cells) < 3 {
			continue
		}
		names := flagRe.FindAllStringSubmatch(cells[0], -1)
		values := strings.Split(strings.TrimSpace(cells[1]), ", ")
		for i, m := range names {
			cell := strings.TrimSpace(cells[1])
			if len(values) == len(names) {
				cell = values[i]
			}
			fs := defaults[m[1]]
			if len(fs) == 0 {
				t.Errorf("docs/cli.md: --%s is no flag of a starter command", m[1])
				continue
			}
			if !anyDefault(fs, strings.Trim(cell, "` ")) {
				t.Errorf("docs/cli.md: --%s default %q, the commands' %q", m[1], cell, fs[0].DefValue)
			}
		}
	}
}

func anyDefault(fs []*pflag.Flag, cell string) bool {
	for _, f := range fs {
		switch {
		case f.Value.Type() == "duration":
			want, _ := time.ParseDuration(f.DefValue)
			if cell == "0" {
				cell = "0s"
			}
			if got, err := time.ParseDuration(cell); err == nil && got == want {
				return true
			}
		case cell == f.DefValue:
			return true
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0":
			if cell == "" || !strings.ContainsAny(cell[:1], "0123456789:") {
				return true
			}
		}
	}
	return false
}
