package lifecycle

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// memLimitShare is the share of the container's memory limit given to the Go runtime as its
// soft limit: the rest is for what the runtime does not count (stacks of parked goroutines
// are counted; mmapped files and the kernel's page tables are not).
const memLimitShare = 0.9

// SetMemoryLimit gives the Go runtime a soft memory limit of 90% of the cgroup's (v2
// memory.max, or v1 memory.limit_in_bytes, under root), unless GOMEMLIMIT is set, so that the
// garbage collector works harder near the container's limit instead of letting the heap grow to
// twice the live data and the kernel kill the process. It returns the limit it set (0: none,
// as when the cgroup has no limit or cannot be read).
func SetMemoryLimit(root string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := cgroupLimit(root)
	if limit <= 0 {
		return 0
	}
	soft := int64(float64(limit) * memLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// cgroupLimit reads the memory limit of the process's cgroup under root ("/sys/fs/cgroup"),
// in bytes; 0 when there is none.
func cgroupLimit(root string) int64 {
	for _, f := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 writes a huge number (page-rounded MaxInt64) for "no limit".
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
