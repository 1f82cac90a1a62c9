// Command starter is the command line of temporal-rollout: `starter watch` runs the watcher
// that turns Kubernetes changes into signals, and sync, pause, resume, rollback, promote,
// abort and status act on one Deployment's workflow. `starter help` lists every command,
// docs/cli.md describes them.
//
//	starter watch [flags]
//	starter sync|pause|resume|status NAMESPACE/NAME [flags]
//	starter rollback --to-revision N NAMESPACE/NAME
//	starter promote [--full] NAMESPACE/NAME
//	starter abort [--reason R] NAMESPACE/NAME
//	starter codec-server --codec-key-file F [--listen ADDR] [--codec-cors-origin URL]
//	starter probe URL
//	starter version
//	starter completion bash|zsh|fish|powershell
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
