package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/internal/version"
	"github.com/temporal-rollout/rollout/internal/zoneinfo"
)

// Exit codes: 0 done, 1 the command failed, 2 the command line or the configuration is wrong
// (nothing was attempted).
const (
	exitFailed = 1
	exitUsage  = 2
)

// usageError is a command line that cannot run: an unknown command or flag, a missing or extra
// argument, a bad flag value. It exits 2, printing the command's usage after the error.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// configError is a configuration that does not load or validate: exit 2, without the usage.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// exitCode is a failure already reported on stderr (lifecycle.Main reports its own): only its
// code is left to return.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// execute runs the command line args (without the program name) and returns the exit code.
// Every error is printed once, on stderr, as "starter: ...".
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var code exitCode
	var usage usageError
	var cfgErr configError
	switch {
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "starter: %v\n\n%s", usage.err, cmd.UsageString())
		return exitUsage
	case errors.As(err, &cfgErr):
		fmt.Fprintln(stderr, "starter:", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "starter:", err)
	return exitFailed
}

// newRootCmd builds the command tree. Each command registers only the flags it uses: the
// connection to Temporal (config.CommonFlags and config.TemporalFlags) for the commands on one
// Deployment, every watcher setting for watch (config.WatcherFlags), none of the worker's.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "Drive temporal-rollout's Deployment workflows",
		Long: `starter is the command line of temporal-rollout, the Kubernetes Deployment controller that runs
each Deployment's rollout as a Temporal workflow.

'starter watch' runs the watcher, which turns Kubernetes changes into signals to the workflows
(the worker runs the workflows). The other commands act on one Deployment's workflow, named
NAMESPACE/NAME: start a sync, pause, resume, roll back, promote or abort a stepped rollout, and
show its status.

Every setting is a flag, a ROLLOUT_* environment variable (--temporal-address is
ROLLOUT_TEMPORAL_ADDRESS) or a key of the --config file, in that order of precedence.`,
		Example: `  starter status shop/web
  starter status shop/web -w
  starter promote shop/web
  starter rollback --to-revision 3 shop/web
  starter watch --kubeconfig ~/.kube/config --temporal-address temporal:7233`,
		Version: versionString(),
		// Bare `starter` prints the help; a word that is no command is an error.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError{errors.New(msg)}
		},
		RunE:              func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceErrors:     true,
		SilenceUsage:      true,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	root.SuggestionsMinimumDistance = 2
	root.SetVersionTemplate("starter {{.Version}}\n")
	// cobra keeps template functions in one process-wide map: registering the same two again
	// (one tree per test) changes nothing.
	cobra.AddTemplateFuncs(template.FuncMap{"commandFlags": commandFlags, "settingFlags": settingFlags})
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddGroup(
		&cobra.Group{ID: "rollout", Title: "Commands on one Deployment (NAMESPACE/NAME):"},
		&cobra.Group{ID: "run", Title: "Long-running processes:"},
		&cobra.Group{ID: "release", Title: "Releases and the fleet freeze (docs/releases.md):"},
	)
	root.AddCommand(
		newWatchCmd(), newCodecServerCmd(),
		newSyncCmd(), newSignalCmd("pause", contract.SignalPause), newSignalCmd("resume", contract.SignalResume),
		newRollbackCmd(), newPromoteCmd(), newAbortCmd(), newStatusCmd(),
		newCostCmd(), newProbeCmd(), newVersionCmd(),
		newReleaseCmd(), newFreezeCmd(), newThawCmd(),
	)
	return root
}

// settingAnnotation marks the flags of config's groups, which the usage lists apart from the
// command's own as "Settings".
const settingAnnotation = "rollout.setting"

// usageTemplate is cobra's, with a command's own flags under "Flags:" and the settings of
// package config (which also come from the environment and the config file) under "Settings".
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{with commandFlags .}}

Flags:
{{. | trimTrailingWhitespaces}}{{end}}{{with settingFlags .}}

Settings (also ROLLOUT_* environment variables and --config file keys):
{{. | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// commandFlags is the usage of c's own flags; settingFlags that of its settings.
func commandFlags(c *cobra.Command) string { return flagUsages(c, false) }
func settingFlags(c *cobra.Command) string { return flagUsages(c, true) }

func flagUsages(c *cobra.Command, settings bool) string {
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[settingAnnotation]; ok == settings && !f.Hidden {
			fs.AddFlag(f)
		}
	})
	return fs.FlagUsagesWrapped(usageWidth)
}

// usageWidth is the width the flags' descriptions wrap at.
const usageWidth = 100

