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

	"github.com/spf13/pflag"

	"github.com/temporal-rollout/rollout/internal/config"
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

func (r *Report) tables() []table {
	main := table{title: "Results",
		header: []string{"workload", "controller", "create→available", "update→complete", "writes, create (deploy + rs)", "writes, update (deploy + rs)", "worst breach (surge / unavailable)"},
		notes: []string{
			"Writes are apiserver_request_total deltas for verbs POST, PUT, PATCH, DELETE, APPLY on deployments and replicasets (subresources such as status included), scraped before the phase and after it completed plus the settle time. They include the harness's own writes on both sides equally: N creates in the create phase, one PATCH per rolled Deployment in the update phase.",
			"Worst breach: the most a Deployment's Σ ReplicaSet spec.replicas went above replicas + maxSurge, and the most its Ready pods went below replicas − maxUnavailable, seen by a watch on ReplicaSets and pods during the update phase (Recreate: surge bound only, maxSurge 0). Must be 0.",
		}}
	for _, res := range r.Results {
		row := []string{res.Workload, string(res.Side)}
		if res.Err != "" && res.UpdateSeconds == 0 {
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
		main.rows = append(main.rows, row)
	}

	procs := table{title: "CPU and memory",
		header: []string{"workload", "controller", "kube-controller-manager", "worker", "watcher", "Temporal dev server", "kube-apiserver"},
		notes:  []string{"Each cell: CPU seconds over the whole run (in parentheses: during the update phase) / peak RSS (VmHWM). CPU is utime+stime from /proc/<pid>/stat; the whole run includes start-up, the warm-up Deployment and the create phase. The built-in side runs no Temporal server."}}
	for _, res := range r.Results {
		row := []string{res.Workload, string(res.Side)}
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

	temporal := table{title: "Temporal (our side), per rolled Deployment",
		header: []string{"workload", "rollouts", "runs", "history events median / max", "workflow tasks median / max", "local activities median / max", "activities", "total events"},
		notes:  []string{"Runs of `deployment/<ns>/<name>` closed after the update started or still running, summed per Deployment. Workflow tasks are WorkflowTaskCompleted events; local activities are LocalActivity markers; activities are ActivityTaskScheduled events."}}
	for _, res := range r.Results {
		t := res.Temporal
		if t == nil {
			continue
		}
		temporal.rows = append(temporal.rows, []string{res.Workload, strconv.Itoa(t.Rollouts), strconv.Itoa(t.Runs),
			fmt.Sprintf("%s / %d", fmtNum(median(t.Events)), maxOf(t.Events)),
			fmt.Sprintf("%s / %d", fmtNum(median(t.WorkflowTasks)), maxOf(t.WorkflowTasks)),
			fmt.Sprintf("%s / %d", fmtNum(median(t.LocalActivities)), maxOf(t.LocalActivities)),
			strconv.Itoa(sumOf(t.Activities)), strconv.Itoa(sumOf(t.Events))})
	}

	idle := table{title: "Memory of the worker and watcher, scale workload",
		header: []string{"workload", "worker RSS after idle", "worker RSS at end", "watcher RSS after idle", "watcher RSS at end"},
		notes:  []string{"VmRSS after the idle period with every Deployment managed, and at the end (after the rollout and the Temporal queries)."}}
	for _, res := range r.Results {
		if res.Kind != KindScale || res.Side != SideOurs {
			continue
		}
		row := []string{res.Workload}
		for _, name := range []string{"worker", "watcher"} {
			p := res.Procs[name]
			if p == nil {
				row = append(row, "—", "—")
				continue
			}
			row = append(row, fmtKB(p.RSSAfterIdleKB), fmtKB(p.RSSEndKB))
		}
		idle.rows = append(idle.rows, row)
	}

	detail := table{title: "Writes during the update phase by resource and verb",
		notes: []string{"apiserver_request_total deltas; the harness's own PATCHes are in `deployments PATCH`."}}
	keys := map[string]bool{}
	detail.header = []string{"resource verb"}
	for _, res := range r.Results {
		if res.Err != "" && res.UpdateSeconds == 0 {
			continue
		}
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
		for _, res := range r.Results {
			if res.Err != "" && res.UpdateSeconds == 0 {
				continue
			}
			row = append(row, strconv.Itoa(res.UpdateWrites.Detail[k]))
		}
		detail.rows = append(detail.rows, row)
	}

	out := []table{main, procs}
	if len(temporal.rows) > 0 {
		out = append(out, temporal)
	}
	if len(idle.rows) > 0 {
		out = append(out, idle)
	}
	if len(detail.rows) > 0 {
		out = append(out, detail)
	}
	return out
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
	return []string{
		fmt.Sprintf("Workloads: %s. rolling-<N>x<R>: N Deployments x R replicas, RollingUpdate maxSurge 25%% / maxUnavailable 25%%, one namespace; recreate-<N>x<R>: the same with Recreate; scale-<N>: N x 1 replica (RollingUpdate 25%%/25%%), idle %s, then %d of them rolled at once.", strings.Join(names, ", "), c.Idle, c.Rolled),
		fmt.Sprintf("Client budget: QPS %s / burst %d for kube-controller-manager (`--kube-api-qps`, `--kube-api-burst`) on both sides and for our worker and watcher (`--kube-qps`, `--kube-burst`). kube-controller-manager builds one client per controller, so the built-in Deployment controller has this budget to itself, as our worker does; the ReplicaSet controller has its own on both sides.", fmtNum(c.QPS), c.Burst),
		fmt.Sprintf("Harness client: QPS %s / burst %d (creates and updates 32 at a time).", fmtNum(c.HarnessQPS), c.HarnessBurst),
		fmt.Sprintf("kwok: %d fake nodes; a scheduled pod becomes Ready after %s plus up to %s of jitter; pods have terminationGracePeriodSeconds 0.", c.Nodes, c.PodReadyDelay, c.PodReadyJitter),
		fmt.Sprintf("Our watcher: `--coalesce %s`, `--search-attributes`, the rest at their defaults (%s); worker and watcher log at info level as text.", c.Coalesce, watcherDefaults()),
		"Update: one JSON patch per Deployment replacing the container image (v1 → v2), all issued at once; complete by `kubectl rollout status` rules (observedGeneration ≥ generation, updatedReplicas = replicas = availableReplicas, no old replicas), seen through a Deployment informer.",
		fmt.Sprintf("Settle: %s after each phase completes before the closing metrics scrape. Every workload on every side runs on a fresh stack (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and for our side the Temporal dev server), stopped afterwards; a one-replica warm-up Deployment in another namespace proves the controller runs before the clock starts.", c.Settle),
	}
}

// watcherDefaults names the watcher's pacing settings with their default values.
func watcherDefaults() string {
	fs := pflag.NewFlagSet("defaults", pflag.ContinueOnError)
	config.Flags(fs)
	var out []string
	for _, name := range []string{"min-signal-interval", "max-signal-interval", "status-signal-interval"} {
		out = append(out, fmt.Sprintf("`--%s %s`", name, fs.Lookup(name).DefValue))
	}
	return strings.Join(out, ", ")
}

// Text is the terminal report.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Benchmark: built-in Deployment controller vs Temporal workflows (%s, %d cores, %s)\n", r.Machine.CPUModel, r.Machine.Cores, r.Machine.MemTotal)
	fmt.Fprintf(&b, "Client budget for both controllers: QPS %s, burst %d. kwok pod ready delay %s + up to %s jitter.\n\n", fmtNum(r.Cfg.QPS), r.Cfg.Burst, r.Cfg.PodReadyDelay, r.Cfg.PodReadyJitter)
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
	fmt.Fprintf(&b, "The same workloads on the same local stack, twice: kube-controller-manager with its built-in Deployment controller, and kube-controller-manager with `--controllers=*,-deployment` plus our worker and watcher. Run on %s, %s to %s.\n\n",
		r.Started.UTC().Format("2006-01-02"), r.Started.UTC().Format("15:04"), r.Finished.UTC().Format("15:04 MST"))
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
		b.WriteString("Σ status.updatedReplicas over the rolled Deployments (a Deployment counts once its status has observed the new generation), sampled every 500ms from an informer, against seconds since the update was issued.\n\n")
	}
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores\n- Memory: %s (MemTotal)\n- Kernel: %s (%s)\n- Go: %s\n\n", r.Machine.CPUModel, r.Machine.Cores, r.Machine.MemTotal, r.Machine.Kernel, r.Machine.OS, r.Machine.GoVersion)
	b.WriteString("## Stack\n\n| component | version |\n|---|---|\n")
	fmt.Fprintf(&b, "| etcd | %s |\n| kube-apiserver, kube-controller-manager, kube-scheduler | %s |\n| kwok | %s |\n| Temporal CLI dev server (our side only) | %s |\n\n", stack.EtcdVersion, stack.KubeVersion, stack.KwokVersion, stack.TemporalVersion)
	b.WriteString("## Settings\n\n")
	for _, s := range r.settings() {
		b.WriteString("- " + s + "\n")
	}
	b.WriteString("\n## How to reproduce\n\n```sh\nmake bench                                  # every workload, both controllers (20-40 minutes on 2 cores)\nmake bench BENCH_FLAGS=--quick              # smoke test: 1 Deployment x 2 replicas\nmake bench BENCH_FLAGS='--workloads rolling-20x10 --qps 50 --burst 100'\ngo test -tags e2e -count=1 -v -timeout 20m ./hack/bench/   # the quick run as a test\n```\n\n")
	b.WriteString("Flags (`go run ./hack/bench --help`): `--workloads` (comma-separated `rolling-<N>x<R>`, `recreate-<N>x<R>`, `scale-<N>`; default `" + defaultWorkloads + "`), `--sides` (`built-in,temporal`), `--qps`, `--burst`, `--harness-qps`, `--harness-burst`, `--pod-ready-delay`, `--pod-ready-jitter`, `--coalesce`, `--nodes`, `--idle`, `--rolled`, `--settle`, `--timeout` (per phase), `--bin`, `--tools`, `--out`, `--markdown`, `--docs-png`, `--plot`, `--keep` (keep each stack's folder), `--quick`, `--render bench-out/results.json` (write the tables, plot and this file again without running). A failed workload's controller logs are saved in `bench-out/logs/`.\n\n")
	b.WriteString("Raw numbers (per-verb writes, progress samples, per-Deployment Temporal counts) are in `bench-out/results.json`.\n\n")
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

// plot draws rollout progress of the plot workload, one line per side. It reports whether
// there was anything to draw.
func (r *Report) plot(path string) (bool, error) {
	p := plot.New()
	p.Title.Text = "Rollout progress, " + r.Cfg.PlotWorkload
	p.X.Label.Text = "seconds since the update"
	p.Y.Label.Text = "Σ status.updatedReplicas (new template)"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(10)
	p.Add(plotter.NewGrid())
	target, drawn := 0, false
	for _, res := range r.Results {
		if res.Workload != r.Cfg.PlotWorkload || len(res.Progress) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(res.Progress))
		for i, pt := range res.Progress {
			pts[i].X, pts[i].Y = pt.T, float64(pt.Updated)
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return false, err
		}
		line.Color = sideColors[res.Side]
		line.Width = vg.Points(2)
		line.StepStyle = plotter.PostStep
		p.Add(line)
		label := fmt.Sprintf("%s (complete at %.1fs)", res.Side, res.UpdateSeconds)
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
		return false, nil
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
	return true, p.Save(9*vg.Inch, 5*vg.Inch, path)
}
