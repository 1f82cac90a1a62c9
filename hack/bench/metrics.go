package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/cost"
)

// writeVerbs are the apiserver_request_total verbs that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

// Writes counts apiserver writes on Deployments and ReplicaSets (subresources included).
type Writes struct {
	Deployments int `json:"deployments"`
	ReplicaSets int `json:"replicasets"`
	// Detail is per "resource[/subresource] VERB".
	Detail map[string]int `json:"detail,omitempty"`
}

// Total is deployments + replicasets.
func (w Writes) Total() int { return w.Deployments + w.ReplicaSets }

// counts is one scrape: "resource[/subresource] VERB" -> apiserver_request_total.
type counts map[string]float64

func (a counts) sub(b counts) Writes {
	w := Writes{Detail: map[string]int{}}
	for k, v := range a {
		d := int(v - b[k] + 0.5)
		if d == 0 {
			continue
		}
		w.Detail[k] = d
		if strings.HasPrefix(k, "deployments") {
			w.Deployments += d
		} else {
			w.ReplicaSets += d
		}
	}
	return w
}

type scraper struct {
	url, token string
	hc         *http.Client
}

func newScraper(apiserver, token string) *scraper {
	return &scraper{url: apiserver + "/metrics", token: token, hc: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} //nolint:gosec // loopback, self-signed
}

// scrape reads the apiserver's /metrics and sums apiserver_request_total of write verbs on
// deployments and replicasets.
func (s *scraper) scrape(ctx context.Context) (counts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape apiserver metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape apiserver metrics: status %s", resp.Status)
	}
	out := counts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		seen = true
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):end])
		res := labels["resource"]
		if (res != "deployments" && res != "replicasets") || !writeVerbs[labels["verb"]] {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(line[end+1:])[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		key := res
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key+" "+labels["verb"]] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read apiserver metrics: %w", err)
	}
	if !seen {
		return nil, fmt.Errorf("apiserver metrics have no apiserver_request_total")
	}
	return out, nil
}

// parseLabels reads `a="x",b="y"` (values may hold escaped quotes and commas).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return out
		}
		name := strings.TrimSpace(strings.TrimLeft(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				val.WriteByte(s[i])
				continue
			}
			if c == '"' {
				break
			}
			val.WriteByte(c)
		}
		out[name] = val.String()
		if i+1 >= len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

// ProcStats are one process's CPU and memory.
type ProcStats struct {
	// CPUSeconds is utime+stime over the process's life (read before the stack stops).
	CPUSeconds float64 `json:"cpuSeconds"`
	// CPUUpdateSeconds is the CPU used during the update phase (incl. settle).
	CPUUpdateSeconds float64 `json:"cpuUpdateSeconds"`
	// CPUActiveSeconds is the CPU used from the update to its completion (no settle).
	// CPU figures count the process's children too (PostgreSQL's backends).
	CPUActiveSeconds float64 `json:"cpuActiveSeconds,omitempty"`
	// PeakRSSKB is VmHWM.
	PeakRSSKB int64 `json:"peakRSSKB"`
	// RSSAfterIdleKB is VmRSS after the scale workload's idle period.
	RSSAfterIdleKB int64 `json:"rssAfterIdleKB,omitempty"`
	// RSSEndKB is VmRSS at the end.
	RSSEndKB int64 `json:"rssEndKB"`
}

func (p *ProcStats) readFinal(pid int, tree procTree) error {
	hwm, rss, err := readMem(pid)
	if err != nil {
		return err
	}
	cpu, err := tree.cpu(pid)
	if err != nil {
		return err
	}
	p.CPUSeconds, p.PeakRSSKB, p.RSSEndKB = cpu, hwm, rss
	return nil
}

// statFields returns /proc/<pid>/stat's fields after the command name (which is in
// parentheses and may hold spaces): field 3 (state) is index 0.
func statFields(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return fields, nil
}

// procTree is one read of every process on the machine: its children and its CPU ticks,
// utime+stime+cutime+cstime (its own and those of its children exited and waited for).
type procTree struct {
	children map[int][]int
	ticks    map[int]int64
}

