package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestComposeKubeconfig: the worker (a non-root user) reads the host's kubeconfig even when
// only its owner may (mode 600): the one-shot kubeconfig service copies it, as root, into the
// kubeconfig volume, owned by the worker's user, and the worker waits for it and mounts the
// volume read-only. Without a Docker engine the test checks the file, then replays the copy
// step's command on a mode-600 file and reads the result as the worker's user (when it runs
// as root, which chown needs).
func TestComposeKubeconfig(t *testing.T) {
	c := loadCompose(t)
	w, k := c.Services["worker"], c.Services["kubeconfig"]
	if _, ok := c.Volumes["kubeconfig"]; !ok {
		t.Error("no top-level kubeconfig volume")
	}
	if cond := w.DependsOn["kubeconfig"]["condition"]; cond != "service_completed_successfully" {
		t.Errorf("worker depends on kubeconfig with %q, want service_completed_successfully", cond)
	}
	if k.User != "0:0" {
		t.Errorf("kubeconfig service user %q, want 0:0 (it must read a mode-600 file of another user)", k.User)
	}
	wantVolumes := []string{"${KUBECONFIG:-~/.kube/config}:/host/kubeconfig:ro", "kubeconfig:/kube"}
	if strings.Join(k.Volumes, " ") != strings.Join(wantVolumes, " ") {
		t.Errorf("kubeconfig service volumes %q, want %q", k.Volumes, wantVolumes)
	}
	if !pinned.MatchString(k.Image) {
		t.Errorf("kubeconfig service image %q is not pinned", k.Image)
	}
	if len(k.Command) != 3 || k.Command[0] != "sh" || k.Command[1] != "-c" {
		t.Fatalf("kubeconfig service command %q, want sh -c SCRIPT", k.Command)
	}
	script := k.Command[2]
	if !strings.Contains(script, "chown "+w.User+" ") {
		t.Errorf("the copy step does not chown to the worker's user %s: %s", w.User, script)
	}

	// Replay the script with the container's paths moved into a temporary folder.
	if os.Geteuid() != 0 {
		t.Skip("the copy step's chown needs root")
	}
	uid, gid, err := parseUser(w.User)
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir's folders are 0700: the worker's user must reach the copy (as in the
	// container, where the volume is its own).
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host, vol := filepath.Join(dir, "host"), filepath.Join(dir, "kube")
	for _, d := range []string{host, vol} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const kubeconfig = "apiVersion: v1\nkind: Config\n"
	if err := os.WriteFile(filepath.Join(host, "kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(host, "kubeconfig"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer("/host/", host+"/", "/kube/", vol+"/").Replace(script)
	if out, err := exec.Command("sh", "-c", local).CombinedOutput(); err != nil {
		t.Fatalf("the copy step failed: %v: %s", err, out)
	}
	// The worker's user reads it; before the copy step it could not.
	read := func(path string) error {
		cmd := exec.Command("cat", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.Output()
		if err == nil && string(out) != kubeconfig {
			t.Errorf("read %q from %s", out, path)
		}
		return err
	}
	if err := read(filepath.Join(vol, "config")); err != nil {
		t.Errorf("user %s cannot read the copied kubeconfig: %v", w.User, err)
	}
	if err := read(filepath.Join(host, "kubeconfig")); err == nil {
		t.Errorf("user %s reads the mode-600 original: the test proves nothing", w.User)
	}
	if fi, err := os.Stat(filepath.Join(vol, "config")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("copied kubeconfig: %v, mode %v, want 0400", err, fi.Mode().Perm())
	}
}

func parseUser(s string) (uid, gid uint32, err error) {
	u, g, _ := strings.Cut(s, ":")
	a, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return 0, 0, err
	}
	b, err := strconv.ParseUint(g, 10, 32)
	return uint32(a), uint32(b), err
}
