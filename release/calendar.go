package release

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/temporal-rollout/rollout/internal/zoneinfo"
)

// The freeze calendar: a window's starts come from a cron expression or an RRULE, each turned
// into one schedule (sets of minutes, hours, days of month, months and weekdays).
//
// Cron: five fields, "minute hour day-of-month month day-of-week", each "*", "n", "a-b", a
// step "*/s" or "a-b/s", or a comma list of those; weekdays 0-6 from Sunday (7 is Sunday too).
// When both day fields are restricted a day matching either counts, as in cron(8).
//
// RRULE (RFC 5545), the subset: FREQ=DAILY or FREQ=WEEKLY, with optional BYDAY (MO,TU,...),
// BYHOUR and BYMINUTE lists (default 0 each; WEEKLY needs BYDAY). INTERVAL, COUNT, UNTIL,
// BYMONTH and the rest are rejected. An "RRULE:" prefix is allowed.
//
// Example: Friday 16:00 to Monday 08:00, Berlin time:
//
//	rrule: FREQ=WEEKLY;BYDAY=FR;BYHOUR=16;BYMINUTE=0
//	duration: 64h
//	timeZone: Europe/Berlin
//
// Wall-clock time. A schedule matches wall-clock times (the clock on the zone's wall, a date
// and a time of day with no zone), and a window's end is its start's wall-clock time plus the
// duration, as date and time arithmetic: Friday 16:00 + 64h is Monday 08:00 in Berlin whether
// or not the clocks change over the weekend. Only then is a wall-clock time turned into an
// instant (resolve):
//   - a time the clocks skip (02:30 on 2026-03-29 in Berlin, where 02:00 CET jumps to 03:00
//     CEST) is the instant the clock jumps to (03:00 CEST, 01:00 UTC): a window starting at
//     02:30 that day begins then and keeps its whole duration from there (its wall-clock
//     start becomes 03:00: for 30 minutes it ends at 03:30 CEST, for 1 hour at 04:00), and
//     one ending at 02:30 ends then;
//   - a time the clocks show twice (02:30 on 2026-10-25 in Berlin) is its first occurrence
//     (02:30 CEST, 00:30 UTC): a window starts there once, as cron(8) runs a job once, and
//     one ending at 02:30 ends at the first 02:30.
//
// So the weekend window of 2026-10-23 (Friday 16:00 CEST, 14:00 UTC) ends on Monday 08:00 CET
// (07:00 UTC): 65 hours, not 64; the one of 2026-03-27 (16:00 CET, 15:00 UTC) ends Monday
// 08:00 CEST (06:00 UTC): 63 hours.
//
// Zones come from the database compiled into the binary (internal/zoneinfo), never the host's,
// so every worker, and every replay, places a transition at the same instant.

// maxWindow bounds a freeze window's duration.
const maxWindow = 31 * 24 * time.Hour

// schedule is a set of start minutes.
type schedule struct {
	minute, hour, dom, month, dow uint64
	// domAny, dowAny: the field was "*" (cron's rule for the two day fields).
	domAny, dowAny bool
}

func (s *schedule) dayMatches(t time.Time) bool {
	dom := s.dom&(1<<uint(t.Day())) != 0
	dow := s.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case s.domAny && s.dowAny:
		return true
	case s.domAny:
		return dow
	case s.dowAny:
		return dom
	}
	return dom || dow
}

// next is the first wall-clock start strictly after the wall-clock time w (both in UTC: a
// date and time of day with no zone, see wall); false when none within 5 years.
func (s *schedule) next(w time.Time) (time.Time, bool) {
	return s.nextIn(w, time.UTC)
}

// nextIn is the first start strictly after t, stepping through loc's instants: in a zone
// with summer time it never sees a skipped wall-clock time and sees a repeated one twice.
// Only the release's runs from before the change freeze-wall-clock use it on a zone other than
// UTC (frozenAbsolute).
func (s *schedule) nextIn(t time.Time, loc *time.Location) (time.Time, bool) {
	t = t.In(loc).Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		switch {
		case s.month&(1<<uint(t.Month())) == 0:
			t = forward(t, time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc))
		case !s.dayMatches(t):
			t = forward(t, time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc))
		case s.hour&(1<<uint(t.Hour())) == 0:
			t = forward(t, time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, loc))
		case s.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t, true
		}
	}
	return time.Time{}, false
}

