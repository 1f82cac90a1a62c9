//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// suiteProm is the suite's Prometheus server (Debian's package, built into the tools cache by
// hack/tools.sh) and the scrape target it reads, whose series the tests set.
type suiteProm struct {
	address string
	srv     *http.Server
	mu      sync.Mutex
	series  map[string]float64
}

// startSuiteProm serves /metrics on a free loopback port and starts Prometheus scraping it
// every second.
func startSuiteProm(ctx context.Context, s *stack.Stack) (*suiteProm, error) {
	p := &suiteProm{series: map[string]float64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", p.serve)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	addr, err := s.StartPrometheus(ctx, []string{ln.Addr().String()}, time.Second)
	if err != nil {
		p.srv.Close()
		return nil, err
	}
	p.address = addr
	return p, nil
}

// set sets a series, written as in the exposition format: `name{label="v"}`.
func (p *suiteProm) set(series string, v float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.series[series] = v
}

// remove drops a series: Prometheus marks it stale on the next scrape.
func (p *suiteProm) remove(series string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.series, series)
}

func (p *suiteProm) serve(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.series))
	for s := range p.series {
		names = append(names, s)
	}
	sort.Strings(names)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	typed := map[string]bool{}
	for _, s := range names {
		name, _, _ := strings.Cut(s, "{")
		if !typed[name] {
			typed[name] = true
			fmt.Fprintf(w, "# TYPE %s gauge\n", name)
		}
		fmt.Fprintf(w, "%s %g\n", s, p.series[s])
	}
}

func (p *suiteProm) close() {
	p.srv.Close()
	env.stack.StopProcess("prometheus")
}
