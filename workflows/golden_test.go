package workflows

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/contract"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The golden command sequences (issue 45). Every run of the rollout workflow in a workflow test
// (newEnv) and every replay of a recorded history (testdata/histories) is watched by a
// recorder, an interceptor that writes one line for each call that becomes a command or a
// marker in the history: an activity or local activity, a timer (its duration; Sleep and
// AwaitWithTimeout start one too, and are written as one), the first
// GetVersion of a change ID in a run (the version marker, with the version the run took), a
// side effect, an upsert of search attributes (keys and values) or memo (keys), a child
// workflow, a signal or cancel of another workflow, and how the run ended. The lines are
// compared with testdata/golden/test/<test>.golden and testdata/golden/replay/<history>.golden,
// so a command, timer or marker added, removed or reordered fails a test even where the
// replayer would not notice (a new GetVersion on a replay takes the old branch silently).
//
// `go test ./workflows/ -update` rewrites the files and removes those no test wrote any more.
var updateGolden = flag.Bool("update", false, "rewrite the golden command sequences in testdata/golden")

const goldenDir = "testdata/golden"

// recorder is a worker interceptor that writes the lines of every workflow run it sees.
type recorder struct {
	interceptor.WorkerInterceptorBase

	mu    sync.Mutex
	runs  int
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// text is what the recorder saw, one line each, ending in a newline.
func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return ""
	}
	return strings.Join(r.lines, "\n") + "\n"
}

func (r *recorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	r.mu.Lock()
	r.runs++
	run := r.runs
	r.mu.Unlock()
	return &recordInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, rec: r, run: run}
}

type recordInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rec *recorder
	run int
}

func (in *recordInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &recordOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, rec: in.rec, versions: map[string]bool{}}
	return in.Next.Init(out)
}

func (in *recordInbound) ExecuteWorkflow(ctx workflow.Context, input *interceptor.ExecuteWorkflowInput) (any, error) {
	in.rec.add("run %d %s", in.run, workflow.GetInfo(ctx).WorkflowType.Name)
	res, err := in.Next.ExecuteWorkflow(ctx, input)
	switch {
	case err == nil:
		in.rec.add("end complete")
	case workflow.IsContinueAsNewError(err):
		in.rec.add("end continue-as-new")
	case temporal.IsCanceledError(err):
		in.rec.add("end canceled")
	default:
		in.rec.add("end fail")
	}
	return res, err
}

type recordOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rec      *recorder
	versions map[string]bool // change IDs asked in this run: only the first asks for a marker
}

func (o *recordOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.rec.add("activity %s", activityType)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *recordOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.rec.add("local-activity %s", activityType)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

func (o *recordOutbound) ExecuteChildWorkflow(ctx workflow.Context, childWorkflowType string, args ...any) workflow.ChildWorkflowFuture {
	o.rec.add("child-workflow %s", childWorkflowType)
	return o.Next.ExecuteChildWorkflow(ctx, childWorkflowType, args...)
}

func (o *recordOutbound) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	o.rec.add("timer %s", d)
	return o.Next.NewTimer(ctx, d)
}

func (o *recordOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, options workflow.TimerOptions) workflow.Future {
	o.rec.add("timer %s", d)
	return o.Next.NewTimerWithOptions(ctx, d, options)
}

// Sleep records nothing itself: the SDK's Sleep starts its timer through NewTimer, which
// passes this interceptor and records it (recording it here too listed one timer command
// twice).
func (o *recordOutbound) Sleep(ctx workflow.Context, d time.Duration) error {
	return o.Next.Sleep(ctx, d)
}

func (o *recordOutbound) AwaitWithTimeout(ctx workflow.Context, timeout time.Duration, condition func() bool) (bool, error) {
	o.rec.add("timer %s", timeout)
	return o.Next.AwaitWithTimeout(ctx, timeout, condition)
}

func (o *recordOutbound) AwaitWithOptions(ctx workflow.Context, options workflow.AwaitOptions, condition func() bool) (bool, error) {
	o.rec.add("timer %s", options.Timeout)
	return o.Next.AwaitWithOptions(ctx, options, condition)
}

func (o *recordOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	v := o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
	if !o.versions[changeID] {
		o.versions[changeID] = true
		o.rec.add("version %s %d", changeID, v)
	}
	return v
}

func (o *recordOutbound) SideEffect(ctx workflow.Context, f func(ctx workflow.Context) any) converter.EncodedValue {
	o.rec.add("side-effect")
	return o.Next.SideEffect(ctx, f)
}

func (o *recordOutbound) MutableSideEffect(ctx workflow.Context, id string, f func(ctx workflow.Context) any, equals func(a, b any) bool) converter.EncodedValue {
	o.rec.add("mutable-side-effect %s", id)
	return o.Next.MutableSideEffect(ctx, id, f, equals)
}

