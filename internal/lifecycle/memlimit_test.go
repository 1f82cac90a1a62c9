package lifecycle

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")

	write := func(dir, file, content string) string {
		p := filepath.Join(dir, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	v2 := write(t.TempDir(), "memory.max", "536870912\n")
	if got, want := SetMemoryLimit(v2), int64(483183820); got != want {
		t.Errorf("cgroup v2 512Mi: limit %d, want %d (90%%)", got, want)
	}
	if got := debug.SetMemoryLimit(-1); got != 483183820 {
		t.Errorf("runtime limit %d after SetMemoryLimit, want 483183820", got)
	}
	v1 := write(t.TempDir(), "memory/memory.limit_in_bytes", "1073741824")
	if got := SetMemoryLimit(v1); got != 966367641 {
		t.Errorf("cgroup v1 1Gi: limit %d, want 966367641", got)
	}
	for name, dir := range map[string]string{
		"v2 max":        write(t.TempDir(), "memory.max", "max\n"),
		"v1 unlimited":  write(t.TempDir(), "memory/memory.limit_in_bytes", "9223372036854771712"),
		"no cgroup":     t.TempDir(),
		"garbage value": write(t.TempDir(), "memory.max", "lots"),
	} {
		if got := SetMemoryLimit(dir); got != 0 {
			t.Errorf("%s: limit %d, want none", name, got)
		}
	}
	t.Setenv("GOMEMLIMIT", "300MiB")
	if got := SetMemoryLimit(v2); got != 0 {
		t.Errorf("with GOMEMLIMIT set: limit %d, want none (the environment wins)", got)
	}
}
