package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/version"
	"github.com/temporal-rollout/rollout/internal/zoneinfo"
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
		{give: []string{"--version"}, wantStdout: "worker " + version.String() + " (tzdata " + zoneinfo.Version + ")\n"},
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

// workerReference is the worker's generated reference, beside the starter's.
const workerReference = "../docs/reference/cli/worker.md"

var updateReference = flag.Bool("update", false, "rewrite "+workerReference+" from the flags")

//go:generate go test -run ^TestCLIReference$ -update .

// reference is worker.md: the worker's help, which is its flag set's (pflag, not cobra).
func reference() string {
	return "<!-- Generated from the worker's flags by `go generate ./worker/`; do not edit. -->\n\n" +
		"## worker\n\n```\n" + usage(newFlagSet()) + "```\n\n### SEE ALSO\n\n* [starter](starter.md)\t - the command line\n"
}

// TestCLIReference: docs/reference/cli/worker.md is the worker's help today. On a difference:
// go generate ./worker/.
func TestCLIReference(t *testing.T) {
	want := reference()
	if *updateReference {
		if err := os.WriteFile(workerReference, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(workerReference)
	if err != nil {
		t.Fatalf("%v; run go generate ./worker/", err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the worker's flags; run go generate ./worker/", workerReference)
	}
}