// forward is n, or the next minute after t when n is not after t. time.Date resolves a
// wall-clock time the clocks skip with the offset before or after, unspecified: in New York
// (offsets west of UTC) 02:00 on 2026-03-08 is 01:00 EST, and stepping from 01:00 to "the next
// hour" came back to 01:00 for ever (a workflow task that never completed). Elsewhere n is
// after t and nothing changes.
func forward(t, n time.Time) time.Time {
	if n.After(t) {
		return n
	}
	return t.Add(time.Minute)
}

// parseCron reads a five-field cron expression.
func parseCron(expr string) (*schedule, error) {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", expr, len(f))
	}
	var s schedule
	var errs []error
	for _, fd := range []struct {
		name     string
		text     string
		lo, hi   int
		bits     *uint64
		wildcard *bool
	}{
		{"minute", f[0], 0, 59, &s.minute, nil},
		{"hour", f[1], 0, 23, &s.hour, nil},
		{"day-of-month", f[2], 1, 31, &s.dom, &s.domAny},
		{"month", f[3], 1, 12, &s.month, nil},
		{"day-of-week", f[4], 0, 7, &s.dow, &s.dowAny},
	} {
		bits, err := parseCronField(fd.text, fd.lo, fd.hi)
		if err != nil {
			errs = append(errs, fmt.Errorf("cron %q: %s: %w", expr, fd.name, err))
			continue
		}
		*fd.bits = bits
		if fd.wildcard != nil {
			*fd.wildcard = strings.HasPrefix(fd.text, "*")
		}
	}
	if s.dow&(1<<7) != 0 {
		s.dow |= 1 // 7 is Sunday too
	}
	return &s, errors.Join(errs...)
}

func parseCronField(text string, lo, hi int) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(text, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err1, err2 error
			a, err1 = strconv.Atoi(x)
			b, err2 = strconv.Atoi(y)
			if err1 != nil || err2 != nil || a > b {
				return 0, fmt.Errorf("range %q is not a-b with a <= b", rng)
			}
		default:
			n, err := strconv.Atoi(rng)
			if err != nil {
				return 0, fmt.Errorf("%q is not a number, a range or *", rng)
			}
			a = n
			if !hasStep {
				b = n
			}
		}
		if a < lo || b > hi {
			return 0, fmt.Errorf("%q is outside %d-%d", part, lo, hi)
		}
		for i := a; i <= b; i += step {
			bits |= 1 << uint(i)
		}
	}
	return bits, nil
}

var rruleDays = map[string]time.Weekday{
	"SU": time.Sunday, "MO": time.Monday, "TU": time.Tuesday, "WE": time.Wednesday,
	"TH": time.Thursday, "FR": time.Friday, "SA": time.Saturday,
}

// parseRRule reads the RRULE subset described above.
func parseRRule(rule string) (*schedule, error) {
	body := strings.TrimPrefix(strings.TrimSpace(rule), "RRULE:")
	s := schedule{month: allBits(1, 12), dom: allBits(1, 31), domAny: true, dowAny: true, dow: allBits(0, 6), hour: 1, minute: 1}
	var errs []error
	freq := ""
	hasDay := false
	for _, part := range strings.Split(body, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("rrule %q: %q is not KEY=VALUE", rule, part))
			continue
		}
		switch strings.ToUpper(k) {
		case "FREQ":
			freq = strings.ToUpper(v)
			if freq != "DAILY" && freq != "WEEKLY" {
				errs = append(errs, fmt.Errorf("rrule %q: FREQ=%s: only DAILY and WEEKLY are supported", rule, v))
			}
		case "BYDAY":
			s.dow, s.dowAny, hasDay = 0, false, true
			for _, d := range strings.Split(v, ",") {
				wd, ok := rruleDays[strings.ToUpper(d)]
				if !ok {
					errs = append(errs, fmt.Errorf("rrule %q: BYDAY %q is not one of MO,TU,WE,TH,FR,SA,SU", rule, d))
					continue
				}
				s.dow |= 1 << uint(wd)
			}
		case "BYHOUR":
			bits, err := parseList(v, 0, 23)
			if err != nil {
				errs = append(errs, fmt.Errorf("rrule %q: BYHOUR: %w", rule, err))
			}
			s.hour = bits
		case "BYMINUTE":
			bits, err := parseList(v, 0, 59)
			if err != nil {
				errs = append(errs, fmt.Errorf("rrule %q: BYMINUTE: %w", rule, err))
			}
			s.minute = bits
		default:
			errs = append(errs, fmt.Errorf("rrule %q: %s is not supported (FREQ, BYDAY, BYHOUR, BYMINUTE are)", rule, k))
		}
	}
	switch {
	case freq == "":
		errs = append(errs, fmt.Errorf("rrule %q: FREQ is missing", rule))
	case freq == "WEEKLY" && !hasDay:
		errs = append(errs, fmt.Errorf("rrule %q: FREQ=WEEKLY needs BYDAY", rule))
	}
	return &s, errors.Join(errs...)
}

