package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebianVersion: the version a tools cache records, or the fallback.
func TestDebianVersion(t *testing.T) {
	dir := t.TempDir()
	if got := DebianVersion(dir, "prometheus", "fallback"); got != "fallback" {
		t.Errorf("no record: %q, want the fallback", got)
	}
	rec := "postgresql-15 15.21-0+deb12u1\nprometheus 2.42.0+ds-5+b7\n"
	if err := os.WriteFile(filepath.Join(dir, DebianVersionsFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{"prometheus": "2.42.0+ds-5+b7", "postgresql-15": "15.21-0+deb12u1", "other": "fallback"} {
		if got := DebianVersion(dir, pkg, "fallback"); got != want {
			t.Errorf("%s: %q, want %q", pkg, got, want)
		}
	}
	if got := ToolPath(dir, "prometheus"); got != filepath.Join(dir, "prometheus-2.42.0+ds-5+b7", "prometheus") {
		t.Errorf("ToolPath(prometheus) = %q", got)
	}
	if got := pgBin(dir, "postgres"); got != filepath.Join(dir, "postgresql-15.21-0+deb12u1", "usr", "lib", "postgresql", "15", "bin", "postgres") {
		t.Errorf("pgBin(postgres) = %q", got)
	}
}

// TestDebianVersionShell runs hack/debian-versions.sh's functions, which hack/tools.sh uses,
// against a fake apt-cache: the candidate version is taken when it is in range, refused
// outside it, and recorded where DebianVersion reads it.
func TestDebianVersionShell(t *testing.T) {
	for _, tool := range []string{"bash", "dpkg", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
	}
	script, err := filepath.Abs("../../hack/debian-versions.sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, candidate string // the fake apt-cache policy's Candidate
		pkg, min, below string // shell variables of debian-versions.sh
		wantOut         string
		wantCode        string
	}{
		{"prometheus as pinned before", "2.42.0+ds-5+b6", "PROMETHEUS_PACKAGE", "PROMETHEUS_MIN", "PROMETHEUS_BELOW", "2.42.0+ds-5+b6", "0"},
		{"a newer prometheus 2", "2.53.1+ds-1", "PROMETHEUS_PACKAGE", "PROMETHEUS_MIN", "PROMETHEUS_BELOW", "2.53.1+ds-1", "0"},
		{"prometheus 3", "3.1.0+ds-1", "PROMETHEUS_PACKAGE", "PROMETHEUS_MIN", "PROMETHEUS_BELOW", "", "2"},
		{"an older prometheus", "2.33.5+ds1-2", "PROMETHEUS_PACKAGE", "PROMETHEUS_MIN", "PROMETHEUS_BELOW", "", "2"},
		{"postgresql's next point release", "15.21-0+deb12u1", "POSTGRESQL_PACKAGE", "POSTGRESQL_MIN", "POSTGRESQL_BELOW", "15.21-0+deb12u1", "0"},
		{"postgresql's older point release", "15.18-0+deb12u1", "POSTGRESQL_PACKAGE", "POSTGRESQL_MIN", "POSTGRESQL_BELOW", "15.18-0+deb12u1", "0"},
		{"no candidate", "(none)", "POSTGRESQL_PACKAGE", "POSTGRESQL_MIN", "POSTGRESQL_BELOW", "", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			fake := "#!/bin/sh\nprintf '%s:\\n  Installed: (none)\\n  Candidate: " + tt.candidate + "\\n  Version table:\\n' \"$2\"\n"
			if err := os.WriteFile(filepath.Join(bin, "apt-cache"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", `source "$0"; rc=0; v=$(debian_version "$`+tt.pkg+`" "$`+tt.min+`" "$`+tt.below+`") || rc=$?; echo "$v $rc"`, script)
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.TrimSpace(string(out)), strings.TrimSpace(tt.wantOut+" "+tt.wantCode); got != want {
				t.Errorf("debian_version: %q, want %q", got, want)
			}
		})
	}

	cache := t.TempDir()
	cmd := exec.Command("bash", "-c", `source "$0"; debian_record "$1" prometheus 2.42.0+ds-5+b6; debian_record "$1" postgresql-15 15.20-0+deb12u1; debian_record "$1" prometheus 2.53.1+ds-1; debian_recorded "$1" postgresql-15`, script, cache)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "15.20-0+deb12u1" {
		t.Errorf("debian_recorded postgresql-15: %q", got)
	}
	if got := DebianVersion(cache, "prometheus", ""); got != "2.53.1+ds-1" {
		t.Errorf("DebianVersion(prometheus) after two records: %q, want the last", got)
	}
	if got := DebianVersion(cache, "postgresql-15", ""); got != "15.20-0+deb12u1" {
		t.Errorf("DebianVersion(postgresql-15): %q", got)
	}
}

// TestToolsScriptPicksDebianVersions: hack/tools.sh pins no Debian version: it sources
// hack/debian-versions.sh and downloads the versions it picks.
func TestToolsScriptPicksDebianVersions(t *testing.T) {
	b, err := os.ReadFile("../../hack/tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`source "$here/debian-versions.sh"`, `pick_debian "$PROMETHEUS_PACKAGE"`, `pick_debian "$POSTGRESQL_PACKAGE"`, `debian_record "$cache" "$PROMETHEUS_PACKAGE"`, `debian_record "$cache" "$POSTGRESQL_PACKAGE"`} {
		if !strings.Contains(s, want) {
			t.Errorf("hack/tools.sh lacks %s", want)
		}
	}
	for _, pin := range []string{"PROMETHEUS_VERSION=2", "POSTGRESQL_VERSION=15"} {
		if strings.Contains(s, pin) {
			t.Errorf("hack/tools.sh pins %s...", pin)
		}
	}
}