func readProcTree() procTree {
	t := procTree{children: map[int][]int{}, ticks: map[int]int64{}}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(pid)
		if err != nil {
			continue // gone since the listing
		}
		ppid, _ := strconv.Atoi(f[1])
		t.children[ppid] = append(t.children[ppid], pid)
		for _, i := range []int{11, 12, 13, 14} { // fields 14-17
			v, _ := strconv.ParseInt(f[i], 10, 64)
			t.ticks[pid] += v
		}
	}
	return t
}

// cpu is the CPU seconds of pid and of every descendant, live or exited and waited for
// (PostgreSQL's backends come and go).
func (t procTree) cpu(pid int) (float64, error) {
	if _, ok := t.ticks[pid]; !ok {
		return 0, fmt.Errorf("process %d not found in /proc", pid)
	}
	var total int64
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		total += t.ticks[queue[0]]
		queue = append(queue, t.children[queue[0]]...)
	}
	return float64(total) / clockTicks, nil
}

// MachineCPU is the machine's CPU time over an interval, from /proc/stat's cpu line.
type MachineCPU struct {
	// Seconds is the interval's wall time times the cores; Busy is what was not idle or iowait.
	Seconds float64 `json:"seconds"`
	Busy    float64 `json:"busySeconds"`
}

type machineSample struct{ total, idle int64 }

func readMachineCPU() (*machineSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return nil, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	var s machineSample
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest and guest_nice are inside user and nice already
			break
		}
		s.total += n
		if i == 3 || i == 4 { // idle, iowait
			s.idle += n
		}
	}
	return &s, nil
}