func parseList(v string, lo, hi int) (uint64, error) {
	var bits uint64
	for _, x := range strings.Split(v, ",") {
		n, err := strconv.Atoi(x)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%q is not a number in %d-%d", x, lo, hi)
		}
		bits |= 1 << uint(n)
	}
	return bits, nil
}

func allBits(lo, hi int) uint64 {
	var b uint64
	for i := lo; i <= hi; i++ {
		b |= 1 << uint(i)
	}
	return b
}

// compiled is a window ready to evaluate.
type compiled struct {
	sched *schedule
	loc   *time.Location
	d     time.Duration
}

func (f FreezeWindow) compile() (compiled, error) {
	var errs []error
	var sched *schedule
	var err error
	switch {
	case f.Cron == "" && f.RRule == "":
		errs = append(errs, errors.New("neither cron nor rrule is set"))
	case f.Cron != "" && f.RRule != "":
		errs = append(errs, errors.New("both cron and rrule are set; give exactly one"))
	case f.Cron != "":
		sched, err = parseCron(f.Cron)
	default:
		sched, err = parseRRule(f.RRule)
	}
	if err != nil {
		errs = append(errs, err)
	}
	d := time.Duration(f.Duration)
	if d < time.Minute || d > maxWindow {
		errs = append(errs, fmt.Errorf("duration %s is not between 1m and %s", d, maxWindow))
	}
	loc, err := zoneinfo.Load(f.TimeZone)
	if err != nil {
		errs = append(errs, fmt.Errorf("timeZone %q: %w", f.TimeZone, err))
	}
	if len(errs) > 0 {
		return compiled{}, errors.Join(errs...)
	}
	return compiled{sched: sched, loc: loc, d: d}, nil
}

func (f FreezeWindow) validate() error {
	_, err := f.compile()
	return err
}

// wall is t's wall-clock time in loc, as a time in UTC (a date and a time of day, no zone), so
// that adding to it is date and time arithmetic.
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// resolve is the instant at which loc's clocks show the wall-clock time w (see wall): its
// first occurrence when the clocks show it twice, and when they skip it, the instant they
// jump at (the transition's, the first instant after w).
//
// Berlin, 2026-03-29 02:30 (skipped): the offset before is +1h, after +2h. 02:30 - 1h is
// 01:30 UTC, which Berlin shows as 03:30 CEST, and 02:30 - 2h is 00:30 UTC, shown 01:30 CET:
// neither shows 02:30, so it is the transition that 01:30 UTC's zone began at, 01:00 UTC.
// 2026-10-25 02:30 (twice): 00:30 UTC (CEST) and 01:30 UTC (CET) both show it; 00:30 UTC.
func resolve(w time.Time, loc *time.Location) time.Time {
	base := w.Unix()
	// The offsets a day before and after: no zone changes its offset twice within two days.
	_, before := time.Unix(base-86400, 0).In(loc).Zone()
	_, after := time.Unix(base+86400, 0).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		i := time.Unix(base-int64(off), int64(w.Nanosecond())).In(loc)
		if wall(i, loc).Equal(w) && (first.IsZero() || i.Before(first)) {
			first = i
		}
	}
	if !first.IsZero() {
		return first
	}
	// Skipped: w less the offset before is past the transition, in the zone it began.
	start, _ := time.Unix(base-int64(before), 0).In(loc).ZoneBounds()
	return start
}

