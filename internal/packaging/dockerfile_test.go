package packaging

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/internal/zoneinfo"
)

// The tests below check the Dockerfile without a Docker engine: they replay its build stage
// in a temporary folder. They understand what the Dockerfile uses and fail on anything else,
// so that a new instruction is taught to them rather than skipped:
//
//   - instructions: FROM, ARG, ENV, WORKDIR, COPY (no --from in the build stage), RUN; the
//     other stages may use anything, but their COPY --from=<build stage> sources must be
//     files the build stage produced.
//   - RUN: `&&`-joined simple commands, each optionally prefixed by NAME=value assignments,
//     words split as sh does for single and double quotes and backslashes, with $NAME and
//     ${NAME} expanded outside single quotes from the ARG and ENV values. `go mod download`
//     is not run (the module cache is the host's, and the test must not need the network);
//     every `go build` is run as written, with its environment, in the copied tree.
//   - .dockerignore: the subset of Docker's syntax that filepath.Match covers: one pattern
//     a line, # comments, a leading or trailing / ignored, ! re-including, the last matching
//     line winning, and a pattern excluding a folder excluding all below it. `**` is not
//     supported, and TestDockerignore refuses it.

// instruction is one Dockerfile instruction with its line continuations joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// stage is one FROM and the instructions under it.
type stage struct {
	name  string
	image string
	ins   []instruction
}

func parseDockerfile(r io.Reader) ([]stage, error) {
	var stages []stage
	sc := bufio.NewScanner(r)
	var cur strings.Builder
	n, start := 0, 0
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return nil
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				return nil // a global ARG before the first FROM
			}
			return fmt.Errorf("line %d: %s before FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments, the syntax directive included; also inside a continuation
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return stages, flush()
}

// shellWords splits a simple command as sh does for quotes and backslashes, expanding $NAME
// and ${NAME} from vars outside single quotes. It reports the words and whether each word is
// an assignment (NAME=value before the command name).
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	expand := func(i int) (string, int, error) {
		// s[i] == '$'
		if i+1 < len(s) && s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", 0, fmt.Errorf("unterminated ${ in %q", s)
			}
			name := s[i+2 : i+end]
			v, ok := vars[name]
			if !ok {
				return "", 0, fmt.Errorf("${%s} is neither an ARG nor an ENV of the stage", name)
			}
			return v, i + end + 1, nil
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i+1 {
			return "$", j, nil
		}
		v, ok := vars[s[i+1:j]]
		if !ok {
			return "", 0, fmt.Errorf("$%s is neither an ARG nor an ENV of the stage", s[i+1:j])
		}
		return v, j, nil
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated \" in %q", s)
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					w.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '$' {
					v, next, err := expand(i)
					if err != nil {
						return nil, err
					}
					w.WriteString(v)
					i = next
					continue
				}
				if s[i] == '`' {
					return nil, fmt.Errorf("command substitution in %q", s)
				}
				w.WriteByte(s[i])
				i++
			}
		case c == '\\':
			if i+1 < len(s) {
				w.WriteByte(s[i+1])
			}
			inWord = true
			i += 2
		case c == '$':
			v, next, err := expand(i)
			if err != nil {
				return nil, err
			}
			w.WriteString(v)
			inWord = true
			i = next
		case strings.IndexByte("|;&<>`(){}*?[]", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q the test does not replay in %q", c, s)
		default:
			w.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// command is one simple command of a RUN: its assignments and its argv.
type command struct {
	env  []string
	argv []string
}

func parseRun(args string, vars map[string]string) ([]command, error) {
	if strings.HasPrefix(strings.TrimSpace(args), "[") {
		return nil, fmt.Errorf("exec-form RUN %s: the test replays only the shell form", args)
	}
	var cmds []command
	for _, part := range strings.Split(args, "&&") {
		words, err := shellWords(part, vars)
		if err != nil {
			return nil, err
		}
		var c command
		for len(words) > 0 && assignment.MatchString(words[0]) {
			c.env = append(c.env, words[0])
			words = words[1:]
		}
		if len(words) == 0 {
			return nil, fmt.Errorf("empty command in RUN %s", args)
		}
		c.argv = words
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// dockerignore is the parsed .dockerignore (see the subset above).
type dockerignore []ignoreRule

// ignoreRule is one line: a pattern that excludes, or re-includes (a ! line).
type ignoreRule struct {
	pattern string
	exclude bool
}

func parseDockerignore(text string) (dockerignore, error) {
	var d dockerignore
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		exclude := true
		if strings.HasPrefix(line, "!") {
			exclude, line = false, strings.TrimSpace(line[1:])
		}
		if strings.Contains(line, "**") {
			return nil, fmt.Errorf(".dockerignore line %d: %q: ** is not in the subset the test implements", n+1, line)
		}
		p := path.Clean(strings.Trim(line, "/"))
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf(".dockerignore line %d: %q: %w", n+1, line, err)
		}
		d = append(d, ignoreRule{p, exclude})
	}
	return d, nil
}

// excluded reports whether rel (slash-separated, relative to the context) is left out of the
// build context: the last line matching rel or one of its parent folders decides.
func (d dockerignore) excluded(rel string) bool {
	out := false
	for _, p := range d {
		for q := rel; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(p.pattern, q); ok {
				out = p.exclude
				break
			}
		}
	}
	return out
}

