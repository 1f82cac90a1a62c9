package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// Report is a whole run.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Cfg      Config    `json:"config"`
	Machine  Machine   `json:"machine"`
	Settings []string  `json:"settings"`
	Results  []Result  `json:"results"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUModel  string `json:"cpuModel"`
	Cores     int    `json:"cores"`
	MemTotal  string `json:"memTotal"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
}

func describeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

type table struct {
	title  string
	header []string
	rows   [][]string
	notes  []string
}

// render draws a Markdown table with padded columns, readable in a terminal too.
func (t table) render() string {
	width := make([]int, len(t.header))
	for i, h := range t.header {
		width[i] = runeLen(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], runeLen(c))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-runeLen(c)) + " |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	b.WriteString("|")
	for _, w := range width {
		b.WriteString(strings.Repeat("-", w+2) + "|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

func runeLen(s string) int { return len([]rune(s)) }

// budgets are the client budgets of the results, in the order they ran.
func (r *Report) budgets() []Budget {
	var out []Budget
	seen := map[Budget]bool{}
	for _, res := range r.Results {
		if !seen[res.Budget] {
			seen[res.Budget] = true
			out = append(out, res.Budget)
		}
	}
	return out
}

// workloads are the workloads of the results, in the order they ran.
func (r *Report) workloads() []string {
	var out []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if !seen[res.Workload] {
			seen[res.Workload] = true
			out = append(out, res.Workload)
		}
	}
	return out
}

func (r *Report) find(workload string, b Budget, side Side) *Result {
	for i := range r.Results {
		if res := &r.Results[i]; res.Workload == workload && res.Budget == b && res.Side == side {
			return res
		}
	}
	return nil
}

// updated reports whether the update phase of a result completed.
func (res *Result) updated() bool { return res != nil && (res.Err == "" || res.UpdateSeconds > 0) }

// comparison is one figure of the side-by-side table.
type comparison struct {
	name string
	// get returns the figure and whether the result has it.
	get func(*Result) (float64, bool)
	fmt func(float64) string
}

var comparisons = []comparison{
	{"update→complete", func(r *Result) (float64, bool) { return r.UpdateSeconds, r.updated() }, fmtDur},
	{"create→available", func(r *Result) (float64, bool) {
		if r == nil {
			return 0, false
		}
		return r.CreateSeconds, r.CreateSeconds > 0
	}, fmtDur},
	{"status stale p99", func(r *Result) (float64, bool) { return r.Freshness.P99, r.updated() && r.Freshness.Deployments > 0 }, fmtSecs},
}

func ratio(ours, builtin float64) string {
	if builtin <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", ours/builtin)
}

func (r *Report) tables() []table {
	budgets := r.budgets()
	compare := table{title: "Ours against the built-in controller, per client budget",
		header: []string{"workload", "figure"},
		notes: []string{
			"Each budget is the client QPS / burst of kube-controller-manager (`--kube-api-qps`, `--kube-api-burst`, on both sides) and of our worker, which runs the watcher (`--kube-qps`, `--kube-burst`). QPS 20 / burst 30 is kube-controller-manager's default.",
			"update→complete: from the image update of every rolled Deployment until all of them are complete by `kubectl rollout status` rules. create→available: from creating every Deployment until all are available.",
			"status stale p99: the 99th percentile of the stale intervals of the update phase (see Status freshness). ours / built-in below 1 means ours is faster or fresher.",
		}}
	for _, b := range budgets {
		compare.header = append(compare.header, b.String()+": built-in", "ours", "ours / built-in")
	}
	for _, w := range r.workloads() {
		for _, c := range comparisons {
			row := []string{w, c.name}
			for _, b := range budgets {
				var vals [2]float64
				var oks [2]bool
				for i, side := range []Side{SideBuiltin, SideOurs} {
					res := r.find(w, b, side)
					cell := "—"
					if res != nil {
						if v, ok := c.get(res); ok {
							vals[i], oks[i] = v, true
							cell = c.fmt(v)
						} else if res.Err != "" {
							cell = "FAILED"
						}
					}
					row = append(row, cell)
				}
				rat := "—"
				if oks[0] && oks[1] {
					rat = ratio(vals[1], vals[0])
				}
				row = append(row, rat)
			}
			compare.rows = append(compare.rows, row)
		}
	}

	fresh := table{title: "Status freshness during the update",
		header: []string{"workload", "budget", "controller", "Deployments", "stale intervals (open at end)", "p50", "p99", "max", "stale time per Deployment, median / max", "phase"},
		notes: []string{
			"A Deployment's status is stale while status.replicas differs from Σ status.replicas of its ReplicaSets, status.updatedReplicas from status.replicas of the new ReplicaSet (the oldest whose pod template equals the Deployment's, ignoring the pod-template-hash label; 0 when there is none), or status.availableReplicas from Σ status.availableReplicas of its ReplicaSets.",
			"The harness watches the namespace's Deployments and ReplicaSets and recomputes the agreement of a rolled Deployment on every change to it or to one of its ReplicaSets; a stale interval starts at the change that makes them differ and ends at the one that makes them agree again. The phase runs from the image update until the closing metrics scrape (complete plus the settle time); intervals still open then are closed there. The image update itself makes the status stale (the old ReplicaSet is no longer the new one) until the controller writes it.",
			"p50, p99 and max are over every stale interval of every rolled Deployment (nearest rank); the stale time of a Deployment is the sum of its intervals.",
		}}
	for _, res := range r.Results {
		row := []string{res.Workload, res.Budget.Short(), string(res.Side)}
		f := res.Freshness
		switch {
		case !res.updated():
			row = append(row, "FAILED", "", "", "", "", "", "")
		case f.Deployments == 0:
			row = append(row, "—", "", "", "", "", "", "")
		default:
			intervals := fmt.Sprintf("%d (%d)", f.Intervals, f.Open)
			if f.Err != "" {
				intervals += " observer: " + firstLine(f.Err)
			}
			row = append(row, strconv.Itoa(f.Deployments), intervals, fmtSecs(f.P50), fmtSecs(f.P99), fmtSecs(f.Max),
				fmtSecs(f.TotalMedian)+" / "+fmtSecs(f.TotalMax), fmtDur(f.PhaseSeconds))
		}
		fresh.rows = append(fresh.rows, row)
	}

	where := table{title: "Where the time goes, per Deployment",
		header: []string{"workload", "budget", "controller", "phase", "Deployments", "react, median / max", "pods, median / max", "status, median / max"},
		notes: []string{
			"react: from the phase's start (the creates, the image update) until the controller's first ReplicaSet write for the Deployment (a ReplicaSet created, or its spec changed).",
			"pods: from then until the Deployment's ReplicaSets' own status says the rollout is done (the new ReplicaSet's replicas all available, no other pods): the ReplicaSet controller, the scheduler, the pods, and the controller's further moves.",
			"status: from then until the Deployment's status says so by `kubectl rollout status` rules (its lag at the end).",
			"Seen by the harness's watch on Deployments and ReplicaSets. A phase's time is its last Deployment's; the medians need not add up to it.",
		}}
	for _, res := range r.Results {
		for _, ph := range []struct {
			name string
			tl   *Timeline
		}{{"create", res.CreateTimeline}, {"update", res.UpdateTimeline}} {
			if ph.tl == nil {
				continue
			}
			t := ph.tl
			where.rows = append(where.rows, []string{res.Workload, res.Budget.Short(), string(res.Side), ph.name, strconv.Itoa(t.Deployments),
				fmtSecs(t.ReactMedian) + " / " + fmtSecs(t.ReactMax), fmtSecs(t.PodsMedian) + " / " + fmtSecs(t.PodsMax),
				fmtSecs(t.StatusMedian) + " / " + fmtSecs(t.StatusMax)})
		}
	}

	starts := table{title: "Our reaction, along the workflow's history",
		header: []string{"workload", "budget", "phase", "Deployments", "started, median / max", "first task picked, median / max", "first task done, median / max", "react (above), median / max"},
		notes: []string{
			"From the phase's start, by the Temporal server's event times: started is the event that brought the change, WorkflowExecutionStarted for a create (the watcher saw the Deployment and its signal-with-start reached the server) and the first WorkflowExecutionSignaled for an update (the watcher's signal); picked is the next WorkflowTaskStarted (a worker's poll took the task); done is the WorkflowTaskCompleted after it (the sync, which creates the ReplicaSet in a local activity, returned its decisions). The ReplicaSet is written between picked and done.",
		}}
	for _, res := range r.Results {
		for _, ph := range []struct {
			name string
			p    *StartPath
			tl   *Timeline
		}{{"create", res.StartPath, res.CreateTimeline}, {"update", res.UpdatePath, res.UpdateTimeline}} {
			p, tl := ph.p, ph.tl
			if p == nil || tl == nil {
				continue
			}
			starts.rows = append(starts.rows, []string{res.Workload, res.Budget.Short(), ph.name, strconv.Itoa(p.Deployments),
				fmtSecs(p.StartedMedian) + " / " + fmtSecs(p.StartedMax), fmtSecs(p.PickedMedian) + " / " + fmtSecs(p.PickedMax),
				fmtSecs(p.DecidedMedian) + " / " + fmtSecs(p.DecidedMax), fmtSecs(tl.ReactMedian) + " / " + fmtSecs(tl.ReactMax)})
		}
	}

	runs := table{title: "Every run: times, writes, bounds",
		header: []string{"workload", "budget", "controller", "create→available", "update→complete", "writes, create (deploy + rs)", "writes, update (deploy + rs)", "worst breach (surge / unavailable)"},
		notes: []string{
			"Writes are apiserver_request_total deltas for verbs POST, PUT, PATCH, DELETE, APPLY on deployments and replicasets (subresources such as status included), scraped before the phase and after it completed plus the settle time. They include the harness's own writes on both sides equally: N creates in the create phase, one PATCH per rolled Deployment in the update phase.",
			"Worst breach: the most a Deployment's Σ ReplicaSet spec.replicas went above replicas + maxSurge, and the most its Ready pods went below replicas − maxUnavailable, seen by a watch on ReplicaSets and pods during the update phase (Recreate: surge bound only, maxSurge 0). Must be 0.",
		}}
	for _, res := range r.Results {
		row := []string{res.Workload, res.Budget.Short(), string(res.Side)}
		if !res.updated() {
			create := "—"
			if res.CreateSeconds > 0 {
				create = fmtDur(res.CreateSeconds)
			}
			row = append(row, create, "FAILED: "+firstLine(res.Err), "", "", "")
		} else {
			row = append(row, fmtDur(res.CreateSeconds), fmtDur(res.UpdateSeconds),
				fmtWrites(res.CreateWrites), fmtWrites(res.UpdateWrites),
				fmt.Sprintf("%d / %d (%d breaches)", res.Bounds.WorstSurge, res.Bounds.WorstUnavailable, res.Bounds.Breaches))
		}
		runs.rows = append(runs.rows, row)
	}

	procs := table{title: "CPU and memory",
		header: []string{"workload", "budget", "controller", "kube-controller-manager", "worker", "watcher", "Temporal dev server", "kube-apiserver"},
		notes:  []string{"Each cell: CPU seconds over the whole run (in parentheses: during the update phase) / peak RSS (VmHWM). CPU is utime+stime from /proc/<pid>/stat; the whole run includes start-up, the warm-up Deployment and the create phase. The built-in side runs no Temporal server."}}
	for _, res := range r.Results {
		row := []string{res.Workload, res.Budget.Short(), string(res.Side)}
		for _, name := range []string{"kube-controller-manager", "worker", "watcher", "temporal", "kube-apiserver"} {
			p := res.Procs[name]
			if p == nil || p.CPUSeconds == 0 && p.PeakRSSKB == 0 {
				row = append(row, "—")
				continue
			}
			update := "—"
			if res.UpdateSeconds > 0 {
				update = fmt.Sprintf("%.1f", p.CPUUpdateSeconds)
			}
			row = append(row, fmt.Sprintf("%.1f s (%s) / %s", p.CPUSeconds, update, fmtKB(p.PeakRSSKB)))
		}
		procs.rows = append(procs.rows, row)
	}

	active := table{title: "CPU from the update to its completion",
		header: []string{"workload", "budget", "controller", "update→complete", "machine busy", "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok", "worker", "Temporal server", "PostgreSQL"},
		notes:  []string{"CPU seconds each process (with its children) used from the update's first PATCH until the last rolled Deployment was complete, before the settle time. Machine busy: the whole machine's CPU that was neither idle nor iowait over the same interval (/proc/stat), against what its cores could give; it counts every process, the harness included. Where it nears 100%, every process waits for a core."}}
	for _, res := range r.Results {
		if res.MachineUpdate == nil || !res.updated() {
			continue
		}
		m := res.MachineUpdate
		row := []string{res.Workload, res.Budget.Short(), string(res.Side), fmtDur(res.UpdateSeconds),
			fmt.Sprintf("%.1f of %.1f s (%.0f%%)", m.Busy, m.Seconds, 100*m.Busy/max(m.Seconds, 0.01))}
		for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok", "worker", "temporal", "postgres"} {
			if p := res.Procs[name]; p != nil && p.CPUActiveSeconds > 0 {
				row = append(row, fmt.Sprintf("%.2f", p.CPUActiveSeconds))
			} else {
				row = append(row, "—")
			}
		}
		active.rows = append(active.rows, row)
	}

	temporal := table{title: "Temporal (our side), per rolled Deployment",
		header: []string{"workload", "budget", "rollouts", "runs", "history events median / max", "workflow tasks median / max", "local activities median / max", "activities", "total events", "actions median / max", "heartbeats (estimate) median", "heartbeats (counted by the server) per Deployment", "persistence writes (counted by the server) per Deployment"},
		notes: []string{"Runs of `deployment/<ns>/<name>` closed after the update started or still running, summed per Deployment; the start of a run that began before the update (the phase before continued to it, and paid for it) is not among its actions. Workflow tasks are WorkflowTaskCompleted events; local activities are LocalActivity markers; activities are ActivityTaskScheduled events.",
			"Actions are Temporal Cloud's billable actions counted from the same histories by `internal/cost` (docs/capacity.md#what-is-counted); heartbeats, which no history holds, are its estimate, apart; the last column counts them: the Temporal server's RecordActivityTaskHeartbeat requests at its frontend (its service_requests metric) from the update's start to the closing scrape, divided by the rolled Deployments; and the server's persistence writes (persistence_requests of its write operations: Create*, Update*, Append*, Upsert*, Delete*, Complete*, ...) over the same interval, divided the same way. Both count everything the server did in that interval, the watcher's and the harness's calls included."}}
	for _, res := range r.Results {
		t := res.Temporal
		if t == nil {
			continue
		}
		temporal.rows = append(temporal.rows, []string{res.Workload, res.Budget.Short(), strconv.Itoa(t.Rollouts), strconv.Itoa(t.Runs),
			fmt.Sprintf("%s / %d", fmtNum(median(t.Events)), maxOf(t.Events)),
			fmt.Sprintf("%s / %d", fmtNum(median(t.WorkflowTasks)), maxOf(t.WorkflowTasks)),
			fmt.Sprintf("%s / %d", fmtNum(median(t.LocalActivities)), maxOf(t.LocalActivities)),
			strconv.Itoa(sumOf(t.Activities)), strconv.Itoa(sumOf(t.Events)),
			fmt.Sprintf("%s / %d", fmtNum(median(t.Actions)), maxOf(t.Actions)), fmtNum(median(t.Heartbeats)), perRolled(t.HeartbeatsReached, t.Rollouts), perRolled(t.PersistenceWrites, t.Rollouts)})
	}

	idle := table{title: "Memory of the worker and watcher, scale workload",
		header: []string{"workload", "budget", "worker RSS after idle", "worker RSS at end", "watcher RSS after idle", "watcher RSS at end"},
		notes:  []string{"VmRSS after the idle period with every Deployment managed, and at the end (after the rollout and the Temporal queries)."}}
	for _, res := range r.Results {
		if res.Kind != KindScale || res.Side != SideOurs {
			continue
		}
		label := res.Workload
		if res.Workers > 1 {
			label += fmt.Sprintf(" (%d workers)", res.Workers)
		}
		if res.TemporalMode != "" {
			label += " (Temporal " + res.TemporalMode + ")"
		}
		row := []string{label, res.Budget.Short()}
		for _, names := range [][]string{workerNames(max(res.Workers, 1)), {"watcher"}} {
			var idle, end []string
			for _, name := range names {
				if p := res.Procs[name]; p != nil {
					idle, end = append(idle, fmtKB(p.RSSAfterIdleKB)), append(end, fmtKB(p.RSSEndKB))
				}
			}
			if len(idle) == 0 {
				row = append(row, "—", "—")
				continue
			}
			row = append(row, strings.Join(idle, " / "), strings.Join(end, " / "))
		}
		idle.rows = append(idle.rows, row)
	}

	out := []table{compare, fresh}
	if len(where.rows) > 0 {
		out = append(out, where)
	}
	if len(starts.rows) > 0 {
		out = append(out, starts)
	}
	out = append(out, runs, procs)
	if len(active.rows) > 0 {
		out = append(out, active)
	}
	if len(temporal.rows) > 0 {
		out = append(out, temporal)
	}
	if len(idle.rows) > 0 {
		out = append(out, idle)
	}
	for _, b := range budgets {
		if t := r.writesDetail(b); len(t.rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// writesDetail is the update phase's writes by resource and verb at one budget.
func (r *Report) writesDetail(b Budget) table {
	detail := table{title: "Writes during the update phase by resource and verb, " + b.String(),
		notes: []string{"apiserver_request_total deltas; the harness's own PATCHes are in `deployments PATCH`."}}
	keys := map[string]bool{}
	detail.header = []string{"resource verb"}
	var cols []*Result
	for i := range r.Results {
		res := &r.Results[i]
		if res.Budget != b || !res.updated() {
			continue
		}
		cols = append(cols, res)
		detail.header = append(detail.header, res.Workload+" "+string(res.Side))
		for k := range res.UpdateWrites.Detail {
			keys[k] = true
		}
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		row := []string{k}
		for _, res := range cols {
			row = append(row, strconv.Itoa(res.UpdateWrites.Detail[k]))
		}
		detail.rows = append(detail.rows, row)
	}
	return detail
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func fmtWrites(w Writes) string {
	return fmt.Sprintf("%d + %d = %d", w.Deployments, w.ReplicaSets, w.Total())
}

func fmtKB(kb int64) string {
	if kb == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func (r *Report) settings() []string {
	c := r.Cfg
	var names []string
	for _, w := range c.Workloads {
		names = append(names, w.Name)
	}
	var budgets []string
	for _, b := range c.Budgets {
		budgets = append(budgets, b.String())
	}
	return []string{
		fmt.Sprintf("Workloads: %s. rolling-<N>x<R>: N Deployments x R replicas, RollingUpdate maxSurge 25%% / maxUnavailable 25%%, one namespace; recreate-<N>x<R>: the same with Recreate; scale-<N>: N x 1 replica (RollingUpdate 25%%/25%%), idle %s, then %d of them rolled at once.", strings.Join(names, ", "), c.Idle, c.Rolled),
		fmt.Sprintf("Client budgets: every workload runs at %s. At each, kube-controller-manager gets it on both sides (`--kube-api-qps`, `--kube-api-burst`) and our worker and watcher get it too (`--kube-qps`, `--kube-burst`). kube-controller-manager builds one client per controller, so the built-in Deployment controller has the budget to itself, as our worker does; the ReplicaSet controller has its own on both sides.", strings.Join(budgets, " and ")),
		fmt.Sprintf("Harness client: QPS %s / burst %d (creates and updates 32 at a time).", fmtNum(c.HarnessQPS), c.HarnessBurst),
		fmt.Sprintf("kwok: %d fake nodes; a scheduled pod becomes Ready after %s plus up to %s of jitter; pods have terminationGracePeriodSeconds 0.", c.Nodes, c.PodReadyDelay, c.PodReadyJitter),
		ours(c),
		"Update: one JSON patch per Deployment replacing the container image (v1 → v2), all issued at once; complete by `kubectl rollout status` rules (observedGeneration ≥ generation, updatedReplicas = replicas = availableReplicas, no old replicas), seen through a Deployment informer.",
		fmt.Sprintf("Settle: %s after each phase completes before the closing metrics scrape. Every workload on every side at every budget runs on a fresh stack (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and for our side the Temporal dev server), stopped afterwards; a one-replica warm-up Deployment in another namespace proves the controller runs before the clock starts.", c.Settle),
	}
}

// ours says how our side ran: the watcher inside the worker (`worker --watch`, as deploy/ runs
// it) or as a process of its own (--separate-watcher).
func ours(c Config) string {
	extra := ""
	if len(c.WorkerArgs) > 0 {
		extra = fmt.Sprintf(" Each worker also ran with `%s` (`--worker-args`).", strings.Join(c.WorkerArgs, " "))
	}
	return oursBase(c) + extra
}

func oursBase(c Config) string {
	if c.SeparateWatcher {
		return "Our worker and watcher (a process of its own, `--separate-watcher`): started with `--kubeconfig`, `--temporal-address`, `--kube-qps`, `--kube-burst`, `--metrics-address ''` and `--log-format text`, plus `watch --search-attributes` for the watcher; everything else at its defaults; they log at info level."
	}
	return "Our worker, running the watcher too as deploy/ does (`--watch --search-attributes`; no `starter watch` process, so the watcher column of the CPU table is empty): started with `--kubeconfig`, `--temporal-address`, `--kube-qps`, `--kube-burst`, `--metrics-address ''` and `--log-format text`; everything else at its defaults; it logs at info level. Its one client budget covers the watcher's writes too."
}

func (r *Report) budgetList() string {
	var out []string
	for _, b := range r.budgets() {
		out = append(out, b.String())
	}
	return strings.Join(out, "; ")
}

// Text is the terminal report.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Benchmark: built-in Deployment controller vs Temporal workflows (%s, %d cores, %s)\n", r.Machine.CPUModel, r.Machine.Cores, r.Machine.MemTotal)
	fmt.Fprintf(&b, "Client budgets, each the same for kube-controller-manager and for our worker (and watcher): %s. kwok pod ready delay %s + up to %s jitter.\n\n", r.budgetList(), r.Cfg.PodReadyDelay, r.Cfg.PodReadyJitter)
	for _, t := range r.tables() {
		b.WriteString(t.title + "\n\n" + t.render())
		for _, n := range t.notes {
			b.WriteString("  * " + n + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Markdown is BENCHMARKS.md.
func (r *Report) Markdown(png string) string {
	var b strings.Builder
	b.WriteString("# Benchmarks: built-in Deployment controller vs Temporal workflows\n\n")
	b.WriteString("<!-- Generated by `make bench` (hack/bench). Edit only the Analysis section; a new run rewrites the rest. -->\n\n")
	fmt.Fprintf(&b, "The same workloads on the same local stack, twice: kube-controller-manager with its built-in Deployment controller, and kube-controller-manager with `--controllers=*,-deployment` plus our worker (running the watcher); each at the client budgets %s, the same for both controllers. Run on %s, %s to %s.\n\n",
		r.budgetList(), r.Started.UTC().Format("2006-01-02"), r.Started.UTC().Format("15:04"), r.Finished.UTC().Format("15:04 MST"))
	b.WriteString("## Results\n\n")
	for _, t := range r.tables() {
		b.WriteString("### " + t.title + "\n\n" + t.render() + "\n")
		for _, n := range t.notes {
			b.WriteString("- " + n + "\n")
		}
		b.WriteString("\n")
	}
	if png != "" {
		fmt.Fprintf(&b, "### Rollout progress, %s\n\n", r.Cfg.PlotWorkload)
		fmt.Fprintf(&b, "![rollout progress](%s)\n\n", png)
		b.WriteString("Σ status.updatedReplicas over the rolled Deployments (a Deployment counts once its status has observed the new generation), sampled every 500ms from an informer, against seconds since the update was issued; one panel per client budget.\n\n")
	}
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores\n- Memory: %s (MemTotal)\n- Kernel: %s (%s)\n- Go: %s\n\n", r.Machine.CPUModel, r.Machine.Cores, r.Machine.MemTotal, r.Machine.Kernel, r.Machine.OS, r.Machine.GoVersion)
	b.WriteString("## Stack\n\n| component | version |\n|---|---|\n")
	fmt.Fprintf(&b, "| etcd | %s |\n| kube-apiserver, kube-controller-manager, kube-scheduler | %s |\n| kwok | %s |\n| Temporal CLI dev server (our side only) | %s |\n\n", stack.EtcdVersion, stack.KubeVersion, stack.KwokVersion, stack.TemporalVersion)
	b.WriteString("## Settings\n\n")
	for _, s := range r.settings() {
		b.WriteString("- " + s + "\n")
	}
	b.WriteString("\n## How to reproduce\n\n```sh\nmake bench                                  # every workload, both controllers, both budgets (about an hour on 2 cores)\nmake bench BENCH_FLAGS=--quick              # smoke test: 1 Deployment x 2 replicas at QPS 200 / burst 300\nmake bench BENCH_FLAGS='--workloads rolling-20x10,recreate-20x10 --budgets 200/300'\nmake bench BENCH_FLAGS='--workloads rolling-20x10 --qps 50 --burst 100'   # a single other budget\ngo test -tags e2e -count=1 -v -timeout 20m ./hack/bench/   # the quick run as a test\n```\n\n")
	b.WriteString("Flags (`go run ./hack/bench --help`): `--workloads` (comma-separated `rolling-<N>x<R>`, `recreate-<N>x<R>`, `scale-<N>`; default `" + defaultWorkloads + "`), `--sides` (`built-in,temporal`), `--budgets` (comma-separated `<qps>/<burst>`; default `" + defaultBudgets + "`), `--qps` and `--burst` (one budget, instead of `--budgets`), `--harness-qps`, `--harness-burst`, `--pod-ready-delay`, `--pod-ready-jitter`, `--nodes`, `--idle`, `--rolled`, `--workers` (our side: workers sharing the task queue), `--separate-watcher` (our side: the watcher as `starter watch` instead of inside each worker), `--temporal` (`dev` or `cluster`: our side on the Temporal server on PostgreSQL), `--profile` (heap profiles of our processes after the idle period, CPU profiles of the update phase for `--cpu-profile`, 30s by default), `--settle`, `--timeout` (per phase), `--bin`, `--tools`, `--out`, `--markdown`, `--docs-png`, `--plot`, `--keep` (keep each stack's folder), `--quick`, `--render bench-out/results.json` (write the tables, plot and this file again without running). A failed workload's controller logs are saved in `bench-out/logs/`.\n\n")
	b.WriteString("Raw numbers (per-verb writes, progress samples, per-Deployment Temporal counts, every stale interval and each Deployment's stale time), each result with its budget, are in `bench-out/results.json`.\n\n")
	b.WriteString("## Analysis\n\n(written by hand after the run)\n")
	return b.String()
}

// Write saves results.json, results.md and the plot into OutDir, and BENCHMARKS.md and the
// docs copy of the plot when configured.
func (r *Report) Write() error {
	c := r.Cfg
	r.Settings = r.settings()
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.OutDir, "results.json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.OutDir, "results.md"), []byte(r.Text()), 0o644); err != nil {
		return err
	}
	png := ""
	plotted, err := r.plot(filepath.Join(c.OutDir, "progress.png"))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if plotted && c.DocsPNG != "" {
		b, err := os.ReadFile(filepath.Join(c.OutDir, "progress.png"))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(c.DocsPNG), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.DocsPNG, b, 0o644); err != nil {
			return err
		}
		png = c.DocsPNG
		if c.Markdown != "" {
			if rel, err := filepath.Rel(filepath.Dir(c.Markdown), c.DocsPNG); err == nil {
				png = filepath.ToSlash(rel)
			}
		}
	}
	if c.Markdown != "" {
		md := r.Markdown(png)
		// Keep the hand-written analysis of the previous run, if any.
		if old, err := os.ReadFile(c.Markdown); err == nil {
			md = keepAnalysis(md, string(old))
		}
		if err := os.WriteFile(c.Markdown, []byte(md), 0o644); err != nil {
			return err
		}
	}
	return nil
}

const analysisHeading = "## Analysis\n"

// keepAnalysis replaces the new report's Analysis placeholder with the old report's Analysis
// section when that one was written by hand.
func keepAnalysis(md, old string) string {
	i := strings.Index(old, analysisHeading)
	j := strings.Index(md, analysisHeading)
	if i < 0 || j < 0 {
		return md
	}
	prev := old[i:]
	if strings.Contains(prev, "(written by hand after the run)") {
		return md
	}
	return md[:j] + prev
}

var sideColors = map[Side]color.Color{
	SideBuiltin: color.RGBA{R: 31, G: 119, B: 180, A: 255},
	SideOurs:    color.RGBA{R: 255, G: 127, B: 14, A: 255},
}

// plot draws rollout progress of the plot workload: one panel per client budget (stacked),
// one line per side. It reports whether there was anything to draw.
func (r *Report) plot(path string) (bool, error) {
	var panels [][]*plot.Plot
	for _, b := range r.budgets() {
		p, ok, err := r.progressPanel(b)
		if err != nil {
			return false, err
		}
		if ok {
			panels = append(panels, []*plot.Plot{p})
		}
	}
	if len(panels) == 0 {
		return false, nil
	}
	const panelHeight = 4.5 * vg.Inch
	img := vgimg.New(9*vg.Inch, vg.Length(len(panels))*panelHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6), PadY: vg.Points(18)}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return false, err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

// progressPanel is the plot workload's rollout progress at one budget.
func (r *Report) progressPanel(b Budget) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Rollout progress, %s, %s", r.Cfg.PlotWorkload, b)
	p.X.Label.Text = "seconds since the update"
	p.Y.Label.Text = "Σ status.updatedReplicas (new template)"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(10)
	p.Add(plotter.NewGrid())
	target, drawn := 0, false
	for _, res := range r.Results {
		if res.Workload != r.Cfg.PlotWorkload || res.Budget != b || len(res.Progress) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(res.Progress))
		for i, pt := range res.Progress {
			pts[i].X, pts[i].Y = pt.T, float64(pt.Updated)
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, false, err
		}
		line.Color = sideColors[res.Side]
		line.Width = vg.Points(2)
		line.StepStyle = plotter.PostStep
		p.Add(line)
		label := fmt.Sprintf("%s (complete at %.1fs)", res.Side, res.UpdateSeconds)
		if !res.updated() || res.UpdateSeconds == 0 {
			label = fmt.Sprintf("%s (not complete)", res.Side)
		}
		if res.Side == SideBuiltin {
			label = "built-in controller" + label[len(SideBuiltin):]
		} else {
			label = "Temporal workflows" + label[len(SideOurs):]
		}
		p.Legend.Add(label, line)
		target = max(target, res.Target)
		drawn = true
	}
	if !drawn {
		return nil, false, nil
	}
	p.Y.Min = 0
	p.Y.Max = float64(target) * 1.05
	if ln, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(target)}, {X: p.X.Max, Y: float64(target)}}); err == nil {
		ln.Color = color.Gray{Y: 120}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(ln)
		p.Legend.Add(fmt.Sprintf("target (%d)", target), ln)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	return p, true, nil
}

// perRolled is a server count per rolled Deployment, or "—" where the server counted none (no
// metrics).
func perRolled(n *int, rollouts int) string {
	if n == nil || rollouts == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(*n)/float64(rollouts))
}
