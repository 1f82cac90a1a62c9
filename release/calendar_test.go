package release

import (
	"strings"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/internal/zoneinfo"
	"github.com/temporal-rollout/rollout/k8s"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFrozen(t *testing.T) {
	weekend := FreezeWindow{RRule: "FREQ=WEEKLY;BYDAY=FR;BYHOUR=16;BYMINUTE=0", Duration: k8s.Duration(64 * time.Hour), TimeZone: "Europe/Berlin", Reason: "weekend"}
	nightly := FreezeWindow{Cron: "0 22 * * *", Duration: k8s.Duration(8 * time.Hour), TimeZone: "UTC"}
	lunch := FreezeWindow{Cron: "30 12 * * 1-5", Duration: k8s.Duration(30 * time.Minute), TimeZone: "America/New_York", Reason: "lunch"}
	every10 := FreezeWindow{Cron: "*/10 * * * *", Duration: k8s.Duration(2 * time.Minute)}
	tests := []struct {
		name       string
		windows    []FreezeWindow
		give       string
		wantFrozen bool
		wantUntil  string
	}{
		// 2026-11-27 is a Friday; Berlin is UTC+1 in November.
		{"before the weekend", []FreezeWindow{weekend}, "2026-11-27T14:59:00Z", false, ""},
		{"weekend start", []FreezeWindow{weekend}, "2026-11-27T15:00:00Z", true, "2026-11-30T07:00:00Z"},
		{"sunday", []FreezeWindow{weekend}, "2026-11-29T12:00:00Z", true, "2026-11-30T07:00:00Z"},
		{"weekend end is open", []FreezeWindow{weekend}, "2026-11-30T07:00:00Z", false, ""},
		// Summer time: Friday 2026-07-03 16:00 Berlin is 14:00 UTC.
		{"summer weekend", []FreezeWindow{weekend}, "2026-07-03T14:30:00Z", true, "2026-07-06T06:00:00Z"},
		{"nightly after midnight", []FreezeWindow{nightly}, "2026-11-26T03:00:00Z", true, "2026-11-26T06:00:00Z"},
		{"nightly daytime", []FreezeWindow{nightly}, "2026-11-26T12:00:00Z", false, ""},
		// New York is UTC-5 in November: 12:30 EST is 17:30 UTC, on weekdays only.
		{"lunch thursday", []FreezeWindow{lunch}, "2026-11-26T17:45:00Z", true, "2026-11-26T18:00:00Z"},
		{"lunch saturday", []FreezeWindow{lunch}, "2026-11-28T17:45:00Z", false, ""},
		{"every 10 minutes, inside", []FreezeWindow{every10}, "2026-11-26T10:21:59Z", true, "2026-11-26T10:22:00Z"},
		{"every 10 minutes, outside", []FreezeWindow{every10}, "2026-11-26T10:22:00Z", false, ""},
		{"two windows, latest end", []FreezeWindow{nightly, weekend}, "2026-11-28T23:00:00Z", true, "2026-11-30T07:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			until, _, frozen := Frozen(tt.windows, mustTime(t, tt.give))
			if frozen != tt.wantFrozen {
				t.Fatalf("Frozen(%s) = %v, want %v", tt.give, frozen, tt.wantFrozen)
			}
			if frozen && !until.Equal(mustTime(t, tt.wantUntil)) {
				t.Errorf("until = %s, want %s", until.UTC().Format(time.RFC3339), tt.wantUntil)
			}
		})
	}
}

func TestCronDayFields(t *testing.T) {
	// Both day fields restricted: the 1st of the month OR a Monday (cron(8)).
	s, err := parseCron("0 0 1 * MON-MON")
	if err == nil {
		t.Fatalf("parseCron with day names = %+v, want an error (numbers only)", s)
	}
	s, err = parseCron("0 0 1 * 1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	from := mustTime(t, "2026-11-25T00:00:00Z")
	for range 4 {
		next, ok := s.next(from)
		if !ok {
			t.Fatal("no next start")
		}
		got = append(got, next.Format("2006-01-02"))
		from = next
	}
	want := []string{"2026-11-30", "2026-12-01", "2026-12-07", "2026-12-14"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("starts = %v, want %v", got, want)
		}
	}
}

