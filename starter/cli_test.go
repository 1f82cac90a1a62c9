package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/temporal-rollout/rollout/internal/version"
	"github.com/temporal-rollout/rollout/internal/zoneinfo"
)

// run executes the command line args and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

var commandNames = []string{"watch", "sync", "pause", "resume", "rollback", "promote", "abort", "status", "codec-server", "probe", "version", "release", "freeze", "thaw", "completion", "help"}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want []string // in stdout
	}{
		{name: "--help", give: []string{"--help"}, want: commandNames},
		{name: "help", give: []string{"help"}, want: commandNames},
		{name: "bare", give: nil, want: commandNames},
		{name: "help status", give: []string{"help", "status"}, want: []string{"Usage:\n  starter status NAMESPACE/NAME [flags]", "--output", "--watch", "--temporal-address", "Examples:"}},
		{name: "status --help", give: []string{"status", "--help"}, want: []string{"Usage:\n  starter status NAMESPACE/NAME [flags]", "--output", "--interval"}},
		{name: "rollback -h", give: []string{"rollback", "-h"}, want: []string{"starter rollback NAMESPACE/NAME [flags]", "--to-revision"}},
		{name: "watch --help", give: []string{"watch", "--help"}, want: []string{"starter watch [flags]", "--kubeconfig", "--resync", "--managed-guard"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.give...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q, want 0 and none", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// TestCommandFlags: each command registers the flags it uses, and none of the worker's.
func TestCommandFlags(t *testing.T) {
	workerOnly := []string{"full", "max-concurrent-syncs", "local-wait", "workflow-cache-size", "prometheus-address"}
	temporal := []string{"temporal-address", "temporal-namespace", "task-queue", "temporal-tls-cert", "temporal-tls-key", "temporal-tls-ca",
		"temporal-tls-server-name", "temporal-api-key", "codec-key-file", "startup-timeout", "log-level", "log-format", "config"}
	kube := []string{"kubeconfig", "kube-qps", "kube-burst", "watch-namespace"}
	watcher := []string{"resync", "search-attributes", "mode", "managed-guard", "metrics-address", "pprof", "shutdown-timeout"}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	tests := []struct {
		give    string
		want    []string
		wantNot []string
	}{
		{give: "status", want: cat(temporal, []string{"output", "watch", "interval"}), wantNot: cat(workerOnly, kube, watcher, []string{"to-revision", "reason", "listen"})},
		{give: "sync", want: cat(temporal, []string{"search-attributes"}), wantNot: cat(workerOnly, kube, []string{"watch", "output", "resync", "managed-guard", "metrics-address"})},
		{give: "pause", want: temporal, wantNot: cat(workerOnly, kube, []string{"watch"})},
		{give: "resume", want: temporal, wantNot: cat(workerOnly, kube, []string{"watch"})},
		{give: "rollback", want: cat(temporal, []string{"to-revision", "search-attributes"}), wantNot: cat(workerOnly, kube, []string{"watch", "reason"})},
		{give: "promote", want: cat(temporal, []string{"full"}), wantNot: cat(kube, []string{"max-concurrent-syncs", "reason", "to-revision", "watch", "search-attributes"})},
		{give: "abort", want: cat(temporal, []string{"reason"}), wantNot: cat(workerOnly, kube, []string{"to-revision", "watch"})},
		{give: "watch", want: cat(temporal, kube, watcher), wantNot: cat(workerOnly, []string{"watch", "output", "to-revision", "reason", "listen"})},
		{give: "codec-server", want: []string{"listen", "codec-cors-origin", "codec-key-file", "shutdown-timeout", "log-level", "log-format", "config"},
			wantNot: cat(workerOnly, kube, []string{"temporal-address", "task-queue", "startup-timeout", "metrics-address"})},
		{give: "probe", wantNot: cat(workerOnly, temporal, kube)},
		{give: "version", wantNot: cat(workerOnly, temporal, kube)},
	}
	root := newRootCmd()
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			cmd, _, err := root.Find([]string{tt.give})
			if err != nil || cmd.Name() != tt.give {
				t.Fatalf("find %s: %v, %v", tt.give, cmd, err)
			}
			for _, f := range tt.want {
				if cmd.Flags().Lookup(f) == nil {
					t.Errorf("--%s missing", f)
				}
			}
			for _, f := range tt.wantNot {
				if cmd.Flags().Lookup(f) != nil {
					t.Errorf("--%s registered, want it absent", f)
				}
			}
		})
	}
}