// configFlags registers the settings of groups on cmd, in a flag set of their own that
// config.Load reads (the command's own flags, such as --output, stay out of it).
func configFlags(cmd *cobra.Command, groups ...func(*pflag.FlagSet)) *pflag.FlagSet {
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	for _, g := range groups {
		g(fs)
	}
	fs.VisitAll(func(f *pflag.Flag) { _ = fs.SetAnnotation(f.Name, settingAnnotation, []string{"true"}) })
	cmd.Flags().AddFlagSet(fs)
	completeFlags(cmd)
	return fs
}

// temporalFlags are the settings of a command that talks to Temporal.
func temporalFlags(cmd *cobra.Command) *pflag.FlagSet {
	return configFlags(cmd, config.CommonFlags, config.TemporalFlags)
}

// startFlags are the settings of a command that may start the workflow (signal-with-start).
func startFlags(cmd *cobra.Command) *pflag.FlagSet {
	return configFlags(cmd, config.CommonFlags, config.TemporalFlags, config.StartFlags)
}

// completeFlags tells shell completion what the values of cmd's flags are.
func completeFlags(cmd *cobra.Command) {
	fixed := map[string][]string{
		"log-level":            {"debug", "info", "warn", "error"},
		"log-format":           {"json", "text"},
		"temporal-compression": {config.CompressionNone, config.CompressionGzip},
		"mode":                 {config.ModeFull, config.ModeManaged},
		"output":               outputFormats,
	}
	files := map[string][]string{
		"config":            {"yaml", "yml", "json", "toml"},
		"kubeconfig":        nil,
		"codec-key-file":    nil,
		"temporal-tls-cert": nil,
		"temporal-tls-key":  nil,
		"temporal-tls-ca":   nil,
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if values, ok := fixed[f.Name]; ok {
			_ = cmd.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
		if exts, ok := files[f.Name]; ok {
			_ = cmd.MarkFlagFilename(f.Name, exts...)
		}
	})
}

// loadConfig loads the settings registered on fs; a bad one exits 2.
func loadConfig(fs *pflag.FlagSet) (config.Config, error) {
	cfg, err := config.Load(fs)
	if err != nil {
		return cfg, configError{err}
	}
	return cfg, nil
}

// oneTarget accepts exactly one NAMESPACE/NAME argument.
func oneTarget(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf("%s needs exactly one NAMESPACE/NAME argument, got %d", cmd.Name(), len(args))
	}
	if _, err := parseTarget(args[0]); err != nil {
		return usageError{err}
	}
	return nil
}

// noArgs accepts no argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usageErrorf("%s takes no arguments, got %q", cmd.Name(), args)
	}
	return nil
}

// targetCommand is a command on one Deployment (NAMESPACE/NAME), of the rollout group.
type targetCommand struct {
	// settings adds the settings it reads: startFlags (it may start the workflow) or
	// temporalFlags.
	settings func(*cobra.Command) *pflag.FlagSet
	// check validates the command's own flags, before any setting is read or anything dialled
	// (nil: none).
	check func() error
	// run does the work, once the settings are loaded, the target parsed and Temporal dialled.
	run func(ctx context.Context, tc client.Client, cfg config.Config, in contract.Input) error
}

// build finishes cmd, which holds its texts (Use without the target) and its own flags.
func (t targetCommand) build(cmd *cobra.Command) *cobra.Command {
	cmd.Use += targetUse
	cmd.Args, cmd.ValidArgsFunction, cmd.GroupID = oneTarget, cobra.NoFileCompletions, "rollout"
	fs := t.settings(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if t.check != nil {
			if err := t.check(); err != nil {
				return err
			}
		}
		return onTarget(cmd, fs, args, t.run)
	}
	return cmd
}