func TestRRuleErrors(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"FREQ=WEEKLY", "FREQ=WEEKLY needs BYDAY"},
		{"BYHOUR=3", "FREQ is missing"},
		{"FREQ=DAILY;INTERVAL=2", "INTERVAL is not supported"},
		{"FREQ=DAILY;BYDAY=XX", `BYDAY "XX"`},
		{"FREQ=DAILY;BYHOUR=24", `BYHOUR: "24" is not a number in 0-23`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := parseRRule(tt.give)
			if err == nil || !contains(err.Error(), tt.want) {
				t.Errorf("parseRRule(%q) = %v, want an error containing %q", tt.give, err, tt.want)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

// TestFrozenAcrossSummerTime: windows across the 2026 changes of offset in Berlin (CET/CEST:
// 2026-03-29 02:00 → 03:00, 2026-10-25 03:00 → 02:00) and New York (EST/EDT: 2026-03-08
// 02:00 → 03:00, 2026-11-01 02:00 → 01:00). A window ends at the wall-clock time its start
// plus its duration names; a start the clocks skip begins when they jump and keeps its
// length; a start they show twice begins at the first. wantOld is what the arithmetic before freeze-wall-clock gave
// (elapsed time, starts stepped through instants), where it differs: the table fails on it.
func TestFrozenAcrossSummerTime(t *testing.T) {
	window := func(expr string, d time.Duration, zone string) FreezeWindow {
		f := FreezeWindow{Duration: k8s.Duration(d), TimeZone: zone}
		if strings.HasPrefix(expr, "FREQ=") {
			f.RRule = expr
		} else {
			f.Cron = expr
		}
		return f
	}
	weekend := window("FREQ=WEEKLY;BYDAY=FR;BYHOUR=16;BYMINUTE=0", 64*time.Hour, "Europe/Berlin")
	berlin0230 := window("30 2 * * *", time.Hour, "Europe/Berlin")
	berlin0130 := window("30 1 * * *", time.Hour, "Europe/Berlin")
	nightly := window("0 22 * * *", 8*time.Hour, "America/New_York")
	ny0230 := window("30 2 * * *", time.Hour, "America/New_York")
	ny0130 := window("30 1 * * *", 30*time.Minute, "America/New_York")
	tests := []struct {
		name      string
		window    FreezeWindow
		give      string
		wantUntil string // "": not frozen
		wantOld   string // the old arithmetic's answer, when it differs ("-": not frozen)
	}{
		// Berlin, autumn: Friday 2026-10-23 16:00 CEST (14:00 UTC) + 64h = Monday 08:00 CET
		// (07:00 UTC), 65 hours later.
		{"berlin autumn: weekend from Friday 16:00 CEST", weekend, "2026-10-23T14:00:00Z", "2026-10-26T07:00:00Z", "2026-10-26T06:00:00Z"},
		{"berlin autumn: Monday 07:30 CET is still frozen", weekend, "2026-10-26T06:30:00Z", "2026-10-26T07:00:00Z", "-"},
		{"berlin autumn: Monday 08:00 CET is open", weekend, "2026-10-26T07:00:00Z", "", ""},
		// 02:30 comes twice on 2026-10-25: one window, from the first (00:30 UTC) to 03:30 CET
		// (02:30 UTC).
		{"berlin autumn: 02:30 twice, the window starts at the first", berlin0230, "2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z", "-"},
		{"berlin autumn: the second 02:45", berlin0230, "2026-10-25T01:45:00Z", "2026-10-25T02:30:00Z", ""},
		{"berlin autumn: 03:30 CET is open", berlin0230, "2026-10-25T02:30:00Z", "", ""},
		// Berlin, spring: Friday 2026-03-27 16:00 CET (15:00 UTC) + 64h = Monday 08:00 CEST
		// (06:00 UTC), 63 hours later.
		{"berlin spring: Monday 07:59 CEST is frozen", weekend, "2026-03-30T05:59:00Z", "2026-03-30T06:00:00Z", "2026-03-30T07:00:00Z"},
		{"berlin spring: Monday 08:00 CEST is open", weekend, "2026-03-30T06:00:00Z", "", "2026-03-30T07:00:00Z"},
		// 02:30 does not exist on 2026-03-29: the window begins when 02:00 CET jumps to 03:00
		// CEST (01:00 UTC) and keeps its hour, to 04:00 CEST (02:00 UTC;
		// freeze-skipped-start-length, TestFrozenSkippedStartKeepsLength).
		{"berlin spring: skipped 02:30, before the jump", berlin0230, "2026-03-29T00:59:00Z", "", ""},
		{"berlin spring: skipped 02:30 begins at 03:00 CEST", berlin0230, "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "-"},
		{"berlin spring: the day before, 02:30 CET", berlin0230, "2026-03-28T01:30:00Z", "2026-03-28T02:30:00Z", ""},
		// 01:30 CET + 1h is 02:30, skipped: the window ends at the jump, 03:00 CEST (01:00 UTC).
		{"berlin spring: an end in the skipped hour", berlin0130, "2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"},
		{"berlin spring: after that end", berlin0130, "2026-03-29T01:00:00Z", "", "2026-03-29T01:30:00Z"},
		// New York, autumn: Saturday 2026-10-31 22:00 EDT (02:00 UTC) + 8h = Sunday 06:00 EST
		// (11:00 UTC), 9 hours later.
		{"new york autumn: nightly from 22:00 EDT", nightly, "2026-11-01T02:00:00Z", "2026-11-01T11:00:00Z", "2026-11-01T10:00:00Z"},
		{"new york autumn: 05:30 EST is still frozen", nightly, "2026-11-01T10:30:00Z", "2026-11-01T11:00:00Z", "-"},
		{"new york autumn: 06:00 EST is open", nightly, "2026-11-01T11:00:00Z", "", ""},
		// 01:30 comes twice on 2026-11-01: one window from 01:30 EDT (05:30 UTC) to 02:00 EST
		// (07:00 UTC).
		{"new york autumn: 01:30 twice, from the first to 02:00 EST", ny0130, "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "-"},
		{"new york autumn: 02:00 EST is open", ny0130, "2026-11-01T07:00:00Z", "", ""},
		// New York, spring: Saturday 2026-03-07 22:00 EST (03:00 UTC) + 8h = Sunday 06:00 EDT
		// (10:00 UTC), 7 hours later.
		{"new york spring: 05:59 EDT is frozen", nightly, "2026-03-08T09:59:00Z", "2026-03-08T10:00:00Z", "2026-03-08T11:00:00Z"},
		{"new york spring: 06:00 EDT is open", nightly, "2026-03-08T10:00:00Z", "", "2026-03-08T11:00:00Z"},
		// 02:30 does not exist on 2026-03-08: from 03:00 EDT (07:00 UTC) to 04:00 EDT.
		{"new york spring: skipped 02:30 begins at 03:00 EDT", ny0230, "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z", "-"},
		{"new york spring: 04:00 EDT is open", ny0230, "2026-03-08T08:00:00Z", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := func(newest bool) string {
				r := rulesAbsolute
				if newest {
					r = rulesNewest
				}
				until, _, frozen := frozenAt([]FreezeWindow{tt.window}, mustTime(t, tt.give), r)
				if !frozen {
					return ""
				}
				return until.UTC().Format(time.RFC3339)
			}
			if g := got(true); g != tt.wantUntil {
				t.Errorf("Frozen(%s) until %q, want %q", tt.give, g, tt.wantUntil)
			}
			wantOld := tt.wantOld
			switch wantOld {
			case "":
				wantOld = tt.wantUntil
			case "-":
				wantOld = ""
			}
			if g := got(false); g != wantOld {
				t.Errorf("before freeze-wall-clock: Frozen(%s) until %q, want %q", tt.give, g, wantOld)
			}
		})
	}
}

// TestResolve: wall-clock times the clocks skip or show twice.
func TestResolve(t *testing.T) {
	berlin, err := zoneinfo.Load("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		give string // wall-clock time in Berlin
		want string
	}{
		{"2026-03-29T01:59:00Z", "2026-03-29T00:59:00Z"},
		{"2026-03-29T02:00:00Z", "2026-03-29T01:00:00Z"}, // skipped: the jump
		{"2026-03-29T02:59:59Z", "2026-03-29T01:00:00Z"}, // skipped: the jump
		{"2026-03-29T03:00:00Z", "2026-03-29T01:00:00Z"},
		{"2026-10-25T01:59:00Z", "2026-10-24T23:59:00Z"},
		{"2026-10-25T02:00:00Z", "2026-10-25T00:00:00Z"}, // twice: the first
		{"2026-10-25T02:59:00Z", "2026-10-25T00:59:00Z"}, // twice: the first
		{"2026-10-25T03:00:00Z", "2026-10-25T02:00:00Z"},
		{"2026-07-01T12:00:00Z", "2026-07-01T10:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if got := resolve(mustTime(t, tt.give), berlin).UTC().Format(time.RFC3339); got != tt.want {
				t.Errorf("resolve(%s Berlin) = %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}

// TestFrozenSkippedStartKeepsLength: a window whose start the clocks skip keeps its whole
// duration from the instant they jump. `30 2 * * *` in Berlin on 2026-03-29 (02:00 CET jumps
// to 03:00 CEST, 01:00 UTC) for 30m freezes 03:00-03:30 CEST (01:00-01:30 UTC), for 1h
// 03:00-04:00 CEST; in New York on 2026-03-08 (02:00 EST jumps to 03:00 EDT, 07:00 UTC) the
// same, 07:00-07:30 and 07:00-08:00 UTC. Before (freeze-wall-clock alone) the end was the
// start's wall-clock time plus the duration, 03:00 and 03:30: the 30-minute window froze
// nothing and the hour froze 30 minutes. The day before, the day after and the autumn day
// (02:30 shown twice in Berlin) are unchanged. wantV1 is the freeze-wall-clock answer where
// it differs ("-": not frozen).
func TestFrozenSkippedStartKeepsLength(t *testing.T) {
	window := func(d time.Duration, zone string) FreezeWindow {
		return FreezeWindow{Cron: "30 2 * * *", Duration: k8s.Duration(d), TimeZone: zone}
	}
	berlin30, berlin60 := window(30*time.Minute, "Europe/Berlin"), window(time.Hour, "Europe/Berlin")
	ny30, ny60 := window(30*time.Minute, "America/New_York"), window(time.Hour, "America/New_York")
	tests := []struct {
		name   string
		window FreezeWindow
		give   string
		want   string // until; "": not frozen
		wantV1 string // freeze-wall-clock's answer, when it differs ("-": not frozen)
	}{
		{"berlin 30m: before the jump", berlin30, "2026-03-29T00:59:00Z", "", ""},
		{"berlin 30m: at the jump, 03:00 CEST", berlin30, "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "-"},
		{"berlin 30m: 03:29 CEST", berlin30, "2026-03-29T01:29:00Z", "2026-03-29T01:30:00Z", "-"},
		{"berlin 30m: 03:30 CEST is open", berlin30, "2026-03-29T01:30:00Z", "", ""},
		{"berlin 1h: 03:45 CEST", berlin60, "2026-03-29T01:45:00Z", "2026-03-29T02:00:00Z", "-"},
		{"berlin 1h: 03:15 CEST", berlin60, "2026-03-29T01:15:00Z", "2026-03-29T02:00:00Z", "2026-03-29T01:30:00Z"},
		{"berlin 1h: 04:00 CEST is open", berlin60, "2026-03-29T02:00:00Z", "", ""},
		{"berlin 30m: the day before, 02:45 CET", berlin30, "2026-03-28T01:45:00Z", "2026-03-28T02:00:00Z", ""},
		{"berlin 30m: the day before, 03:00 CET is open", berlin30, "2026-03-28T02:00:00Z", "", ""},
		{"berlin 1h: the day after, 02:30 CEST", berlin60, "2026-03-30T00:30:00Z", "2026-03-30T01:30:00Z", ""},
		// Autumn: 02:30 comes twice on 2026-10-25; the window starts at the first (00:30 UTC)
		// and ends at 03:00 CET (02:00 UTC), as before.
		{"berlin 30m autumn: the first 02:45", berlin30, "2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z", ""},
		{"berlin 30m autumn: the second 02:45", berlin30, "2026-10-25T01:45:00Z", "2026-10-25T02:00:00Z", ""},
		{"berlin 30m autumn: 03:00 CET is open", berlin30, "2026-10-25T02:00:00Z", "", ""},
		{"new york 30m: before the jump", ny30, "2026-03-08T06:59:00Z", "", ""},
		{"new york 30m: at the jump, 03:00 EDT", ny30, "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "-"},
		{"new york 30m: 03:29 EDT", ny30, "2026-03-08T07:29:00Z", "2026-03-08T07:30:00Z", "-"},
		{"new york 30m: 03:30 EDT is open", ny30, "2026-03-08T07:30:00Z", "", ""},
		{"new york 1h: 03:45 EDT", ny60, "2026-03-08T07:45:00Z", "2026-03-08T08:00:00Z", "-"},
		{"new york 1h: 04:00 EDT is open", ny60, "2026-03-08T08:00:00Z", "", ""},
		{"new york 30m: the day before, 02:45 EST", ny30, "2026-03-07T07:45:00Z", "2026-03-07T08:00:00Z", ""},
		{"new york 1h: the day before, 03:15 EST", ny60, "2026-03-07T08:15:00Z", "2026-03-07T08:30:00Z", ""},
		{"new york 30m: the day before, 03:00 EST is open", ny30, "2026-03-07T08:00:00Z", "", ""},
		// Autumn: 01:00-02:00 comes twice on 2026-11-01; 02:30 EST (07:30 UTC) once.
		{"new york 30m autumn: 02:45 EST", ny30, "2026-11-01T07:45:00Z", "2026-11-01T08:00:00Z", ""},
		{"new york 30m autumn: 03:00 EST is open", ny30, "2026-11-01T08:00:00Z", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := func(frozen bool, until time.Time) string {
				if !frozen {
					return ""
				}
				return until.UTC().Format(time.RFC3339)
			}
			until, _, frozen := Frozen([]FreezeWindow{tt.window}, mustTime(t, tt.give))
			if g := got(frozen, until); g != tt.want {
				t.Errorf("Frozen(%s) until %q, want %q", tt.give, g, tt.want)
			}
			wantV1 := tt.wantV1
			switch wantV1 {
			case "":
				wantV1 = tt.want
			case "-":
				wantV1 = ""
			}
			until, _, frozen = frozenAt([]FreezeWindow{tt.window}, mustTime(t, tt.give), rulesWallClock)
			if g := got(frozen, until); g != wantV1 {
				t.Errorf("under freeze-wall-clock alone: Frozen(%s) until %q, want %q", tt.give, g, wantV1)
			}
		})
	}
}