// reincludes reports whether a ! line may bring back a file below an excluded folder.
func (d dockerignore) reincludes() bool {
	for _, p := range d {
		if !p.exclude {
			return true
		}
	}
	return false
}

// copyInto reproduces `COPY src dest` from the context ctxDir into root (the image's /):
// a folder's contents are copied into dest, a file to dest (or into it when dest ends in /
// or several sources are copied).
func copyInto(ctxDir, root, workdir string, ignore dockerignore, srcs []string, dest string) error {
	intoDir := len(srcs) > 1 || strings.HasSuffix(dest, "/") || dest == "."
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	for _, src := range srcs {
		if strings.ContainsAny(src, "*?[") {
			return fmt.Errorf("COPY %s: wildcards are not replayed by the test", src)
		}
		rel := path.Clean(strings.TrimPrefix(src, "/"))
		if strings.HasPrefix(rel, "..") {
			return fmt.Errorf("COPY %s: outside the context", src)
		}
		from := filepath.Join(ctxDir, filepath.FromSlash(rel))
		info, err := os.Stat(from)
		if err != nil || (rel != "." && ignore.excluded(rel)) {
			return fmt.Errorf("COPY %s: not in the build context (missing or .dockerignore'd): %v", src, err)
		}
		if !info.IsDir() {
			to := filepath.Join(root, filepath.FromSlash(dest))
			if intoDir {
				to = filepath.Join(to, filepath.Base(from))
			}
			if err := copyFile(from, to, info.Mode()); err != nil {
				return err
			}
			continue
		}
		to := filepath.Join(root, filepath.FromSlash(dest))
		err = filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			r, _ := filepath.Rel(ctxDir, p)
			r = filepath.ToSlash(r)
			if r != "." && ignore.excluded(r) {
				if e.IsDir() && !ignore.reincludes() {
					return filepath.SkipDir
				}
				return nil
			}
			sub, _ := filepath.Rel(from, p)
			target := filepath.Join(to, sub)
			if e.IsDir() {
				return os.MkdirAll(target, 0o755)
			}
			if !e.Type().IsRegular() {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			return copyFile(p, target, fi.Mode())
		})
		if err != nil {
			return fmt.Errorf("COPY %s: %w", src, err)
		}
	}
	return nil
}

func copyFile(from, to string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode.Perm()|0o200)
}

// buildStage is the stage the final image copies its binaries from.
func buildStage(t *testing.T, stages []stage) (build stage, outputs []string) {
	t.Helper()
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a multi-stage build", len(stages))
	}
	final := stages[len(stages)-1]
	for _, in := range final.ins {
		if in.cmd != "COPY" || !strings.HasPrefix(in.args, "--from=") {
			continue
		}
		f := strings.Fields(in.args)
		from := strings.TrimPrefix(f[0], "--from=")
		for _, s := range stages[:len(stages)-1] {
			if s.name == from {
				build = s
			}
		}
		if build.name == "" {
			t.Fatalf("line %d: COPY --from=%s names no earlier stage", in.line, from)
		}
		outputs = append(outputs, f[1:len(f)-1]...)
	}
	if build.name == "" {
		t.Fatal("the final stage copies nothing from a build stage")
	}
	return build, outputs
}