func (s *machineSample) since(s0 *machineSample) *MachineCPU {
	return &MachineCPU{Seconds: float64(s.total-s0.total) / clockTicks, Busy: float64((s.total-s.idle)-(s0.total-s0.idle)) / clockTicks}
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// readMem returns VmHWM and VmRSS in kB.
func readMem(pid int) (hwmKB, rssKB int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			hwmKB, _ = strconv.ParseInt(f[1], 10, 64)
		case "VmRSS:":
			rssKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return hwmKB, rssKB, nil
}

// TemporalStats are per rolled Deployment: the runs that carried the update (closed after it
// started, or still running), summed. A run started before the update does not count its
// start among the actions: the phase before caused it.
type TemporalStats struct {
	Rollouts        int   `json:"rollouts"`
	Runs            int   `json:"runs"`
	Events          []int `json:"events"`
	WorkflowTasks   []int `json:"workflowTasks"`
	LocalActivities []int `json:"localActivities"`
	Activities      []int `json:"activities"`
	// Actions are the billable actions as Temporal Cloud counts them (internal/cost.Count,
	// heartbeats aside); Heartbeats the heartbeat estimate (cost.EstimateHeartbeats).
	Actions    []int `json:"actions,omitempty"`
	Heartbeats []int `json:"heartbeats,omitempty"`
	// ByCategory are the actions of every rolled Deployment together, by category, for where
	// they go.
	ByCategory *cost.Actions `json:"byCategory,omitempty"`
	// HeartbeatsReached is a count, not an estimate: the RecordActivityTaskHeartbeat requests
	// the Temporal server answered from the update's start to the closing scrape (its
	// service_requests metric), for all the rolled Deployments together; nil where the server
	// exposes no metrics (cluster mode).
	HeartbeatsReached *int `json:"heartbeatsReached,omitempty"`
	// PersistenceWrites is a count too: the write operations of the server's persistence
	// (persistence_requests, operations named as writes: persistenceWrite) over the same
	// interval, all rolled Deployments together; nil without metrics.
	PersistenceWrites *int `json:"persistenceWrites,omitempty"`
	// Samples are the server's counters every serverSampleEvery from the update's start, for
	// a window of the phase (a hold's minutes, say).
	Samples []ServerSample `json:"samples,omitempty"`
}

// ServerSample is the Temporal server's counters T seconds after the update started, since the
// update started.
type ServerSample struct {
	T                 float64 `json:"t"`
	Heartbeats        int     `json:"heartbeats"`
	PersistenceWrites int     `json:"persistenceWrites"`
}

// serverSampleEvery paces ServerSamples.
const serverSampleEvery = 15 * time.Second

// persistenceWrite reports whether a persistence operation of the Temporal server writes, by
// its name (CreateWorkflowExecution, UpdateWorkflowExecution, AppendHistoryNodes, CreateTasks,
// CompleteTasksLessThan, UpdateShard, UpsertWorkflowExecution, ...); reads (Get*, List*,
// Read*, AssertShardOwnership) are not.
func persistenceWrite(op string) bool {
	for _, p := range []string{"Create", "Update", "Append", "Upsert", "Delete", "Complete", "RangeComplete", "ConflictResolve", "Save", "Put", "Set"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// serverCounters reads the Temporal server's /metrics once: heartbeats answered
// (service_requests of heartbeatOperation at the frontend) and persistence writes (persistence_requests of
// persistenceWrite operations).
func serverCounters(ctx context.Context, url string) (heartbeats, writes int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scrape temporal metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("scrape temporal metrics: status %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("read temporal metrics: %w", err)
	}
	// One heartbeat is a request to the frontend, which the history service answers: the dev
	// server counts it under both services' names; the frontend's is the client's.
	if heartbeats, err = sumMetric(bytes.NewReader(b), "service_requests", func(l map[string]string) bool {
		return l["operation"] == heartbeatOperation && (l["service_name"] == "frontend" || l["service_name"] == "")
	}); err != nil {
		return 0, 0, err
	}
	writes, err = sumMetric(bytes.NewReader(b), "persistence_requests", func(l map[string]string) bool { return persistenceWrite(l["operation"]) })
	return heartbeats, writes, err
}

// heartbeatOperation is the frontend's operation label of an activity heartbeat.
const heartbeatOperation = "RecordActivityTaskHeartbeat"

// sumMetric sums the samples of a Prometheus text exposition's metric whose labels match.
func sumMetric(r io.Reader, name string, match func(labels map[string]string) bool) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		if !match(parseLabels(line[len(name)+1 : end])) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(line[end+1:])[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	return int(sum), nil
}

const localActivityMarker = "LocalActivity"

func temporalStats(ctx context.Context, tc client.Client, ns string, names []string, since time.Time) (*TemporalStats, error) {
	type one struct {
		runs, events, wft, la, act, actions, heartbeats int
		by                                              cost.Actions
	}
	results := make([]one, len(names))
	err := forEachWorkflow(ctx, tc, ns, names, func(i int, id string, runs []*workflowpb.WorkflowExecutionInfo) error {
		for _, ex := range runs {
			running := ex.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			if !running && (ex.CloseTime == nil || ex.CloseTime.AsTime().Before(since)) {
				continue
			}
			results[i].runs++
			it := tc.GetWorkflowHistory(ctx, id, ex.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			h := &historypb.History{}
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return fmt.Errorf("history of %s run %s: %w", id, ex.Execution.RunId, err)
				}
				h.Events = append(h.Events, ev)
				results[i].events++
				switch ev.EventType {
				case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
					results[i].wft++
				case enumspb.EVENT_TYPE_MARKER_RECORDED:
					if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == localActivityMarker {
						results[i].la++
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					results[i].act++
				}
			}
			c := cost.Count(h)
			if ex.StartTime != nil && ex.StartTime.AsTime().Before(since) {
				// The run the update came to was started (continued as new) by the phase
				// before, which paid its start: a rollout pays for the one start it causes,
				// the run its end continues to.
				c.Total -= c.Actions.WorkflowStarts
				c.Actions.WorkflowStarts = 0
			}
			results[i].actions += c.Total
			results[i].by = results[i].by.Add(c.Actions)
			results[i].heartbeats += c.HeartbeatEstimate.Heartbeats
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st := &TemporalStats{Rollouts: len(names), ByCategory: &cost.Actions{}}
	for _, r := range results {
		*st.ByCategory = st.ByCategory.Add(r.by)
		st.Runs += r.runs
		st.Events = append(st.Events, r.events)
		st.WorkflowTasks = append(st.WorkflowTasks, r.wft)
		st.LocalActivities = append(st.LocalActivities, r.la)
		st.Activities = append(st.Activities, r.act)
		st.Actions = append(st.Actions, r.actions)
		st.Heartbeats = append(st.Heartbeats, r.heartbeats)
	}
	return st, nil
}

// forEachWorkflow calls fn, 8 at a time, with every run of each named Deployment's workflow,
// and returns the first error.
func forEachWorkflow(ctx context.Context, tc client.Client, ns string, names []string, fn func(i int, id string, runs []*workflowpb.WorkflowExecutionInfo) error) error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			id := contract.WorkflowID(ns, name)
			runs, err := runsOf(ctx, tc, id)
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = fn(i, id, runs)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runsOf lists every run of the workflow with that ID, newest first, from the histories alone:
// the latest run from DescribeWorkflowExecution, each earlier one named by its successor's
// start event (continuedExecutionRunId). Listing the runs through visibility timed out on the
// PostgreSQL Temporal's SQL visibility after scale-1000, and visibility lags the histories.
func runsOf(ctx context.Context, tc client.Client, id string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var runs []*workflowpb.WorkflowExecutionInfo
	runID := ""
	for {
		d, err := tc.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			return nil, fmt.Errorf("describe %s run %q: %w", id, runID, err)
		}
		info := d.GetWorkflowExecutionInfo()
		runs = append(runs, info)
		it := tc.GetWorkflowHistory(ctx, id, info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !it.HasNext() {
			return runs, nil
		}
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s run %s: %w", id, info.GetExecution().GetRunId(), err)
		}
		if runID = ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			return runs, nil
		}
	}
}

// median and maxOf summarise per-rollout counts.
func median(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int(nil), xs...)
	sort.Ints(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return float64(s[n/2-1]+s[n/2]) / 2
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func sumOf(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// StartPath splits our side's reaction to a phase's change (a Deployment created, or its
// image updated) along its workflow's history, in seconds from the phase's start (medians and
// maxima over the Deployments):
//
//   - Started: the event that brought the change to the workflow: WorkflowExecutionStarted for
//     a create (the watcher saw the Deployment and its signal-with-start reached the Temporal
//     server), the first WorkflowExecutionSignaled after the phase's start for an update;
//   - Picked: the first WorkflowTaskStarted after it (matching handed the task to a worker's
//     poll);
//   - Decided: the WorkflowTaskCompleted after that (the sync, which creates the ReplicaSet in
//     a local activity, is done).
type StartPath struct {
	Deployments   int     `json:"deployments"`
	StartedMedian float64 `json:"startedMedian"`
	StartedMax    float64 `json:"startedMax"`
	PickedMedian  float64 `json:"pickedMedian"`
	PickedMax     float64 `json:"pickedMax"`
	DecidedMedian float64 `json:"decidedMedian"`
	DecidedMax    float64 `json:"decidedMax"`
}

// startPath is the StartPath of the Deployments names from t0, with first the event type that
// brings the change (WorkflowExecutionStarted or WorkflowExecutionSignaled).
func startPath(ctx context.Context, tc client.Client, ns string, names []string, t0 time.Time, first enumspb.EventType) (*StartPath, error) {
	started, picked, decided := make([]float64, len(names)), make([]float64, len(names)), make([]float64, len(names))
	err := forEachWorkflow(ctx, tc, ns, names, func(i int, id string, runs []*workflowpb.WorkflowExecutionInfo) error {
		runs = slices.Clone(runs)
		slices.SortFunc(runs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
			return a.StartTime.AsTime().Compare(b.StartTime.AsTime())
		})
		for _, run := range runs {
			it := tc.GetWorkflowHistory(ctx, id, run.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() && decided[i] == 0 {
				ev, err := it.Next()
				if err != nil {
					return fmt.Errorf("history of %s: %w", id, err)
				}
				if ev.EventTime.AsTime().Before(t0) {
					continue
				}
				at := ev.EventTime.AsTime().Sub(t0).Seconds()
				switch {
				case started[i] == 0 && ev.EventType == first:
					started[i] = at
				case started[i] > 0 && picked[i] == 0 && ev.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
					picked[i] = at
				case picked[i] > 0 && ev.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
					decided[i] = at
				}
			}
			if decided[i] > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s: no %s, then a workflow task, after the phase's start", id, first)
	})
	if err != nil {
		return nil, err
	}
	for _, xs := range [][]float64{started, picked, decided} {
		sort.Float64s(xs)
	}
	return &StartPath{Deployments: len(names),
		StartedMedian: quantile(started, 0.5), StartedMax: quantile(started, 1),
		PickedMedian: quantile(picked, 0.5), PickedMax: quantile(picked, 1),
		DecidedMedian: quantile(decided, 0.5), DecidedMax: quantile(decided, 1),
	}, nil
}
