package release

import (
	"testing"
	"time"

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
		next, ok := s.next(from, time.UTC)
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
