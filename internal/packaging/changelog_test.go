package packaging

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/internal/version"
)

// TestChangelog: CHANGELOG.md is a user's changelog in Keep a Changelog's format: an
// [Unreleased] section, then a dated section for the release the development builds precede
// (version.Dev 0.1.0-dev: "## [0.1.0] - YYYY-MM-DD"), sections of Keep a Changelog's kinds
// only, and none of the notes that concern only who develops it.
func TestChangelog(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "\n## [Unreleased]\n") {
		t.Error("CHANGELOG.md has no ## [Unreleased] section")
	}
	release := regexp.QuoteMeta(strings.TrimSuffix(version.Dev, "-dev"))
	if !regexp.MustCompile(`\n## \[` + release + `\] - \d{4}-\d{2}-\d{2}\n`).MatchString(s) {
		t.Errorf("CHANGELOG.md has no dated ## [%s] - YYYY-MM-DD section", release)
	}
	for _, m := range regexp.MustCompile(`(?m)^### (.*)$`).FindAllStringSubmatch(s, -1) {
		switch m[1] {
		case "Added", "Changed", "Deprecated", "Removed", "Fixed", "Security":
		default:
			t.Errorf("CHANGELOG.md: section %q is none of Keep a Changelog's", m[1])
		}
	}
	for _, word := range []string{"change ID", "poller", "replay corpus", "workflow task slot", "e2e "} {
		if strings.Contains(s, word) {
			t.Errorf("CHANGELOG.md mentions %q: a note for developers, not users", word)
		}
	}
}