// TestUsageErrors: a command line that cannot run exits 2 with a clear error first, then the
// command's usage, before anything is dialled.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name      string
		give      []string
		want      string // the first line of stderr
		wantUsage string // in stderr; empty: no usage
	}{
		{name: "status without argument", give: []string{"status"},
			want: "starter: status needs exactly one NAMESPACE/NAME argument, got 0", wantUsage: "Usage:\n  starter status NAMESPACE/NAME [flags]"},
		{name: "promote with two arguments", give: []string{"promote", "a/b", "c/d"},
			want: "starter: promote needs exactly one NAMESPACE/NAME argument, got 2", wantUsage: "starter promote NAMESPACE/NAME [flags]"},
		{name: "argument without a slash", give: []string{"pause", "web"},
			want: `starter: argument "web" is not NAMESPACE/NAME`, wantUsage: "starter pause NAMESPACE/NAME"},
		{name: "invalid namespace", give: []string{"sync", "Shop/web"},
			want: `starter: invalid namespace "Shop"`, wantUsage: "starter sync NAMESPACE/NAME"},
		{name: "unknown command", give: []string{"bogus"},
			want: `starter: unknown command "bogus" for "starter"`, wantUsage: "Usage:\n  starter [flags]\n  starter [command]"},
		{name: "misspelt command", give: []string{"statsu", "shop/web"},
			want: `starter: unknown command "statsu" for "starter"; did you mean status?`, wantUsage: "starter [command]"},
		{name: "worker flag on status", give: []string{"status", "--max-concurrent-syncs", "3", "shop/web"},
			want: "starter: unknown flag: --max-concurrent-syncs", wantUsage: "starter status NAMESPACE/NAME"},
		{name: "kube flag on promote", give: []string{"promote", "--kubeconfig", "k", "shop/web"},
			want: "starter: unknown flag: --kubeconfig", wantUsage: "starter promote NAMESPACE/NAME"},
		{name: "bad output", give: []string{"status", "-o", "xml", "shop/web"},
			want: `starter: --output must be one of text, json, yaml, got "xml"`, wantUsage: "starter status NAMESPACE/NAME"},
		{name: "bad interval", give: []string{"status", "-w", "--interval", "0s", "shop/web"},
			want: "starter: --interval must be > 0, got 0s", wantUsage: "starter status NAMESPACE/NAME"},
		{name: "negative revision", give: []string{"rollback", "--to-revision", "-1", "shop/web"},
			want: "starter: --to-revision must be >= 0, got -1", wantUsage: "starter rollback NAMESPACE/NAME"},
		{name: "watch with an argument", give: []string{"watch", "shop/web"},
			want: `starter: watch takes no arguments, got ["shop/web"]`, wantUsage: "starter watch [flags]"},
		{name: "probe without URL", give: []string{"probe"},
			want: "starter: probe needs exactly one URL argument, got 0", wantUsage: "starter probe URL"},
		{name: "bad setting", give: []string{"status", "--log-level", "loud", "shop/web"},
			want: `starter: invalid configuration: log-level must be debug, info, warn or error, got "loud"`},
		{name: "bad cluster", give: []string{"pause", "--cluster", "eu/west", "shop/web"},
			want: `starter: invalid configuration: cluster: invalid cluster name "eu/west"`},
		{name: "codec-server with an absent key file", give: []string{"codec-server", "--codec-key-file", "/nonexistent/keys"},
			want: "starter: invalid configuration: codec-key-file: read codec key file"},
		{name: "codec-server without key file", give: []string{"codec-server"},
			want: "starter: codec-server needs --codec-key-file (or ROLLOUT_CODEC_KEY_FILE)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ROLLOUT_CODEC_KEY_FILE", "")
			code, stdout, stderr := runCLI(t, tt.give...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			first, _, _ := strings.Cut(stderr, "\n")
			if !strings.HasPrefix(first, tt.want) {
				t.Errorf("first line of stderr %q, want it to start with %q", first, tt.want)
			}
			if hasUsage := strings.Contains(stderr, "Usage:"); hasUsage != (tt.wantUsage != "") || !strings.Contains(stderr, tt.wantUsage) {
				t.Errorf("stderr:\n%s\nwant usage %q", stderr, tt.wantUsage)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, give := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runCLI(t, give...)
		if want := "starter " + version.String() + " (tzdata " + zoneinfo.Version + ")\n"; code != 0 || stdout != want || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, want 0, %q", give, code, stdout, stderr, want)
		}
	}
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "bash", want: "__start_starter"},
		{give: "zsh", want: "#compdef starter"},
		{give: "fish", want: "complete -c starter"},
		{give: "powershell", want: "Register-ArgumentCompleter"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "completion", tt.give)
			if code != 0 || !strings.Contains(stdout, tt.want) {
				t.Errorf("exit %d, stderr %q, stdout lacks %q", code, stderr, tt.want)
			}
		})
	}
	// Flag values complete from the command's own list.
	code, stdout, _ := runCLI(t, "__complete", "status", "shop/web", "-o", "")
	if code != 0 || !strings.Contains(stdout, "text\njson\nyaml\n") {
		t.Errorf("complete status -o: exit %d, %q, want text, json and yaml", code, stdout)
	}
}
