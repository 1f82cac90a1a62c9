package packaging

import (
	"os"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/internal/version"
)

// TestChangelog: CHANGELOG.md has a section for the release the development builds precede
// (version.Dev 0.1.0-dev: "## 0.1.0").
func TestChangelog(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "\n## " + strings.TrimSuffix(version.Dev, "-dev") + "\n"
	if !strings.Contains(string(b), want) {
		t.Errorf("CHANGELOG.md has no %q section", strings.TrimSpace(want))
	}
}
