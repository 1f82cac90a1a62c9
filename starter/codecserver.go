package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/temporal-rollout/rollout/codec"
	"github.com/temporal-rollout/rollout/internal/config"
)

// codecServerOpts are the flags of `starter codec-server`.
type codecServerOpts struct {
	listen     string
	corsOrigin string
}

// codecHandler is the codec server's handler: Temporal's remote codec protocol over the
// codec of --codec-key-file, which it needs.
func codecHandler(cfg config.Config, corsOrigin string) (http.Handler, error) {
	// Both are settings problems: exit 2, as every setting that does not validate.
	cd, err := cfg.Codec()
	if err != nil {
		return nil, configError{err}
	}
	if cd == nil {
		return nil, configError{errors.New("codec-server needs --codec-key-file (or ROLLOUT_CODEC_KEY_FILE)")}
	}
	return codec.Handler(cd, corsOrigin), nil
}

// codecServer serves the codec to the Temporal UI and `temporal --codec-endpoint` until ctx
// ends. It holds the keys: listen on loopback, or behind TLS and authentication.
func codecServer(ctx context.Context, cfg config.Config, opts codecServerOpts) error {
	h, err := codecHandler(cfg, opts.corsOrigin)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("codec server: listen on %s: %w", opts.listen, err)
	}
	logger := cfg.Logger()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	logger.Info("Codec server listening", "address", ln.Addr().String(), "corsOrigin", opts.corsOrigin)
	select {
	case err := <-done:
		return fmt.Errorf("codec server on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		return fmt.Errorf("stop codec server: %w", err)
	}
	logger.Info("Codec server stopped")
	return nil
}
