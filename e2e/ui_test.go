//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/release"
)

// What the Temporal UI shows of a run, read back through Temporal's API (issue 48,
// docs/ui.md): the run's static summary and details and its current details (Describe and the
// SDK's built-in metadata query, which the UI's "Current Details" asks), and each history
// event's summary and links (the timeline's labels and the links it follows).

// uiEvent is one history event as the UI labels it.
type uiEvent struct {
	ID      int64
	Type    string // "ActivityTaskScheduled", "MarkerRecorded", "TimerStarted", ...
	Signal  string // a WorkflowExecutionSignaled event's signal name
	Summary string
	// Links are the event's links to other runs: "<workflow ID> <run ID>".
	Links []string
}

// uiHistory is the history of one run (run "" is the current one).
func uiHistory(t *testing.T, id, run string) []uiEvent {
	t.Helper()
	var out []uiEvent
	iter := env.tc.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s %s: %v", id, run, err)
		}
		ev := uiEvent{ID: e.GetEventId(), Type: e.GetEventType().String(), Signal: e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()}
		if p := e.GetUserMetadata().GetSummary(); p != nil {
			if err := converter.GetDefaultDataConverter().FromPayload(p, &ev.Summary); err != nil {
				t.Fatalf("decode summary of event %d of %s: %v", e.GetEventId(), id, err)
			}
		}
		for _, l := range e.GetLinks() {
			if we := l.GetWorkflowEvent(); we != nil {
				ev.Links = append(ev.Links, we.GetWorkflowId()+" "+we.GetRunId())
			}
		}
		out = append(out, ev)
	}
	return out
}

// uiRuns is every run of a workflow ID, oldest first (the list is newest first).
func uiRuns(t *testing.T, id string) []string {
	t.Helper()
	out := temporalCLI(t, "workflow", "list", "--query", fmt.Sprintf(`WorkflowId = "%s"`, id), "-o", "json")
	var runs []string
	for _, m := range regexp.MustCompile(`"runId":\s*"([^"]+)"`).FindAllStringSubmatch(out, -1) {
		runs = append([]string{m[1]}, runs...)
	}
	if len(runs) == 0 {
		t.Fatalf("no run of %s listed:\n%s", id, out)
	}
	return runs
}

// firstRunSummary checks the static summary and details of a Deployment's first run, which
// the watcher started: "ns/web: app=nginx:v1, <how>" (watcher.StartSummary) and the images,
// strategy, replicas and revision as a list. Runs continued as new have none (the SDK's
// continue-as-new takes no summary), and the test says so for the current one.
func firstRunSummary(t *testing.T, ns, name, how string) {
	t.Helper()
	id := workflowID(ns, name)
	runs := uiRuns(t, id)
	summary, details, _ := uiMeta(t, id, runs[0])
	if want := regexp.MustCompile(`^` + regexp.QuoteMeta(ns+"/"+name+": ") + `\S+=nginx:\S+, ` + regexp.QuoteMeta(how) + `$`); !want.MatchString(summary) {
		t.Errorf("static summary of %s's first run %q, want it to match %s", id, summary, want)
	}
	if want := regexp.MustCompile("^- images: `\\S+=nginx:\\S+`\n- strategy: " + regexp.QuoteMeta(how) + "\n- replicas: \\d+\n- revision at this run's start: "); !want.MatchString(details) {
		t.Errorf("static details of %s's first run %q, want them to match %s", id, details, want)
	}
	if len(runs) > 1 {
		if s, _, _ := uiMeta(t, id, runs[len(runs)-1]); s != "" {
			t.Errorf("static summary of %s's run %d (continued as new) %q: the SDK gives continue-as-new no summary, so docs/ui.md says none", id, len(runs), s)
		}
	}
}

// summaries are the summaries of the events of a type, in history order.
func summaries(events []uiEvent, typ string) []string {
	var out []string
	for _, e := range events {
		if e.Type == typ && e.Summary != "" {
			out = append(out, e.Summary)
		}
	}
	return out
}

