// Command worker runs the Temporal worker that executes the Deployment workflows and their
// activities against the Kubernetes API server.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/version"
)

func main() {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.Flags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println("worker", version.String())
		return
	}
	cfg, err := config.Load(fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := lifecycle.Main(ctx, "worker", cfg.ShutdownTimeout, os.Stderr, func(ctx context.Context, s *lifecycle.Stopper) error {
		return run(ctx, cfg, s)
	})
	stop()
	os.Exit(code)
}
