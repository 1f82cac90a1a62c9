package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/version"
)

// TestParseArgs: --help and --version exit 0 on stdout, a bad command line exits 2 with the
// error and the usage on stderr, and the flags run otherwise.
func TestParseArgs(t *testing.T) {
	tests := []struct {
		give       []string
		wantCode   int
		wantRun    bool
		wantStdout string // contained in stdout; empty: none
		wantStderr string // the start of stderr; empty: none
	}{
		{give: []string{"--help"}, wantStdout: "Usage:\n  worker [flags]\n"},
		{give: []string{"-h"}, wantStdout: "Usage:\n  worker [flags]\n"},
		{give: []string{"--version"}, wantStdout: "worker " + version.String() + "\n"},
		{give: []string{"--bogus"}, wantCode: exitUsage, wantStderr: "worker: unknown flag: --bogus\n\nUsage:"},
		{give: []string{"--kube-qps", "many"}, wantCode: exitUsage, wantStderr: `worker: invalid argument "many" for "--kube-qps"`},
		{give: []string{"extra"}, wantCode: exitUsage, wantStderr: `worker: takes no arguments, got ["extra"]`},
		{give: []string{"--watch", "--search-attributes"}, wantRun: true},
		{give: nil, wantRun: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.give, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, run := parseArgs(newFlagSet(), tt.give, &stdout, &stderr)
			if code != tt.wantCode || run != tt.wantRun {
				t.Errorf("code %d, run %v, want %d, %v", code, run, tt.wantCode, tt.wantRun)
			}
			if (tt.wantStdout == "") != (stdout.Len() == 0) || !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if (tt.wantStderr == "") != (stderr.Len() == 0) || !strings.HasPrefix(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to start with %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestUsageFlagNames: no flag's usage has a back-quoted word, which pflag would print as the
// flag's argument (it showed "--watch starter watch", as if --watch took one).
func TestUsageFlagNames(t *testing.T) {
	newFlagSet().VisitAll(func(f *pflag.Flag) {
		if strings.Contains(f.Usage, "`") {
			t.Errorf("--%s: usage %q has a back quote", f.Name, f.Usage)
		}
	})
	help := usage(newFlagSet())
	if !strings.Contains(help, "      --watch   ") {
		t.Errorf("the usage does not show --watch as a flag without argument:\n%s", help)
	}
}