// onTarget loads the settings of fs, parses the target and dials Temporal, then runs fn.
func onTarget(cmd *cobra.Command, fs *pflag.FlagSet, args []string, fn func(ctx context.Context, tc client.Client, cfg config.Config, in contract.Input) error) error {
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	in, err := parseTarget(args[0])
	if err != nil {
		return usageError{err}
	}
	in.Cluster = cfg.Cluster
	tc, err := dial(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer tc.Close()
	return fn(cmd.Context(), tc, cfg, in)
}

const targetUse = " NAMESPACE/NAME"

// signalCommand signals the Deployment's workflow (payload may be nil), starting it first if
// none is open.
func signalCommand(signal string, payload any) targetCommand {
	return targetCommand{settings: startFlags, run: func(ctx context.Context, tc client.Client, cfg config.Config, in contract.Input) error {
		return signalWithStart(ctx, tc, cfg, in, signal, payload)
	}}
}

// updateCommand runs a Workflow Update on the Deployment's workflow and prints the status.
func updateCommand(cmd *cobra.Command, name string, payload any) targetCommand {
	return targetCommand{settings: temporalFlags, run: func(ctx context.Context, tc client.Client, _ config.Config, in contract.Input) error {
		return update(ctx, tc, cmd.OutOrStdout(), in.WorkflowID(), name, payload)
	}}
}

func newSyncCmd() *cobra.Command {
	return signalCommand(contract.SignalTrigger, nil).build(&cobra.Command{
		Use:   "sync",
		Short: "Sync the Deployment now (signal-with-start)",
		Long: `Send the Deployment's workflow the trigger signal (a sync), starting the workflow first if none
is open.
The watcher does this on every change; sync is for a Deployment it has not seen yet, or to
make the workflow look again at once.`,
		Example: `  starter sync shop/web`,
	})
}

// newSignalCmd is pause or resume: a signal without payload.
func newSignalCmd(name, signal string) *cobra.Command {
	cmd := &cobra.Command{Use: name}
	switch name {
	case "pause":
		cmd.Short = "Pause the rollout (sets spec.paused)"
		cmd.Long = `Pause the Deployment's rollout: the workflow sets spec.paused, as 'kubectl rollout pause'
does, and makes no move until resumed. Starts the workflow if none is open.`
		cmd.Example = `  starter pause shop/web`
	case "resume":
		cmd.Short = "Resume a paused rollout (clears spec.paused)"
		cmd.Long = `Resume the Deployment's rollout: the workflow clears spec.paused, as 'kubectl rollout resume'
does, and goes on where it stopped. A stepped rollout waiting at a pause step needs promote,
not resume.`
		cmd.Example = `  starter resume shop/web`
	}
	return signalCommand(signal, nil).build(cmd)
}

func newRollbackCmd() *cobra.Command {
	var toRevision int64
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Roll back to a revision (0: the previous one)",
		Long: `Roll the Deployment back to the template of an earlier revision, as 'kubectl rollout undo'
does: --to-revision N picks revision N, 0 (the default) the one before the current.`,
		Example: `  starter rollback shop/web
  starter rollback --to-revision 3 shop/web`,
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "the revision to roll back to; 0 means the previous one")
	t := signalCommand(contract.SignalRollback, contract.RollbackRequest{Revision: &toRevision})
	t.check = func() error {
		if toRevision < 0 {
			return usageErrorf("--to-revision must be >= 0, got %d", toRevision)
		}
		return nil
	}
	return t.build(cmd)
}

func newPromoteCmd() *cobra.Command {
	var req contract.PromoteRequest
	cmd := &cobra.Command{
		Use:   "promote",
		Short: "Promote a stepped rollout past its current step (--full: past every step)",
		Long: `Promote a stepped rollout (the temporal-rollout.io/steps annotation): past the pause, timer or
analysis it waits at, to the next step; with --full past every remaining step, straight to
100%. A Workflow Update: it waits for the sync that follows and prints the status then, as
JSON. Rejected, exit 1, when no stepped rollout is in progress.`,
		Example: `  starter promote shop/web
  starter promote --full shop/web`,
	}
	cmd.Flags().BoolVar(&req.Full, "full", false, "skip every remaining step")
	return updateCommand(cmd, contract.UpdatePromote, &req).build(cmd)
}

func newAbortCmd() *cobra.Command {
	var req contract.AbortRequest
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Abort the rollout: back to the last revision that completed",
		Long: `Abort the rollout in progress: the Deployment returns at full speed, skipping every step, to
the last revision that completed. The reason is recorded in an event, the status and the
memo. A Workflow Update: it prints the status after the sync that follows, as JSON. Rejected,
exit 1, when nothing is rolling out.`,
		Example: `  starter abort shop/web
  starter abort --reason "error rate up" shop/web`,
	}
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why (recorded in the event, the status and the memo)")
	return updateCommand(cmd, contract.UpdateAbort, &req).build(cmd)
}