// hasSummary fails the test unless one of the events of typ has a summary matching re.
func hasSummary(t *testing.T, events []uiEvent, typ, re string) {
	t.Helper()
	for _, s := range summaries(events, typ) {
		if regexp.MustCompile(re).MatchString(s) {
			return
		}
	}
	t.Errorf("%s: no summary matching %q among %q", typ, re, summaries(events, typ))
}

// uiMeta is a run's static summary and details (DescribeWorkflowExecution) and its current
// details (the __temporal_workflow_metadata query the UI sends).
func uiMeta(t *testing.T, id, run string) (summary, details, current string) {
	t.Helper()
	ctx := context.Background()
	d, err := env.tc.DescribeWorkflowExecution(ctx, id, run)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	dc := converter.GetDefaultDataConverter()
	if p := d.GetExecutionConfig().GetUserMetadata().GetSummary(); p != nil {
		if err := dc.FromPayload(p, &summary); err != nil {
			t.Fatalf("decode static summary of %s: %v", id, err)
		}
	}
	if p := d.GetExecutionConfig().GetUserMetadata().GetDetails(); p != nil {
		if err := dc.FromPayload(p, &details); err != nil {
			t.Fatalf("decode static details of %s: %v", id, err)
		}
	}
	v, err := env.tc.QueryWorkflow(ctx, id, run, "__temporal_workflow_metadata")
	if err != nil {
		t.Fatalf("query the metadata of %s: %v", id, err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatalf("decode the metadata of %s: %v", id, err)
	}
	return summary, details, md.GetCurrentDetails()
}

// uiURL is the Temporal UI's page of a run (run "": the current run's): its tab "history"
// (the timeline and the events), or "user-metadata" (the summary, the details and the
// current details).
func uiURL(t *testing.T, id, run, tab string) string {
	t.Helper()
	if run == "" {
		d, err := env.tc.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		run = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	return fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/%s", env.stack.UIAddress, url.PathEscape(id), run, tab)
}

// screenshot loads a page of the stack's Temporal UI in headless Chromium (Debian's chromium
// and chromium-driver, which `make tools` installs), driven through chromedriver's WebDriver
// API: it waits until the page's text (document.body.innerText) shows every want (the single-page app fetches the run
// after it loads), then takes a 1400×900 screenshot as name (a PNG) in $UI_SCREENSHOTS
// (relative to the repository root, for docs/) or in a temporary folder, and checks it is a
// PNG of that size with content.
func screenshot(t *testing.T, name, page string, wants ...string) {
	t.Helper()
	shoot(t, name, page, "", wants...)
}

// screenshotDetails is screenshot of a run's User Metadata tab, once its current details are
// loaded: the page asks the run for them when R is pressed ("Press the R for freshness").
func screenshotDetails(t *testing.T, name, page string, wants ...string) {
	t.Helper()
	shoot(t, name, page, "r", wants...)
}

// shoot is screenshot, pressing key (when not "") once the page shows wants[0].
func shoot(t *testing.T, name, page, key string, wants ...string) {
	t.Helper()
	if env.stack.UIAddress == "" {
		t.Fatal("the stack's Temporal server serves no UI (E2E_TEMPORAL=cluster has none)")
	}
	const chromium, driver = "/usr/bin/chromium", "/usr/bin/chromedriver"
	for _, f := range []string{chromium, driver} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s: %v (make tools installs Debian's chromium and chromium-driver)", f, err)
		}
	}
	dir := os.Getenv("UI_SCREENSHOTS")
	switch {
	case dir == "":
		dir = t.TempDir()
	case !filepath.IsAbs(dir):
		dir = filepath.Join("..", dir)
	}
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(driver, fmt.Sprintf("--port=%d", port))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", driver, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	call := func(method, path string, body any) (json.RawMessage, error) {
		var in io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return nil, err
			}
			in = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, in)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out struct {
			Value json.RawMessage `json:"value"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
			// A WebDriver error is {"value": {"error", "message", "stacktrace"}}: say its error
			// and message, not the tail of chromedriver's stack trace.
			var e struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if json.Unmarshal(out.Value, &e) == nil && e.Error != "" {
				return nil, fmt.Errorf("%s %s: %s: %s: %s", method, path, resp.Status, e.Error, tail(e.Message, 1000))
			}
			return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, tail(string(b), 500))
		}
		return out.Value, nil
	}
	eventually(t, 30*time.Second, func() string {
		if _, err := call("GET", "/status", nil); err != nil {
			return err.Error()
		}
		return ""
	})
	// Chromium can crash while it starts on a loaded machine (CI once saw "500 Internal Server
	// Error" from POST /session, chromedriver's stack trace and nothing else). That is the
	// browser, not the UI under test: a session is asked for up to three times, each with a
	// profile of its own, and every failure is logged.
	var v json.RawMessage
	for attempt := 1; ; attempt++ {
		v, err = call("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
			"browserName": "chrome",
			"goog:chromeOptions": map[string]any{"binary": chromium, "args": []string{
				"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync",
				"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--window-size=1400,1000",
			}},
		}}})
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("new session, attempt %d: %v\n%s", attempt, err, log.String())
		}
		t.Logf("new session, attempt %d (tried again): %v", attempt, err)
		time.Sleep(time.Second)
	}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(v, &session); err != nil || session.SessionID == "" {
		t.Fatalf("new session: %s", v)
	}
	sess := "/session/" + session.SessionID
	defer func() { _, _ = call("DELETE", sess, nil) }()
	if _, err := call("POST", sess+"/url", map[string]string{"url": page}); err != nil {
		t.Fatal(err)
	}
	var dom string
	text := func() string {
		// The UI draws Markdown (summaries and details) in frames of their own.
		v, err := call("POST", sess+"/execute/sync", map[string]any{"script": `let s = document.body.innerText;
for (const f of document.querySelectorAll("iframe")) {
  try { s += "\n" + f.contentDocument.body.innerText } catch (e) { s += "\n" + (f.srcdoc || "") }
}
return s`, "args": []any{}})
		if err != nil {
			return err.Error()
		}
		if err := json.Unmarshal(v, &dom); err != nil {
			return err.Error()
		}
		return ""
	}
	if key != "" {
		eventually(t, time.Minute, func() string {
			if err := text(); err != "" {
				return err
			}
			if !strings.Contains(dom, wants[0]) {
				return fmt.Sprintf("the UI's page %s does not show %q yet", page, wants[0])
			}
			return ""
		})
		if _, err := call("POST", sess+"/actions", map[string]any{"actions": []any{map[string]any{
			"type": "key", "id": "keyboard", "actions": []any{map[string]string{"type": "keyDown", "value": key}, map[string]string{"type": "keyUp", "value": key}},
		}}}); err != nil {
			t.Fatalf("press %s: %v", key, err)
		}
	}
	eventually(t, time.Minute, func() string {
		if err := text(); err != "" {
			return err
		}
		for _, w := range wants {
			if !strings.Contains(dom, w) {
				return fmt.Sprintf("the UI's page %s does not show %q; its text (%d bytes) ends:\n%s", page, w, len(dom), tail(dom, 3000))
			}
		}
		return ""
	})
	// The page has what the test waits for; its other panels (the timeline) draw meanwhile.
	time.Sleep(2 * time.Second)
	v, err = call("GET", sess+"/screenshot", nil)
	if err != nil {
		t.Fatal(err)
	}
	var b64 string
	if err := json.Unmarshal(v, &b64); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", page, err)
	}
	if sz := img.Bounds().Size(); sz.X != 1400 || sz.Y < 700 || len(b) < 30_000 {
		t.Errorf("screenshot of %s: %dx%d, %d bytes, want 1400 wide and at least 30 KB (a page with content)", page, sz.X, sz.Y, len(b))
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s (%dx%d, %d KB)", page, file, img.Bounds().Dx(), img.Bounds().Dy(), len(b)/1024)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// TestUISummaries (issue 48): what the Temporal UI shows of a stepped rollout held at a timed
// pause, read back through Temporal's API: the run's start summary, its current details (the
// step, the weight, why it waits and the exact command, which the test then runs),
// and each local activity's marker, each activity and each timer carrying a one-line summary
// naming the object and the change ("scale web-… 0 → 2", "pause at step 2 of 2 of ns/web
// until …", "wait for the next move of ns/web"). A screenshot of the run's page shows them.
func TestUISummaries(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 4, "nginx:v1", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{"duration":"1h"}}]`)))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:v2")
	waitHeld(t, ns, 2, contract.WaitingForTimer)
	id := workflowID(ns, "web")
	var events []uiEvent
	eventually(t, time.Minute, func() string {
		events = uiHistory(t, id, "")
		if len(summaries(events, "TimerStarted")) == 0 {
			return "no timer summary yet"
		}
		return ""
	})
	newRS := "web-" + hashOf(t, ns, "nginx:v2")
	hasSummary(t, events, "MarkerRecorded", `^create ReplicaSet `+newRS+` with `)
	hasSummary(t, events, "MarkerRecorded", `^write the status of `+ns+`/web: `)
	hasSummary(t, events, "MarkerRecorded", `^record RolloutStep`)
	hasSummary(t, events, "MarkerRecorded", `^scale web-[0-9a-z]+ \d+ → \d+`)
	hasSummary(t, events, "TimerStarted", `^pause at step 2 of 2 of `+ns+`/web until \d{4}-\d\d-\d\dT`)
	hasSummary(t, events, "ActivityTaskScheduled", `^wait for the next move of `+ns+`/web$`)

	firstRunSummary(t, ns, "web", "canary in 2 steps")
	_, _, current := uiMeta(t, id, "")
	promote := "temporal workflow update execute --workflow-id deployment/" + ns + "/web --name promote --input '{}'"
	wantLines := []string{
		`^\*\*` + ns + `/web\*\* \w+: revision 1 → 2$`,
		`^Step 2 of 2 \(pause[^)]*\): paused until \d{4}-\d\d-\d\dT[\d:]+Z$`,
		`^Weight 50%\.$`,
		`^Waits for \*\*Timer\*\*: Step 2 of 2 \(pause 1h0m0s\): paused until [\dT:-]+Z \(until [\dT:-]+Z\)$`,
		"^" + regexp.QuoteMeta("`"+promote+" (or abort: temporal workflow update execute --workflow-id deployment/"+ns+"/web --name abort --input '{\"reason\":\"...\"}')`") + "$",
		"^- `" + newRS + "` \\(revision 2\\): 2 replicas, 2 ready, 2 available$",
	}
	for _, re := range wantLines {
		if !regexp.MustCompile(`(?m)` + re).MatchString(current) {
			t.Errorf("current details lack a line matching %q:\n%s", re, current)
		}
	}
	// The run held is not the first (the first rollout's run continued as new): the page shows
	// no start summary, and the current details and the timeline's summaries tell its story.
	screenshot(t, "ui-canary-held.png", uiURL(t, id, "", "history"), id, "pause at step 2 of 2 of "+ns+"/web until ")
	screenshotDetails(t, "ui-canary-held-details.png", uiURL(t, id, "", "user-metadata"), id, "Current Details", "Weight 50%.", "Waits for Timer")

	// The command the details give, as a user would copy it.
	if !strings.Contains(current, promote) {
		t.Fatalf("no %q in the current details:\n%s", promote, current)
	}
	if out, err := temporalCLIErr("workflow", "update", "execute", "--workflow-id", "deployment/"+ns+"/web", "--name", "promote", "--input", "{}"); err != nil {
		t.Fatalf("%s: %v\n%s", promote, err, out)
	}
	waitCompleteImage(t, ns, "nginx:v2")
}

