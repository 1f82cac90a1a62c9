package zoneinfo

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLoad: zones come from the embedded copy, whatever $ZONEINFO says. $ZONEINFO names a
// database whose Europe/Berlin is Tokyo's zone (+9 all year): time.LoadLocation would read it
// first, and Berlin would be +9.
func TestLoad(t *testing.T) {
	decoy := t.TempDir()
	tokyo := embedded(t, "Asia/Tokyo")
	if err := os.MkdirAll(filepath.Join(decoy, "Europe"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "Europe", "Berlin"), tokyo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZONEINFO", decoy)
	if loc, err := time.LoadLocation("Europe/Berlin"); err != nil || zoneOffset(loc) != 9*3600 {
		t.Fatalf("time.LoadLocation reads the decoy: got %v, %v; the test no longer tells the copies apart", loc, err)
	}
	tests := []struct {
		give       string
		wantOffset int // seconds east of UTC on 2026-07-01 12:00 UTC
		wantErr    bool
	}{
		{give: "Europe/Berlin", wantOffset: 2 * 3600},
		{give: "America/New_York", wantOffset: -4 * 3600},
		{give: "UTC"},
		{give: ""},
		{give: "Mars/Olympus", wantErr: true},
		{give: "../etc/passwd", wantErr: true},
		{give: "+VERSION", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			loc, err := Load(tt.give)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Load(%q) = %v, want an error", tt.give, loc)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if off := zoneOffset(loc); off != tt.wantOffset {
				t.Errorf("offset = %d, want %d", off, tt.wantOffset)
			}
		})
	}
}

func zoneOffset(loc *time.Location) int {
	_, off := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).In(loc).Zone()
	return off
}

// embedded is the named file of the embedded archive.
func embedded(t *testing.T, name string) []byte {
	t.Helper()
	files, err := index()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := files[name]
	if !ok {
		t.Fatalf("no %s in the embedded copy", name)
	}
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEmbeddedVersion: Version is the embedded copy's +VERSION.
func TestEmbeddedVersion(t *testing.T) {
	if got := strings.TrimSpace(string(embedded(t, "+VERSION"))); got != Version {
		t.Errorf("the embedded copy is tzdata %s, Version says %s", got, Version)
	}
}

// TestEmbeddedIsNewest fails when the build machine has a newer tzdata release than the one
// compiled in: its Go toolchain's (lib/time/update.bash, DATA=) or its system's
// (/usr/share/zoneinfo/tzdata.zi, "# version"). Update the copy (zoneinfo.go says how).
func TestEmbeddedIsNewest(t *testing.T) {
	goroot := ""
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	sources := []struct {
		what, path string
		re         *regexp.Regexp
	}{
		{"the Go toolchain", filepath.Join(goroot, "lib", "time", "update.bash"), regexp.MustCompile(`(?m)^DATA=(\d{4}[a-z]+)$`)},
		{"the system", "/usr/share/zoneinfo/tzdata.zi", regexp.MustCompile(`(?m)^# version (\d{4}[a-z]+)$`)},
	}
	found := 0
	for _, s := range sources {
		b, err := os.ReadFile(s.path)
		if err != nil {
			t.Logf("%s: %s: %v", s.what, s.path, err)
			continue
		}
		m := s.re.FindSubmatch(b)
		if m == nil {
			t.Logf("%s: %s names no tzdata release", s.what, s.path)
			continue
		}
		found++
		if v := string(m[1]); newer(v, Version) {
			t.Errorf("%s has tzdata %s (%s), newer than the embedded %s: update internal/zoneinfo/zoneinfo.zip", s.what, v, s.path, Version)
		} else {
			t.Logf("%s has tzdata %s; embedded %s", s.what, v, Version)
		}
	}
	if found == 0 {
		t.Skip("the build machine names no tzdata release")
	}
}

// newer: tzdata release a is after b ("2026a" after "2025c"; "2025aa" after "2025z").
func newer(a, b string) bool {
	if a[:4] != b[:4] {
		return a[:4] > b[:4]
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

func TestNewer(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"2026a", "2025c", true}, {"2025c", "2026a", false}, {"2025c", "2025c", false},
		{"2025d", "2025c", true}, {"2025aa", "2025z", true}, {"2025z", "2025aa", false},
	}
	for _, tt := range tests {
		if got := newer(tt.a, tt.b); got != tt.want {
			t.Errorf("newer(%s, %s) = %t, want %t", tt.a, tt.b, got, tt.want)
		}
	}
}
