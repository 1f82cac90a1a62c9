package stack

import (
	"net"
	"slices"
	"strconv"
	"testing"
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
