package release

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	// The time zone database is compiled in, so a freeze window's zone resolves the same on
	// every worker, with or without /usr/share/zoneinfo.
	_ "time/tzdata"
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

// next is the first start strictly after t, in loc; false when none within 5 years.
func (s *schedule) next(t time.Time, loc *time.Location) (time.Time, bool) {
	t = t.In(loc).Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		switch {
		case s.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !s.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case s.hour&(1<<uint(t.Hour())) == 0:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, loc)
		case s.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t, true
		}
	}
	return time.Time{}, false
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
	loc := time.UTC
	if f.TimeZone != "" {
		if loc, err = time.LoadLocation(f.TimeZone); err != nil {
			errs = append(errs, fmt.Errorf("timeZone %q: %w", f.TimeZone, err))
		}
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

// activeAt reports whether t is inside one of the window's occurrences, and the end of the
// latest-starting one that covers t. An occurrence starting at s covers [s, s+d): t is covered
// when some start falls in (t-d, t].
func (c compiled) activeAt(t time.Time) (time.Time, bool) {
	var end time.Time
	found := false
	from := t.Add(-c.d)
	for {
		s, ok := c.sched.next(from, c.loc)
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
	for i, f := range windows {
		c, err := f.compile()
		if err != nil {
			continue // Validate rejected it before the release started
		}
		if end, ok := c.activeAt(t); ok && end.After(until) {
			until, frozen = end, true
			reason = f.Reason
			if reason == "" {
				reason = fmt.Sprintf("freeze window %d (%s%s for %s, %s)", i, f.Cron, f.RRule, time.Duration(f.Duration), c.loc)
			}
		}
	}
	return until, reason, frozen
}
