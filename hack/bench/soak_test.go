package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadSoakAndMarkdown(t *testing.T) {
	f := filepath.Join(t.TempDir(), "soak.txt")
	if err := os.WriteFile(f, []byte("rollouts 31\nseconds 240\nrequests 40000\nrate 166\nfailed 0\nsamples 4500\nskipped_samples 3\nbad_samples 0\naborts 11\nabort_median_ms 2100\nabort_p99_ms 5200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readSoak(f)
	if err != nil {
		t.Fatal(err)
	}
	md := res.markdown(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), true)
	for _, want := range []string{"## 2026-11-28 12:00 UTC: traffic soak", "31 rollouts", "| 40000 | 166 | 0 | 4500 | 3 | 0 | 11 | 2100 ms | 5200 ms |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if err := os.WriteFile(f, []byte("rollouts x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSoak(f); err == nil {
		t.Errorf("readSoak accepted a malformed report")
	}
}
