package zoneinfo

import (
	"testing"
	"time"
)

// TestLoad: zones come from the embedded copy, whatever $ZONEINFO says.
func TestLoad(t *testing.T) {
	t.Setenv("ZONEINFO", t.TempDir()) // an empty database: time.LoadLocation would still find the host's
	tests := []struct {
		give       string
		wantOffset int // seconds east of UTC on 2026-07-01 12:00 UTC
		wantErr    bool
	}{
		{give: "Europe/Berlin", wantOffset: 2 * 3600},
		{give: "America/New_York", wantOffset: -4 * 3600},
		{give: "UTC"},
		{give: ""},
		{give: "Mars/Olympus", wantErr: true},
		{give: "../etc/passwd", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			loc, err := Load(tt.give)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Load(%q) = %v, want an error", tt.give, loc)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, off := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).In(loc).Zone()
			if off != tt.wantOffset {
				t.Errorf("offset = %d, want %d", off, tt.wantOffset)
			}
		})
	}
}