func newStatusCmd() *cobra.Command {
	var opts statusOpts
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the rollout: phase, step, ReplicaSets, conditions",
		Long: `Show the Deployment's rollout from its workflow's status query: phase, paused, revision
(current → target), the step of a stepped rollout and what it waits for, each ReplicaSet with
its counts, the conditions, and why it stopped (abort reason, annotation error, last error).

-o json prints the query's answer as JSON (package contract, type
Status), for scripts; -o yaml the same as YAML. -w re-queries every --interval and prints the
status again each time it changes, until Ctrl-C or the rollout is Complete (an aborted rollout
is Complete once it is back on the stable revision; the abort reason stays in the status).`,
		Example: `  starter status shop/web
  starter status shop/web -w
  starter status shop/web -o json | jq .phase`,
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputText, "output format: "+strings.Join(outputFormats, ", "))
	cmd.Flags().BoolVarP(&opts.watch, "watch", "w", false, "query again every --interval and print each change, until Ctrl-C or the rollout is Complete")
	cmd.Flags().DurationVar(&opts.interval, "interval", time.Second, "with --watch: how often to query")
	return targetCommand{
		settings: temporalFlags,
		check: func() error {
			if err := opts.validate(); err != nil {
				return usageError{err}
			}
			return nil
		},
		run: func(ctx context.Context, tc client.Client, _ config.Config, in contract.Input) error {
			id := in.WorkflowID()
			query := func(ctx context.Context) (contract.Status, error) { return queryStatus(ctx, tc, id) }
			if !opts.watch {
				st, err := query(ctx)
				if err != nil {
					return err
				}
				return writeStatus(cmd.OutOrStdout(), st, opts.output)
			}
			return watchStatus(ctx, query, cmd.OutOrStdout(), opts.output, opts.interval)
		},
	}.build(cmd)
}

func newWatchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Run the watcher: Kubernetes changes become signals to the workflows",
		Long: `Run the watcher until SIGTERM or Ctrl-C: it watches Deployments, ReplicaSets and Pods through
an informer cache, signals (or starts) each Deployment's workflow when something it depends on
changes, and every --resync reconciles the open workflows with the cluster. It serves
/metrics, /healthz and /readyz on --metrics-address (default ` + config.WatcherMetricsAddress + `).

The worker can run the watcher itself (worker --watch); then this command is not needed.
--mode and --managed-guard must agree with the worker's.`,
		Example: `  starter watch --kubeconfig ~/.kube/config --temporal-address localhost:7233
  starter watch --mode managed --search-attributes
  ROLLOUT_TEMPORAL_ADDRESS=temporal:7233 starter watch --log-format text`,
		Args: noArgs, ValidArgsFunction: cobra.NoFileCompletions, GroupID: "run",
	}
	fs := configFlags(cmd, config.WatcherFlags)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(fs)
		if err != nil {
			return err
		}
		code := lifecycle.Main(cmd.Context(), "starter", cfg.ShutdownTimeout, cmd.ErrOrStderr(), func(ctx context.Context, s *lifecycle.Stopper) error {
			return watch(ctx, cfg, s)
		})
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	return cmd
}

func newCodecServerCmd() *cobra.Command {
	var opts codecServerOpts
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve the payload codec to the Temporal UI and temporal --codec-endpoint",
		Long: `Serve Temporal's remote codec protocol over the keys of --codec-key-file, so that the Temporal
UI and 'temporal --codec-endpoint' show the encrypted payloads in clear (docs/codec.md). The
server decrypts for anyone who reaches it: keep it on loopback or behind authentication.`,
		Example: `  starter codec-server --codec-key-file keys --listen 127.0.0.1:8081 --codec-cors-origin http://localhost:8233
  temporal workflow show --workflow-id deployment/shop/web --codec-endpoint http://127.0.0.1:8081`,
		Args: noArgs, ValidArgsFunction: cobra.NoFileCompletions, GroupID: "run",
	}
	cmd.Flags().StringVar(&opts.listen, "listen", "127.0.0.1:8081", "listen address (the server decrypts for anyone who reaches it: keep it on loopback or put it behind authentication)")
	cmd.Flags().StringVar(&opts.corsOrigin, "codec-cors-origin", "", "the Temporal UI's origin allowed to call it from the browser, e.g. http://localhost:8233; empty sends no CORS headers (enough for the temporal CLI)")
	fs := configFlags(cmd, config.CommonFlags, config.ShutdownFlags)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(fs)
		if err != nil {
			return err
		}
		return codecServer(cmd.Context(), cfg, opts)
	}
	return cmd
}

func newProbeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "probe URL",
		Short: "Exit 0 if GET URL answers 200 (container health checks)",
		Long: `GET URL and exit 0 if it answers 200 within 3 seconds, 1 otherwise: a health check for images
without a shell or curl.`,
		Example: `  starter probe http://127.0.0.1:9091/readyz`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("probe needs exactly one URL argument, got %d", len(args))
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              func(_ *cobra.Command, args []string) error { return probe(args[0]) },
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "version",
		Short:             "Print the version",
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "starter", versionString())
			return err
		},
	}
}

// versionString is the version and the tzdata release of the zone database compiled in
// (internal/zoneinfo), which decides the release's freeze windows: "0.1.0 (tzdata 2025c)".
func versionString() string {
	return version.String() + " (tzdata " + zoneinfo.Version + ")"
}
