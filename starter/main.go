// Command starter talks to the Deployment workflows: `watch` runs the watcher that turns
// Kubernetes changes into signals, and sync, pause, resume, rollback and status act on one
// Deployment.
//
//	starter watch
//	starter sync|pause|resume|status NAMESPACE/NAME
//	starter rollback --to-revision N NAMESPACE/NAME
//	starter codec-server --codec-key-file F [--listen ADDR] [--codec-cors-origin URL]
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/version"
)

const usage = `usage:
  starter watch [flags]                          run the watcher
  starter sync NAMESPACE/NAME [flags]            signal-with-start a sync
  starter pause NAMESPACE/NAME [flags]           pause the rollout (sets spec.paused)
  starter resume NAMESPACE/NAME [flags]          resume the rollout
  starter rollback --to-revision N NAMESPACE/NAME  roll back (0: previous revision)
  starter promote [--full] NAMESPACE/NAME         promote a stepped rollout past its pause (--full: past every step)
  starter abort [--reason R] NAMESPACE/NAME      abort the rollout: back to the last revision that completed
  starter status NAMESPACE/NAME [flags]          print the status query as JSON
  starter codec-server --codec-key-file F [--listen 127.0.0.1:8081] [--codec-cors-origin http://localhost:8233]
                                                 serve the payload codec to the Temporal UI and temporal --codec-endpoint
  starter probe URL                              exit 0 if GET URL answers 200 (container health checks)
  starter version                                print the version

Every command takes --codec-key-file (ROLLOUT_CODEC_KEY_FILE) when the worker does: see docs/codec.md.
`

func probe(url string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d", url, resp.StatusCode)
	}
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	if cmd == "version" || cmd == "--version" {
		fmt.Println("starter", version.String())
		return
	}
	if cmd == "probe" {
		// A health check for images without a shell: GET a URL, exit 0 on 200.
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: starter probe URL")
			os.Exit(2)
		}
		if err := probe(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			os.Exit(1)
		}
		return
	}
	fs := pflag.NewFlagSet("starter "+cmd, pflag.ContinueOnError)
	config.WatcherFlags(fs)
	var opts cmdOpts
	fs.Int64Var(&opts.toRevision, "to-revision", 0, "rollback: the revision to roll back to; 0 means the previous one")
	fs.BoolVar(&opts.full, "full", false, "promote: skip every remaining step")
	fs.StringVar(&opts.reason, "reason", "", "abort: why (recorded in the event, the status and the memo)")
	var csOpts codecServerOpts
	fs.StringVar(&csOpts.listen, "listen", "127.0.0.1:8081", "codec-server: listen address (the server decrypts for anyone who reaches it: keep it on loopback or put it behind authentication)")
	fs.StringVar(&csOpts.corsOrigin, "codec-cors-origin", "", "codec-server: the Temporal UI's origin allowed to call it from the browser, e.g. http://localhost:8233; empty sends no CORS headers (enough for the temporal CLI)")
	if err := fs.Parse(os.Args[2:]); err != nil {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if cmd == "watch" {
		if len(fs.Args()) != 0 {
			fmt.Fprintf(os.Stderr, "starter: watch takes no arguments, got %q\n", fs.Args())
			os.Exit(2)
		}
		code := lifecycle.Main(ctx, "starter", cfg.ShutdownTimeout, os.Stderr, func(ctx context.Context, s *lifecycle.Stopper) error {
			return watch(ctx, cfg, s)
		})
		stop()
		os.Exit(code)
	}
	if cmd == "codec-server" {
		if len(fs.Args()) != 0 {
			fmt.Fprintf(os.Stderr, "starter: codec-server takes no arguments, got %q\n", fs.Args())
			os.Exit(2)
		}
		err := codecServer(ctx, cfg, csOpts)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			os.Exit(1)
		}
		return
	}
	defer stop()
	if err := run(ctx, cfg, cmd, fs.Args(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		stop()
		os.Exit(1)
	}
}