// TestDockerfileBuilds replays the Dockerfile's build stage (see the top of this file): its
// COPY lines from this repository through .dockerignore into a temporary root, then its
// `go build` commands as written, and checks that every file the final stage copies from it
// was built. A COPY of a list of folders that misses a package fails here with the error
// `docker build` would print.
func TestDockerfileBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	ctxDir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(ctxDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages, err := parseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	build, outputs := buildStage(t, stages)
	if len(outputs) == 0 {
		t.Fatal("the final stage copies no file from the build stage")
	}
	ignoreText, err := os.ReadFile(filepath.Join(ctxDir, ".dockerignore"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	ignore, err := parseDockerignore(string(ignoreText))
	if err != nil {
		t.Fatal(err)
	}

	root := t.TempDir() // the build stage's /
	gocache := os.Getenv("GOCACHE")
	if gocache == "" {
		out, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			t.Fatal(err)
		}
		gocache = strings.TrimSpace(string(out))
	}
	// Absolute paths in the stage are under root; the host's module and build caches stand in
	// for the image's.
	inRoot := func(p string) string {
		if path.IsAbs(p) {
			return filepath.Join(root, filepath.FromSlash(p))
		}
		return p
	}
	// As `docker build --build-arg VERSION=...` would: the binaries must report it.
	const testVersion = "0.0.0-dockerfile-test"
	buildArgs := map[string]string{"VERSION": testVersion}
	vars := map[string]string{}
	var env []string
	workdir := "/"
	builds := 0
	for _, in := range build.ins {
		switch in.cmd {
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
			if err := os.MkdirAll(inRoot(workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			vars[name] = strings.Trim(def, `"`)
			if v, ok := buildArgs[name]; ok {
				vars[name] = v
			}
		case "ENV":
			name, val, ok := strings.Cut(in.args, "=")
			if !ok {
				t.Fatalf("line %d: ENV %s: only ENV NAME=value is replayed", in.line, in.args)
			}
			vars[name] = strings.Trim(val, `"`)
			env = append(env, name+"="+vars[name])
		case "COPY":
			f := strings.Fields(in.args)
			if strings.HasPrefix(f[0], "--") {
				t.Fatalf("line %d: COPY %s: flags are not replayed in the build stage", in.line, in.args)
			}
			if err := copyInto(ctxDir, root, workdir, ignore, f[:len(f)-1], f[len(f)-1]); err != nil {
				t.Fatalf("line %d: %v", in.line, err)
			}
		case "RUN":
			cmds, err := parseRun(in.args, vars)
			if err != nil {
				t.Fatalf("line %d: %v", in.line, err)
			}
			for _, c := range cmds {
				switch {
				case len(c.argv) == 3 && c.argv[0] == "go" && c.argv[1] == "mod" && c.argv[2] == "download":
					continue
				case len(c.argv) >= 2 && c.argv[0] == "go" && c.argv[1] == "build":
				default:
					t.Fatalf("line %d: RUN %q: the test replays only `go mod download` and `go build`", in.line, c.argv)
				}
				argv := append([]string(nil), c.argv...)
				for i := range argv {
					if i > 0 && argv[i-1] == "-o" {
						argv[i] = inRoot(argv[i])
					}
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Dir = inRoot(workdir)
				cmd.Env = append(os.Environ(), "GOCACHE="+gocache, "GOFLAGS=", "GOWORK=off")
				cmd.Env = append(append(cmd.Env, env...), c.env...)
				t.Logf("line %d: %s %s", in.line, strings.Join(c.env, " "), strings.Join(c.argv, " "))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("line %d: %s %s: %v\n%s", in.line, strings.Join(c.env, " "), strings.Join(c.argv, " "), err, out)
				}
				builds++
			}
		default:
			t.Fatalf("line %d: %s in the build stage is not replayed by the test", in.line, in.cmd)
		}
	}
	if builds == 0 {
		t.Fatal("the build stage runs no go build")
	}
	for _, o := range outputs {
		fi, err := os.Stat(inRoot(o))
		if err != nil {
			t.Errorf("the final stage copies %s, which the build stage did not produce: %v", o, err)
			continue
		}
		if fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable (mode %v)", o, fi.Mode())
			continue
		}
		if _, ok := vars["VERSION"]; !ok {
			t.Errorf("the build stage declares no ARG VERSION: the binaries cannot report a release")
			continue
		}
		arg := map[string]string{"worker": "--version", "starter": "version"}[path.Base(o)]
		if arg == "" {
			continue
		}
		out, err := exec.Command(inRoot(o), arg).CombinedOutput()
		// The version, and the tzdata release compiled in (internal/zoneinfo).
		if want := path.Base(o) + " " + testVersion + " (tzdata " + zoneinfo.Version + ")\n"; err != nil || string(out) != want {
			t.Errorf("%s %s = %q (%v), want %q", o, arg, out, err, want)
		}
	}
}

func TestDockerignoreMatching(t *testing.T) {
	ignore, err := parseDockerignore("# comment\n.git\n/bin/\n*.out\nhack/tools\ndocs\n!docs/keep.md\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		give string
		want bool
	}{
		{give: ".git", want: true},
		{give: ".git/config", want: true},
		{give: "bin/worker", want: true},
		{give: "e2e.out", want: true},
		{give: "e2e/e2e.out", want: false}, // * does not cross /
		{give: "hack/tools/etcd/go.mod", want: true},
		{give: "hack/tools.sh", want: false},
		{give: "docs/a.png", want: true},
		{give: "docs/keep.md", want: false},
		{give: "worker/main.go", want: false},
	}
	for _, tt := range tests {
		if got := ignore.excluded(tt.give); got != tt.want {
			t.Errorf("excluded(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}
	if _, err := parseDockerignore("e2e/**/out\n"); err == nil {
		t.Error("a ** pattern parsed; the subset does not cover it")
	}
}

func TestShellWords(t *testing.T) {
	vars := map[string]string{"VERSION": "1.2.3"}
	tests := []struct {
		give string
		want []string
	}{
		{give: `CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/worker ./worker`,
			want: []string{"CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/worker", "./worker"}},
		{give: `go build -ldflags="-X main.v=${VERSION} -X main.w=$VERSION"`,
			want: []string{"go", "build", "-ldflags=-X main.v=1.2.3 -X main.w=1.2.3"}},
		{give: `echo '$VERSION' "a\"b"`, want: []string{"echo", "$VERSION", `a"b`}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.give, vars)
		if err != nil {
			t.Errorf("shellWords(%q): %v", tt.give, err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("shellWords(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
