package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The citation convention. A measured figure in README.md or docs/ (a number with a unit of
// time, a percentage, a count of events or CPU-seconds, in a block that says it was measured:
// "measured", "took", "median", "benchmark", "about", "N runs", "run of") cites the dated BENCHMARKS.md
// entry it comes from, in the same block (paragraph, list item or table row), as a link
// [...](BENCHMARKS.md#<anchor>) (../BENCHMARKS.md from docs/) whose anchor is GitHub's anchor
// of a BENCHMARKS.md heading that starts with its date, "### 2026-11-27, 13:57–15:10 UTC: ...".
// A setting's value or a bound the code enforces is no measurement: write it as `code`, or
// without the measuring words. Code blocks and `code` are not read.

var (
	figure   = regexp.MustCompile(`(?:^|[^\w.\-/])~?\d[\d,.]*(?:\s*(?:–|-|to)\s*\d[\d,.]*)?\s?(?:ms|s|seconds?|minutes?|min|h|hours?|%|events|CPU-s(?:econds)?)(?:\W|$)`)
	measured = regexp.MustCompile(`(?i)\b(?:measured|took|median|benchmark|about|(?:\d+|one|two|three|four|five|six|ten) runs?|runs? of)\b`)
	cite     = regexp.MustCompile(`\]\((?:\.\./)?BENCHMARKS\.md#([\w-]+)\)`)
	fence    = regexp.MustCompile("(?s)```.*?```")
	inline   = regexp.MustCompile("`[^`\n]*`")
	dated    = regexp.MustCompile(`(?m)^#{2,4} (\d{4}-\d{2}-\d{2}.*)$`)
)

// uncited are the blocks with a measured figure that cite no dated entry yet, by file and a
// piece of their text: a debt, not a convention. The test fails when one of them no longer
// needs its place, so the list only shrinks.
var uncited = map[string][]string{}

// slug is GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// blocks splits Markdown into paragraphs, list items and table rows.
func blocks(md string) []string {
	md = fence.ReplaceAllString(md, "")
	return regexp.MustCompile(`\n[ \t]*\n|\n(?:[ \t]*[-*] |\d+\. |\|)`).Split(md, -1)
}

// TestFiguresCiteBenchmarks: every measured figure of README.md and docs/ cites a dated
// BENCHMARKS.md entry (see the convention above).
func TestFiguresCiteBenchmarks(t *testing.T) {
	anchors := map[string]bool{}
	for _, m := range dated.FindAllStringSubmatch(read(t, "BENCHMARKS.md"), -1) {
		anchors[slug(m[1])] = true
	}
	files, err := filepath.Glob(root + "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{root + "README.md"}, files...)
	used := map[string]bool{}
	for _, path := range files {
		file := strings.TrimPrefix(path, root)
		for _, b := range blocks(read(t, file)) {
			plain := inline.ReplaceAllString(b, "")
			for _, m := range cite.FindAllStringSubmatch(b, -1) {
				if !anchors[m[1]] {
					t.Errorf("%s cites BENCHMARKS.md#%s, which is no dated heading of BENCHMARKS.md", file, m[1])
				}
			}
			if !figure.MatchString(plain) || !measured.MatchString(plain) || cite.MatchString(b) {
				continue
			}
			excused := false
			for _, piece := range uncited[file] {
				if strings.Contains(b, piece) {
					excused, used[file+"\x00"+piece] = true, true
				}
			}
			if !excused {
				t.Errorf("%s: a measured figure cites no dated BENCHMARKS.md entry:\n%s", file, strings.TrimSpace(b))
			}
		}
	}
	for file, pieces := range uncited {
		for _, piece := range pieces {
			if !used[file+"\x00"+piece] {
				t.Errorf("uncited[%q] lists %q, which no longer needs it: remove it", file, piece)
			}
		}
	}
}
