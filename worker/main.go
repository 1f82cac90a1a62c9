// Command worker runs the Temporal worker that executes the Deployment workflows and their
// activities against the Kubernetes API server.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/version"
	"github.com/temporal-rollout/rollout/internal/zoneinfo"
)

func main() {
	fs := newFlagSet()
	if code, run := parseArgs(fs, os.Args[1:], os.Stdout, os.Stderr); !run {
		os.Exit(code)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := lifecycle.Main(ctx, "worker", cfg.ShutdownTimeout, os.Stderr, func(ctx context.Context, s *lifecycle.Stopper) error {
		return run(ctx, cfg, s)
	})
	stop()
	os.Exit(code)
}

// exitUsage is the exit code of a command line or configuration that is wrong (nothing was
// attempted), as the starter's.
const exitUsage = 2

// description is the help's text between the usage line and the flags.
const description = `worker runs the Temporal worker that executes each Deployment's rollout workflow and its
activities against the Kubernetes API server; with --watch it runs the watcher too, which turns
Kubernetes changes into signals to the workflows (docs/architecture.md).

Every setting is a flag, a ROLLOUT_* environment variable (--temporal-address is
ROLLOUT_TEMPORAL_ADDRESS) or a key of the --config file, in that order of precedence.

Exit codes: 0 stopped cleanly (also --help, --version), 1 failed or did not stop within
--shutdown-timeout, 2 a flag or setting is wrong (nothing was attempted).`

// newFlagSet is the worker's command line: every setting (config.Flags), --version and --help.
func newFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.Flags(fs)
	fs.Bool("version", false, "print the version and exit")
	fs.BoolP("help", "h", false, "show this help and exit")
	fs.Usage = func() {} // parseArgs prints the usage itself
	fs.SetOutput(io.Discard)
	return fs
}

// usage is the worker's help: docs/reference/cli/worker.md is generated from it.
func usage(fs *pflag.FlagSet) string {
	return "Usage:\n  worker [flags]\n\n" + description + "\n\nFlags:\n" + fs.FlagUsagesWrapped(100)
}

// parseArgs parses args into fs. It handles --help (the usage on stdout, exit 0), --version and
// a bad command line (the error and the usage on stderr, exit 2); run is false when the
// process should exit with code.
func parseArgs(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (code int, run bool) {
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "worker: %v\n\n%s", err, usage(fs))
		return exitUsage, false
	}
	if len(fs.Args()) > 0 {
		fmt.Fprintf(stderr, "worker: takes no arguments, got %q\n\n%s", fs.Args(), usage(fs))
		return exitUsage, false
	}
	if help, _ := fs.GetBool("help"); help {
		fmt.Fprint(stdout, usage(fs))
		return 0, false
	}
	if v, _ := fs.GetBool("version"); v {
		fmt.Fprintln(stdout, "worker", version.String(), "(tzdata "+zoneinfo.Version+")")
		return 0, false
	}
	return 0, true
}
