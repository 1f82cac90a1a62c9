package activities

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGateOnlyWriter holds the project to one writer of routes and Service selectors: outside
// activities/gate.go no code outside tests writes (Update, Patch, Apply, Create) through a
// Services client or the HTTPRoute resource, whether chained (`.Services(ns).Update(`) or
// through a variable bound to one (`services := ...Services(ns)` then `services.Update(`).
func TestGateOnlyWriter(t *testing.T) {
	root := ".."
	bind := regexp.MustCompile(`(\w+)\s*:?=\s*[^\n]*(\.Services\(|Resource\(HTTPRouteResource\)|Resource\(activities\.HTTPRouteResource\))`)
	chained := regexp.MustCompile(`(\.Services\([^)]*\)|Resource\((activities\.)?HTTPRouteResource\)(\.Namespace\([^)]*\))?)\.(Update|Patch|Apply|Create|UpdateStatus)\(`)
	var offenders []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "e2e", "hack", "testdata", ".dev":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.ToSlash(path) == "../activities/gate.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		checked++
		if loc := chained.FindStringIndex(src); loc != nil {
			offenders = append(offenders, path+": "+src[loc[0]:loc[1]])
		}
		for _, m := range bind.FindAllStringSubmatch(src, -1) {
			v := m[1]
			write := regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\.(Update|Patch|Apply|Create|UpdateStatus)\(`)
			if loc := write.FindStringIndex(src); loc != nil {
				offenders = append(offenders, path+": "+src[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files, want the whole module's", checked)
	}
	if len(offenders) > 0 {
		t.Errorf("routes and Services are written outside activities/gate.go (pass them through the gate):\n%s", strings.Join(offenders, "\n"))
	}
}