// TestUIBlueGreen: a completed blue-green rollout, as the UI shows it: the start summary, the
// current details at the end, and the summaries of the new ReplicaSet's creation, the Service
// switches (preview, then active), the scale-down delay's timer and the wait.
func TestUIBlueGreen(t *testing.T) {
	ns := newNamespace(t)
	h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"scaleDownDelaySeconds":3}`)
	setImage(t, ns, "web", "nginx:1.26")
	h2 := waitPausedHash(t, ns)
	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	eventually(t, time.Minute, func() string {
		if n := rsReplicasOf(t, ns, "nginx:1.25"); n != 0 {
			return fmt.Sprintf("old replicaset at %d", n)
		}
		return ""
	})
	waitComplete(t, ns, "web")
	id := workflowID(ns, "web")
	var events []uiEvent
	promoted := "" // the run that switched the active Service
	for _, run := range uiRuns(t, id) {
		h := uiHistory(t, id, run)
		for _, s := range summaries(h, "MarkerRecorded") {
			if strings.HasPrefix(s, "point the Services of "+ns+"/web: web → "+h2) {
				promoted = run
			}
		}
		events = append(events, h...)
	}
	hasSummary(t, events, "MarkerRecorded", `^create ReplicaSet web-`+h2+` with `)
	hasSummary(t, events, "MarkerRecorded", `^point the Services of `+ns+`/web: .*web-preview → `+h2)
	hasSummary(t, events, "MarkerRecorded", `^point the Services of `+ns+`/web: web → `+h2)
	hasSummary(t, events, "MarkerRecorded", `^scale web-`+h1+` 3 → 0$`)
	hasSummary(t, events, "MarkerRecorded", `^read `+ns+`/web, its ReplicaSets and pods$`)
	hasSummary(t, events, "TimerStarted", `^blue-green scale-down delay of `+ns+`/web, template `+h2+`, until \d{4}-`)
	hasSummary(t, events, "ActivityTaskScheduled", `^wait for the next move of `+ns+`/web$`)
	firstRunSummary(t, ns, "web", "blue-green")
	var current string
	eventually(t, time.Minute, func() string {
		_, _, current = uiMeta(t, id, "")
		for _, re := range []string{
			`^\*\*` + ns + `/web\*\* Complete: revision \d+ → 2$`,
			"^- `web-" + h2 + "` \\(revision 2\\): 3 replicas, 3 ready, 3 available$",
		} {
			if !regexp.MustCompile(`(?m)` + re).MatchString(current) {
				return fmt.Sprintf("current details lack a line matching %q:\n%s", re, current)
			}
		}
		return ""
	})
	if strings.Contains(current, "promote") {
		t.Errorf("current details of a completed rollout offer a command:\n%s", current)
	}
	if promoted != "" {
		screenshot(t, "ui-bluegreen-done.png", uiURL(t, id, promoted, "history"), id, "point the Services of "+ns+"/web: web → "+h2)
	}
}

// TestUIRelease: a release of two waves, as the UI shows it: its start summary and details
// (the change, the waves and their targets), each activity's and timer's summary (the read,
// the pre-flight, each apply, each wait naming the Deployment's run, the bake), and the links
// both ways: the release's history holds a signal linking to each Deployment run it changed,
// and each of those runs a signal linking back to the release's run. Screenshots of both.
func TestUIRelease(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	for _, n := range []string{"web-a", "web-b"} {
		create(t, newDeployment(ns, n, 2, "nginx:1.25", rolling("1", "0")))
	}
	for _, n := range []string{"web-a", "web-b"} {
		waitComplete(t, ns, n)
	}
	name := "ui-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: first, namespace: %s, names: [web-a]}
  - {name: rest, namespace: %s, names: [web-b]}
waves:
  - {name: canary, targets: [first], bake: 5s}
  - {name: rest, targets: [rest]}
`, name, ns, ns))
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v, want Succeeded", r)
	}
	rid := release.WorkflowID(name)
	d, err := env.tc.DescribeWorkflowExecution(context.Background(), rid, "")
	if err != nil {
		t.Fatal(err)
	}
	rrun := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	summary, details, current := uiMeta(t, rid, rrun)
	if want := "release " + name + ": images app=nginx:1.26 in 2 waves (canary, rest)"; summary != want {
		t.Errorf("release's static summary %q, want %q", summary, want)
	}
	if want := fmt.Sprintf("- wave 1 canary: first (%s: web-a); bake 5s\n- wave 2 rest: rest (%s: web-b)\n\nstarted by ", ns, ns); !strings.HasPrefix(details, want) {
		t.Errorf("release's static details:\n%s\nwant them to start\n%s", details, want)
	}
	if want := "**release " + name + "** Succeeded, wave 2 of 2: all 2 waves done\n\n- wave 1 canary: Done\n- wave 2 rest: Done"; current != want {
		t.Errorf("release's current details:\n%s\nwant\n%s", current, want)
	}
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	events := uiHistory(t, rid, rrun)
	hasSummary(t, events, "ActivityTaskScheduled", `^read target group first: namespace `+ns+`, names web-a$`)
	hasSummary(t, events, "ActivityTaskScheduled", `^pre-flight images app=nginx:1\.26 against 2 Deployments in `+ns+`$`)
	hasSummary(t, events, "TimerStarted", `^bake wave 1 \(canary\) 5s$`)
	var linked []string
	for _, tg := range st.Targets {
		target := ns + "/" + tg.Name
		did := contract.WorkflowID(ns, tg.Name)
		if tg.Workflow != did || tg.RunID == "" {
			t.Errorf("status of target %s: workflow %q run %q, want %s and its run", target, tg.Workflow, tg.RunID, did)
			continue
		}
		hasSummary(t, events, "ActivityTaskScheduled", `^apply images app=nginx:1\.26 to `+target+` \(wave `+tg.Wave+`\)$`)
		hasSummary(t, events, "ActivityTaskScheduled", `^wait for the rollout of `+target+` \(generation 2\): `+regexp.QuoteMeta(did+" run "+tg.RunID)+`$`)
		hasSummary(t, events, "ActivityTaskScheduled", `^record ReleaseChanged on `+target+`$`)
		hasSummary(t, events, "MarkerRecorded", `^link `+regexp.QuoteMeta(rid)+` and the rollout of `+target+`$`)
		linked = append(linked, did+" "+tg.RunID)
		// The Deployment's run links back to the release's.
		var back []string
		for _, e := range uiHistory(t, did, tg.RunID) {
			if e.Type == "WorkflowExecutionSignaled" && e.Signal == contract.SignalLink {
				back = append(back, e.Links...)
			}
		}
		if want := rid + " " + rrun; len(back) != 1 || back[0] != want {
			t.Errorf("%s run %s: links on its %q signals %q, want one to %q", did, tg.RunID, contract.SignalLink, back, want)
		}
	}
	var forth []string
	for _, e := range events {
		if e.Type == "WorkflowExecutionSignaled" && e.Signal == contract.SignalLink {
			forth = append(forth, e.Links...)
		}
	}
	if strings.Join(forth, ", ") != strings.Join(linked, ", ") {
		t.Errorf("release's %q signals link to %q, want %q (its targets' runs, in order)", contract.SignalLink, forth, linked)
	}
	screenshot(t, "ui-release.png", uiURL(t, rid, rrun, "history"), rid, "bake wave 1 (canary) 5s")
	screenshotDetails(t, "ui-release-details.png", uiURL(t, rid, rrun, "user-metadata"), rid, "release "+name+": images app=nginx:1.26 in 2 waves", "Succeeded, wave 2 of 2: all 2 waves done")
	if len(st.Targets) > 0 && st.Targets[0].RunID != "" {
		screenshot(t, "ui-release-rollout.png", uiURL(t, st.Targets[0].Workflow, st.Targets[0].RunID, "history"), st.Targets[0].Workflow, url.PathEscape(rid)+"/"+rrun)
	}
}
