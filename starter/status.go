package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// The formats of `starter status -o`.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

var outputFormats = []string{outputText, outputJSON, outputYAML}

// statusOpts are the flags of `starter status`.
type statusOpts struct {
	output   string
	watch    bool
	interval time.Duration
}

func (o statusOpts) validate() error {
	switch o.output {
	case outputText, outputJSON, outputYAML:
	default:
		return fmt.Errorf("--output must be one of %s, got %q", strings.Join(outputFormats, ", "), o.output)
	}
	if o.interval <= 0 {
		return fmt.Errorf("--interval must be > 0, got %s", o.interval)
	}
	return nil
}

// formatStatus is st in one of outputFormats: the text of renderStatus, or the status query's
// answer as JSON (what `starter status` printed before it had -o) or YAML, with the JSON's
// field names.
func formatStatus(st contract.Status, output string) (string, error) {
	switch output {
	case outputJSON:
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return "", fmt.Errorf("encode status as JSON: %w", err)
		}
		return string(b) + "\n", nil
	case outputYAML:
		b, err := yaml.Marshal(st)
		if err != nil {
			return "", fmt.Errorf("encode status as YAML: %w", err)
		}
		return string(b), nil
	}
	return renderStatus(st), nil
}

// writeStatus writes st to w in the format output.
func writeStatus(w io.Writer, st contract.Status, output string) error {
	s, err := formatStatus(st, output)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, s)
	return err
}

// statusDone reports whether `status --watch` stops at st: the rollout is Complete. An
// aborted rollout is Complete once it is back on the stable revision (its abort reason stays).
func statusDone(st contract.Status) bool { return st.Phase == string(k8s.PhaseComplete) }

// watchStatus queries every interval and writes the status each time its output changes,
// until the rollout is Complete (statusDone) or ctx ends (Ctrl-C: no error). Text outputs are
// separated by a blank line, YAML documents by "---"; JSON objects follow each other, a
// stream that jq reads.
func watchStatus(ctx context.Context, query func(context.Context) (contract.Status, error), w io.Writer, output string, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last string
	for {
		st, err := query(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s, err := formatStatus(st, output)
		if err != nil {
			return err
		}
		if s != last {
			sep := ""
			if last != "" {
				sep = map[string]string{outputText: "\n", outputYAML: "---\n"}[output]
			}
			if _, err := io.WriteString(w, sep+s); err != nil {
				return err
			}
			last = s
		}
		if statusDone(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// renderStatus is the status query's answer for people, as `kubectl argo rollouts get
// rollout` shows a Rollout: the Deployment, its phase and revisions, the step of a stepped
// rollout and what it waits for, why it stopped, then a table of its ReplicaSets (newest
// first, the new one marked) and one of its conditions. Times are UTC; nothing depends on the
// clock, so `status --watch` prints only what changed.
//
//	Name:       web
//	Namespace:  shop
//	Phase:      Progressing
//	Revision:   3 → 4
//	...
func renderStatus(st contract.Status) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	row := func(key, format string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", key, fmt.Sprintf(format, a...)) }

	row("Name", "%s", st.Name)
	row("Namespace", "%s", st.Namespace)
	row("Phase", "%s", st.Phase)
	row("Paused", "%t", st.Paused)
	if st.CurrentRevision == st.TargetRevision {
		row("Revision", "%d", st.TargetRevision)
	} else {
		row("Revision", "%d → %d", st.CurrentRevision, st.TargetRevision)
	}
	row("Replicas", "%d", st.Replicas)
	if r := st.PendingRollback; r != nil {
		if *r == 0 {
			row("Rollback", "pending, to the previous revision")
		} else {
			row("Rollback", "pending, to revision %d", *r)
		}
	}
	if s := st.Steps; s != nil {
		renderSteps(row, st, s)
	}
	if bg := st.BlueGreen; bg != nil {
		renderBlueGreen(row, st, bg)
	}
	// Why it stopped, or what went wrong.
	hold := ""
	if at := st.AbortScaleDownAt; at != nil {
		hold = at.UTC().Format(time.RFC3339) + " (abortScaleDownDelaySeconds)"
	}
	for _, f := range []struct{ key, value string }{
		{"Abort reason", st.AbortReason},
		{"Aborted pods until", hold},
		{"Annotation error", st.AnnotationError},
		{"Last error", st.LastError},
		{"Ignored signal", st.IgnoredSignal},
		{"Message", st.Message},
	} {
		if f.value != "" {
			row(f.key, "%s", f.value)
		}
	}
	row("Syncs", "%d", st.Syncs)
	if st.WaitMoves > 0 {
		row("Moves by the wait", "%d", st.WaitMoves)
	}

	if len(st.Holds) > 0 {
		// Why the rollout waits, first what must end first, and what ends each.
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "HOLD\tUNTIL\tTO END IT\t")
		for _, h := range st.Holds {
			until := ""
			if h.Until != nil {
				until = h.Until.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", h.Kind, until, h.Do)
		}
	}
	if len(st.ReplicaSets) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "REPLICASET\tREVISION\tREPLICAS\tREADY\tAVAILABLE\t")
		for _, rs := range st.ReplicaSets {
			mark := ""
			if rs.Name == st.NewReplicaSet {
				mark = "new"
			} else if rs.Revision == st.CurrentRevision && st.CurrentRevision != st.TargetRevision {
				mark = "stable"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", rs.Name, rs.Revision, rs.Replicas, rs.Ready, rs.Available, mark)
		}
	}
	if len(st.Conditions) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
		for _, c := range st.Conditions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	_ = tw.Flush() // a strings.Builder does not fail
	// The last column may be empty: no padding after it.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// renderSteps adds a stepped rollout's rows: which step of how many, its weight, what it waits
// for, and its analysis.
func renderSteps(row func(key, format string, a ...any), st contract.Status, s *contract.StepsStatus) {
	switch {
	case s.Step > s.Steps:
		row("Step", "all %d done", s.Steps)
	default:
		row("Step", "%d of %d: %s", s.Step, s.Steps, s.Current)
	}
	if s.Full {
		row("Weight", "%d%% (promoted in full)", s.Weight)
	} else {
		row("Weight", "%d%%", s.Weight)
	}
	if s.WaitingFor != "" {
		switch {
		case s.WaitingFor == contract.WaitingForTimer && s.PauseUntil != nil:
			row("Waiting for", "%s, until %s", s.WaitingFor, s.PauseUntil.UTC().Format(time.RFC3339))
		case s.WaitingFor == contract.WaitingForFreeze && s.Freeze != nil:
			row("Waiting for", "%s, until %s: %s (starter thaw)", s.WaitingFor, s.Freeze.Until.UTC().Format(time.RFC3339), s.Freeze.Reason)
		case s.WaitingFor == contract.WaitingForPromote:
			row("Waiting for", "%s (starter promote %s/%s)", s.WaitingFor, st.Namespace, st.Name)
		default:
			row("Waiting for", "%s", s.WaitingFor)
		}
	}
	if s.Message != "" {
		row("Step message", "%s", s.Message)
	}
	if a := s.Analysis; a != nil {
		row("Analysis", "%d measurements, %d failed", a.Taken, a.Failures)
	}
	if m := s.LastValue; m != nil {
		value := "no value"
		if m.Value != nil {
			value = strconv.FormatFloat(*m.Value, 'g', -1, 64)
		}
		line := fmt.Sprintf("%s, %s at %s", value, m.Verdict, m.At.UTC().Format(time.RFC3339))
		if m.Message != "" {
			line += ": " + m.Message
		}
		row("Last measurement", "%s", line)
	}
}