// rules is the arithmetic of a release's freeze windows: the newest, or the one its run began
// with (docs/versioning.md, the release workflow).
type rules int

const (
	// rulesAbsolute: before the change freeze-wall-clock (activeAtAbsolute).
	rulesAbsolute rules = iota
	// rulesWallClock: freeze-wall-clock; a start the clocks skip begins at the jump but ends
	// at its own wall-clock time plus the duration, so it loses the skipped part.
	rulesWallClock
	// rulesSkippedKeepsLength: freeze-skipped-start-length; a start the clocks skip keeps its
	// whole duration from the jump.
	rulesSkippedKeepsLength
)

// rulesNewest is what Frozen and a new run use.
const rulesNewest = rulesSkippedKeepsLength

// activeAt reports whether t is inside one of the window's occurrences, and the end of the
// latest-starting one that covers t. An occurrence with the wall-clock start w covers
// [resolve(w), resolve(w + d)); with keepLength, a start w the clocks skip is first moved to
// the wall-clock time they jump to, so the occurrence keeps its length:
//
//	Berlin, 2026-03-29, 30 2 * * * for 30m: 02:30 is skipped (02:00 CET jumps to 03:00
//	CEST, 01:00 UTC), so w becomes 03:00 and the window is [03:00, 03:30) CEST,
//	01:00-01:30 UTC. Without keepLength it was [resolve(02:30), resolve(03:00)), both
//	01:00 UTC: empty. For 1h: 01:00-02:00 UTC, not 01:00-01:30.
//
// Its starts are searched from t's wall-clock time less d less 3 hours: a start earlier than
// that ends (wall-clock) 3 hours before t's wall-clock time, which neither a change of offset
// nor moving a skipped start to the jump (each at most 2 hours, anywhere) brings past t.
func (c compiled) activeAt(t time.Time, keepLength bool) (time.Time, bool) {
	var end time.Time
	found := false
	w := wall(t, c.loc).Add(-c.d - 3*time.Hour)
	for {
		start, ok := c.sched.next(w)
		if !ok {
			break
		}
		begin := resolve(start, c.loc)
		if begin.After(t) {
			break
		}
		from := start
		if jumped := wall(begin, c.loc); keepLength && jumped.After(start) {
			from = jumped // start is skipped: the clocks jumped from before it to jumped
		}
		if e := resolve(from.Add(c.d), c.loc); e.After(t) && e.After(end) {
			end, found = e, true
		}
		w = start
	}
	return end, found
}

// activeAtAbsolute is activeAt before the change freeze-wall-clock: starts stepped through
// loc's instants (none in a skipped hour, two in a repeated one) and the duration added as
// elapsed time, so a window across a change of offset ended an hour early or late. Runs that
// began before the change keep it (frozenAt with rulesAbsolute), so their histories replay.
func (c compiled) activeAtAbsolute(t time.Time) (time.Time, bool) {
	var end time.Time
	found := false
	from := t.Add(-c.d)
	for {
		s, ok := c.sched.nextIn(from, c.loc)
		if !ok || s.After(t) {
			break
		}
		end, found = s.Add(c.d), true
		from = s
	}
	return end, found
}

// Frozen reports whether t falls in one of the windows; if so, until when (the latest end of
// the windows covering t; another window may begin then, which the caller checks again) and
// why.
func Frozen(windows []FreezeWindow, t time.Time) (until time.Time, reason string, frozen bool) {
	return frozenAt(windows, t, rulesNewest)
}

// frozenAt is Frozen under the rules a run began with (see rules).
func frozenAt(windows []FreezeWindow, t time.Time, r rules) (until time.Time, reason string, frozen bool) {
	for i, f := range windows {
		c, err := f.compile()
		if err != nil {
			continue // Validate rejected it before the release started
		}
		active := func(t time.Time) (time.Time, bool) { return c.activeAt(t, r >= rulesSkippedKeepsLength) }
		if r == rulesAbsolute {
			active = c.activeAtAbsolute
		}
		if end, ok := active(t); ok && end.After(until) {
			until, frozen = end, true
			reason = f.Reason
			if reason == "" {
				reason = fmt.Sprintf("freeze window %d (%s%s for %s, %s)", i, f.Cron, f.RRule, time.Duration(f.Duration), c.loc)
			}
		}
	}
	return until, reason, frozen
}
