package stack

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestParseTemporalMode(t *testing.T) {
	for in, want := range map[string]TemporalMode{"": TemporalDev, "dev": TemporalDev, " Cluster ": TemporalCluster, "postgres": TemporalCluster} {
		got, err := ParseTemporalMode(in)
		if err != nil || got != want {
			t.Errorf("ParseTemporalMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseTemporalMode("cassandra"); err == nil {
		t.Error(`ParseTemporalMode("cassandra") = nil error, want one naming the choices`)
	}
}

// The Temporal server stores its ports as PostgreSQL smallint: every port of the cluster
// configuration must be below 32768, free, and distinct.
func TestFreeLowPort(t *testing.T) {
	var taken []int
	for range 10 {
		p, err := freeLowPort(taken)
		if err != nil {
			t.Fatal(err)
		}
		if p < 20000 || p >= 32768 || slices.Contains(taken, p) {
			t.Fatalf("freeLowPort(%v) = %d: want a new port in [20000, 32768)", taken, p)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
		taken = append(taken, p)
	}
}

// The Temporal server's configuration serves pprof on 127.0.0.1 at ServerPprofPort, under
// global, and no pprof without it.
func TestServerConfigPprof(t *testing.T) {
	for _, port := range []int{0, 12345} {
		s := &Stack{Opts: Options{Dir: t.TempDir(), HistoryShards: 4, ServerPprofPort: port}, cluster: &cluster{pgPort: 5432}}
		if err := s.writeServerConfig(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(s.Opts.Dir, "temporal-server", "config", "development.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var conf struct {
			Global struct {
				Membership struct {
					BroadcastAddress string `json:"broadcastAddress"`
				} `json:"membership"`
				Pprof *struct {
					Port int    `json:"port"`
					Host string `json:"host"`
				} `json:"pprof"`
			} `json:"global"`
		}
		if err := yaml.Unmarshal(b, &conf); err != nil {
			t.Fatalf("config does not parse: %v\n%s", err, b)
		}
		g := conf.Global
		switch {
		case g.Membership.BroadcastAddress != "127.0.0.1":
			t.Errorf("port %d: global.membership.broadcastAddress = %q, want 127.0.0.1", port, g.Membership.BroadcastAddress)
		case port == 0 && g.Pprof != nil:
			t.Errorf("no port: global.pprof = %+v, want none", *g.Pprof)
		case port != 0 && (g.Pprof == nil || g.Pprof.Port != port || g.Pprof.Host != "127.0.0.1"):
			t.Errorf("port %d: global.pprof = %+v, want 127.0.0.1:%d", port, g.Pprof, port)
		}
	}
}