func (o *recordOutbound) UpsertSearchAttributes(ctx workflow.Context, attributes map[string]any) error {
	keys := make([]string, 0, len(attributes))
	// Collects the keys, sorted below.
	//workflowcheck:ignore
	for k, v := range attributes {
		keys = append(keys, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(keys)
	o.rec.add("search-attributes %s", strings.Join(keys, " "))
	return o.Next.UpsertSearchAttributes(ctx, attributes)
}

func (o *recordOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, attributes ...temporal.SearchAttributeUpdate) error {
	var kv []string
	// Collects the keys, sorted below.
	//workflowcheck:ignore
	for k, v := range temporal.NewSearchAttributes(attributes...).GetUntypedValues() {
		kv = append(kv, fmt.Sprintf("%s=%v", k.GetName(), v))
	}
	sort.Strings(kv)
	o.rec.add("search-attributes %s", strings.Join(kv, " "))
	return o.Next.UpsertTypedSearchAttributes(ctx, attributes...)
}

func (o *recordOutbound) UpsertMemo(ctx workflow.Context, memo map[string]any) error {
	keys := make([]string, 0, len(memo))
	// Collects the keys, sorted below.
	//workflowcheck:ignore
	for k := range memo {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o.rec.add("memo %s", strings.Join(keys, " "))
	return o.Next.UpsertMemo(ctx, memo)
}

func (o *recordOutbound) SignalExternalWorkflow(ctx workflow.Context, workflowID, runID, signalName string, arg any) workflow.Future {
	o.rec.add("signal-external %s", signalName)
	return o.Next.SignalExternalWorkflow(ctx, workflowID, runID, signalName, arg)
}

func (o *recordOutbound) RequestCancelExternalWorkflow(ctx workflow.Context, workflowID, runID string) workflow.Future {
	o.rec.add("cancel-external")
	return o.Next.RequestCancelExternalWorkflow(ctx, workflowID, runID)
}

func (o *recordOutbound) NewContinueAsNewError(ctx workflow.Context, wfn any, args ...any) error {
	o.rec.add("continue-as-new")
	return o.Next.NewContinueAsNewError(ctx, wfn, args...)
}

// goldenRuns counts the environments each test made, so a test with two has two files, and
// keeps the golden files written in this test binary, to find the ones no test writes any more.
type goldenRuns struct {
	mu      sync.Mutex
	perTest map[*testing.T]int // per test run, so -count=2 names its files as -count=1 does
	written map[string]bool
}

var golden = &goldenRuns{perTest: map[*testing.T]int{}, written: map[string]bool{}}

// goldenName is the file of a test's n-th environment: TestRollback/by_signal is
// test/TestRollback__by_signal.golden, its second environment ...__by_signal.2.golden.
func (g *goldenRuns) next(t *testing.T) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.perTest[t]++
	name := goldenFileName(t.Name())
	if n := g.perTest[t]; n > 1 {
		name = fmt.Sprintf("%s.%d", name, n)
	}
	return filepath.Join(goldenDir, "test", name+".golden")
}

// goldenFileName keeps letters, digits and ._=- of a test's name; a subtest's / is __, and any
// other run of characters one _.
func goldenFileName(test string) string {
	var b strings.Builder
	under := false
	for _, c := range strings.ReplaceAll(test, "/", "__") {
		ok := c == '.' || c == '=' || c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
		if !ok {
			if !under {
				b.WriteByte('_')
			}
			under = true
			continue
		}
		under = false
		b.WriteRune(c)
	}
	return strings.TrimSuffix(b.String(), "_")
}

func (g *goldenRuns) wrote(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written[path] = true
}

// recordGolden watches the workflow runs of env and, when the test ends, compares what they
// did with the test's golden file (or writes it with -update). An environment that ran no
// workflow has no file.
func recordGolden(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	rec := &recorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	path := golden.next(t)
	t.Cleanup(func() { compareGolden(t, path, rec.text()) })
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if got == "" {
		return
	}
	golden.wrote(path)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("golden command sequence: %v (go test ./workflows/ -update writes it)", err)
		return
	}
	if got != string(want) {
		t.Errorf("command sequence differs from %s (go test ./workflows/ -update rewrites it):\n%s", path, lineDiff(got, string(want)))
	}
}

// lineDiff shows where got first departs from want, with a few lines around it.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	from := max(0, i-3)
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d\ngot:\n", i+1)
	for _, l := range g[from:min(len(g), i+4)] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("want:\n")
	for _, l := range w[from:min(len(w), i+4)] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// TestReplayGolden replays each recorded history with the recorder: the calls the current code
// makes on the recorded events, with the version each change ID took (-1, the old branch, where
// the history has no marker).
func TestReplayGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{rec}})
			if err != nil {
				t.Fatal(err)
			}
			r.RegisterWorkflowWithOptions(DeploymentWorkflow, workflow.RegisterOptions{Name: contract.WorkflowType})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
			compareGolden(t, filepath.Join(goldenDir, "replay", name+".golden"), rec.text())
		})
	}
}

// TestMain runs the tests, then, when all of them ran, fails on golden files no test wrote (a
// test renamed or removed), or with -update removes them.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		code = staleGolden()
	}
	os.Exit(code)
}

func staleGolden() int {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "*.golden"))
	var stale []string
	for _, f := range files {
		if !golden.written[f] {
			stale = append(stale, f)
		}
	}
	slices.Sort(stale)
	for _, f := range stale {
		if *updateGolden {
			_ = os.Remove(f)
			continue
		}
		fmt.Fprintf(os.Stderr, "golden file %s: no test wrote it (go test ./workflows/ -update removes it)\n", f)
	}
	if len(stale) > 0 && !*updateGolden {
		return 1
	}
	return 0
}
