package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"golang.org/x/crypto/ssh"

	"github.com/temporal-rollout/rollout/internal/config"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
	"github.com/temporal-rollout/rollout/release"
)

// The release commands (docs/releases.md): `starter release apply|status|approve|pause|resume|
// abort|skip-bake`, and the fleet freeze, `starter freeze` and `starter thaw`.

// defaultIdentity is user@host, the identity approvals and freezes are recorded under.
func defaultIdentity() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// identityFlag registers --identity: who is acting, recorded in the Temporal history (the
// client's identity) and in the payload.
func identityFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "identity", defaultIdentity(), "who is acting: the Temporal client's identity (in the history) and the approver or freezer recorded")
}

// dialAs connects to Temporal under identity (empty: the SDK's default).
func dialAs(ctx context.Context, cfg config.Config, identity string) (client.Client, error) {
	logger := cfg.Logger()
	copts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	copts.Logger = sdklog.NewStructuredLogger(logger)
	if identity != "" {
		copts.Identity = identity
	}
	return lifecycle.DialTemporal(ctx, logger, copts, cfg.StartupTimeout)
}

// oneRelease accepts exactly one release NAME.
func oneRelease(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
		return usageErrorf("%s needs exactly one release NAME argument, got %d", cmd.CommandPath(), len(args))
	}
	return nil
}

// onRelease runs fn with a Temporal client (as identity) and the release's workflow ID.
func onRelease(cmd *cobra.Command, fs *pflag.FlagSet, identity string, fn func(ctx context.Context, tc client.Client, id string) error) error {
	return withClientAs(cmd, fs, identity, func(ctx context.Context, tc client.Client) error {
		return fn(ctx, tc, release.WorkflowID(cmd.Flags().Arg(0)))
	})
}

// withClientAs runs fn with the settings of fs and a Temporal client dialled as identity.
func withClientAs(cmd *cobra.Command, fs *pflag.FlagSet, identity string, fn func(ctx context.Context, tc client.Client) error) error {
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	tc, err := dialAs(cmd.Context(), cfg, identity)
	if err != nil {
		return err
	}
	defer tc.Close()
	return fn(cmd.Context(), tc)
}

func newReleaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Start and drive releases: one change to many Deployments, in waves",
		Long: `A release carries one change (images, or a strategic-merge patch of the pod template) to many
Deployments, possibly in several clusters, in ordered waves, each with a concurrency, a bake
time, an optional analysis and an optional approval; a failure rolls back what it changed.
It runs as the workflow release/<name> on the "releases" task queue (a worker started with
--releases). See docs/releases.md.`,
		Args: noArgs, ValidArgsFunction: cobra.NoFileCompletions, GroupID: "release",
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newReleaseApplyCmd(), newReleaseStatusCmd(), newReleaseApproveCmd(),
		newReleaseUpdateCmd("pause", release.UpdatePause), newReleaseUpdateCmd("resume", release.UpdateResume),
		newReleaseUpdateCmd("abort", release.UpdateAbort), newReleaseUpdateCmd("skip-bake", release.UpdateSkipBake))
	return cmd
}

// readRelease reads and validates a release file ("-" is stdin); the error names every
// problem, one a line.
func readRelease(path string, stdin io.Reader) (release.Spec, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return release.Spec{}, fmt.Errorf("read release file: %w", err)
	}
	spec, err := release.Parse(b)
	if err != nil {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	if err := spec.Validate(); err != nil {
		lines := strings.Split(err.Error(), "\n")
		return spec, fmt.Errorf("%s: invalid release, %d problems:\n  - %s", path, len(lines), strings.Join(lines, "\n  - "))
	}
	return spec, nil
}

func newReleaseApplyCmd() *cobra.Command {
	var file, identity, signKey string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Validate a release file and start its release",
		Long: `Read a release file (YAML or JSON; - is stdin), validate it, print every problem and exit 2 if
there is one (nothing is started), or start the workflow release/<name> on the "releases" task
queue. --dry-run stops after the validation. A release of that name already running is an
error. --identity (default user@host) is the release's author, recorded in its input and as the
client's identity in the start event: the author cannot approve the release.

Where the worker's policy has authors (--release-policy), a release starts only signed:
--sign-key KEY (an OpenSSH private key file, not passphrase-protected) signs the release's
canonical spec with its author (release.ReleaseMessage, namespace temporal-rollout-release),
and the policy's list must give that key to --identity. Where the policy says unsigned, the
author is --identity as given, and the status says "unsigned".`,
		Example: `  starter release apply -f release.yaml
  starter release apply --dry-run -f release.yaml`,
		Args: noArgs, ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the release file (YAML or JSON); - reads stdin")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate only")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "sign the release's start with this OpenSSH private key file (the worker's policy has authors)")
	_ = cmd.MarkFlagFilename("sign-key")
	identityFlag(cmd, &identity)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return usageErrorf("release apply needs -f FILE")
		}
		spec, err := readRelease(file, cmd.InOrStdin())
		if err != nil {
			return configError{err}
		}
		if dryRun {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "release %s is valid: %d target groups, %d waves\n", spec.Name, len(spec.Targets), len(spec.Waves))
			return err
		}
		cfg, err := loadConfig(fs)
		if err != nil {
			return err
		}
		if strings.TrimSpace(identity) == "" {
			return usageErrorf("--identity is empty")
		}
		// The author: it cannot approve the release (docs/releases.md#approvals).
		spec.Author = identity
		if signKey != "" {
			signer, err := readSignKey(signKey)
			if err != nil {
				return err
			}
			if spec.AuthorSignature, err = release.SignRelease(signer, release.ReleaseMessage(spec)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "signed release %s (spec %s) as %s with key %s\n", spec.Name, release.SpecDigest(spec), release.NormalizeApprover(identity), ssh.FingerprintSHA256(signer.PublicKey()))
		}
		tc, err := dialAs(cmd.Context(), cfg, identity)
		if err != nil {
			return err
		}
		defer tc.Close()
		id := release.WorkflowID(spec.Name)
		summary, details := release.StartSummary(spec)
		run, err := tc.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
			ID: id, TaskQueue: release.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			StaticSummary:            summary, StaticDetails: details,
		}, release.WorkflowType, spec)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("start %s: a release of that name is running; abort it or pick another name", id)
		}
		if err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "started %s (run %s)\n", id, run.GetRunID())
		return err
	}
	return cmd
}

func newReleaseStatusCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a release: phase, waves, approvals, every target's state",
		Long: `Show the release from its workflow's status query: the phase, the wave under way and what it
waits for (approval, a freeze, resume, rollouts, analysis, bake), each wave with its approvals,
and each target with its state. -o json prints the query's answer (release/contract.go, type
Status).`,
		Example: `  starter release status web-1-27
  starter release status web-1-27 -o json | jq '.targets[] | select(.state != "Done")'`,
		Args: oneRelease, ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputText, "output format: text or json")
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if output != outputText && output != outputJSON {
			return usageErrorf("--output %q: want text or json", output)
		}
		return onRelease(cmd, fs, "", func(ctx context.Context, tc client.Client, id string) error {
			st, err := query[release.Status](ctx, tc, id, release.QueryStatus)
			if err != nil {
				return err
			}
			if output == outputJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			return writeReleaseStatus(cmd.OutOrStdout(), st)
		})
	}
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeReleaseStatus prints the status for people.
func writeReleaseStatus(w io.Writer, st release.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Release:\t%s\n", st.Name)
	fmt.Fprintf(tw, "Phase:\t%s\n", st.Phase)
	fmt.Fprintf(tw, "Wave:\t%d of %d\n", st.Wave, len(st.Waves))
	if st.WaitingFor != "" {
		fmt.Fprintf(tw, "Waiting for:\t%s\n", st.WaitingFor)
	}
	if st.Message != "" {
		fmt.Fprintf(tw, "Message:\t%s\n", st.Message)
	}
	if st.Paused {
		fmt.Fprintf(tw, "Paused:\t%s\n", st.PauseReason)
	}
	if st.FrozenUntil != nil {
		fmt.Fprintf(tw, "Frozen until:\t%s (%s)\n", st.FrozenUntil.UTC().Format(time.RFC3339), st.FreezeReason)
	}
	if st.FailureReason != "" {
		fmt.Fprintf(tw, "Failure:\t%s\n", st.FailureReason)
	}
	if st.Author != "" {
		fmt.Fprintf(tw, "Author:\t%s (%s)\n", st.Author, st.AuthorProof)
	}
	if st.Run != "" {
		fmt.Fprintf(tw, "Run:\t%s\n", st.Run)
	}
	if st.PolicyDigest != "" {
		fmt.Fprintf(tw, "Policy:\t%s (%s)\n", st.PolicyDigest, st.PolicySource)
	}
	fmt.Fprintln(tw, "\nWAVE\tSTATE\tAPPROVALS\tBAKE UNTIL\tANALYSIS")
	for i, wv := range st.Waves {
		approvals := "-"
		if wv.ApprovalsNeeded > 0 {
			var names []string
			for _, a := range wv.Approvals {
				name := a.Approver
				if a.Signed {
					name += " (signed)"
				}
				names = append(names, name)
			}
			approvals = fmt.Sprintf("%d/%d %s", len(wv.Approvals), wv.ApprovalsNeeded, strings.Join(names, ","))
		}
		bake := "-"
		if wv.BakeUntil != nil {
			bake = wv.BakeUntil.UTC().Format(time.RFC3339)
		}
		analysis := wv.Analysis
		if analysis == "" {
			analysis = "-"
		}
		fmt.Fprintf(tw, "%d %s\t%s\t%s\t%s\t%s\n", i+1, wv.Name, wv.State, strings.TrimSpace(approvals), bake, analysis)
	}
	fmt.Fprintln(tw, "\nTARGET\tWAVE\tSTATE\tREVISION BEFORE\tREASON")
	for _, t := range st.Targets {
		name := t.Namespace + "/" + t.Name
		if t.Cluster != "" {
			name = t.Cluster + ":" + name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", name, t.Wave, t.State, t.RevisionBefore, t.Reason)
	}
	return tw.Flush()
}

// releaseUpdate runs an update on the release and prints the status it returns, as JSON. A
// rejected update is an error that says why.
func releaseUpdate(ctx context.Context, tc client.Client, w io.Writer, id, name string, payload any) error {
	st, err := runUpdate[release.Status](ctx, tc, id, name, payload)
	if err != nil {
		return err
	}
	return writeJSON(w, st)
}

func newReleaseApproveCmd() *cobra.Command {
	var wave, identity, signKey, signature string
	var validFor time.Duration
	var printMessage bool
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve the wave waiting for approval, as --identity",
		Long: `Approve the release's wave that waits for approval. The approver is --identity (default
user@host), recorded in the release's status and, as the update's caller, in the workflow's
history. A wave needs its approvers distinct (the worker's policy, or approval.approvers),
compared by name normalized (NFKC, case folded, cut at '@': alice@laptop and Alice@bastion
are one; a name with an invisible character or mixed scripts is refused). --wave (a name or a 1-based number) guards
against approving another wave than the one you mean.

--sign-key KEY (an OpenSSH private key file, not passphrase-protected) signs the approval: the
command reads the release's status (its spec, targets, the policy in force and its run),
recomputes the wave's digest and checks it against the workflow's, prints what it signs on
stderr, and sends an SSH signature (as ssh-keygen -Y sign -n temporal-rollout-approval makes)
of the approval's message (release.ApprovalBinding): the release, the wave, the run, the
approver, a not-after time (now + --valid-for) and the digest of the whole spec, the wave's
targets and the policy. A wave the worker's policy (or the release's approval) has signers for
takes only signed approvals, by a key the policy gives --identity.

With OpenSSH alone: --print-message prints the message (to stdout) and its not-after time (to
stderr) and sends nothing; sign it with ssh-keygen -Y sign -n temporal-rollout-approval -f KEY,
and send the signature with --signature FILE --not-after TIME.

Rejected, exit 1, with the reason, when no wave waits for approval, you approved it already,
you are the release's author, approval.from does not name you, or the signature is missing,
made with a key not listed for you, or made for another release, wave or change.`,
		Example: `  starter release approve web-1-27 --wave canary
  starter release approve web-1-27 --identity alice@example.com
  starter release approve web-1-27 --wave canary --sign-key ~/.ssh/id_ed25519`,
		Args: oneRelease, ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&wave, "wave", "", "the wave to approve (name or 1-based number); it must be the one waiting")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "sign the approval with this OpenSSH private key file")
	_ = cmd.MarkFlagFilename("sign-key")
	cmd.Flags().DurationVar(&validFor, "valid-for", time.Hour, "a signed approval expires this long after it is signed")
	cmd.Flags().BoolVar(&printMessage, "print-message", false, "print the approval's message to sign (ssh-keygen -Y sign) and send nothing")
	cmd.Flags().StringVar(&signature, "signature", "", "send this armored SSH signature file (made with ssh-keygen -Y sign of --print-message's message)")
	var notAfterFlag string
	cmd.Flags().StringVar(&notAfterFlag, "not-after", "", "with --signature: the not-after time (RFC 3339) the message said")
	identityFlag(cmd, &identity)
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if strings.TrimSpace(identity) == "" {
			return usageErrorf("--identity is empty")
		}
		var signer ssh.Signer
		if signKey != "" {
			var err error
			if signer, err = readSignKey(signKey); err != nil {
				return err
			}
		}
		var sigText string
		var notAfter time.Time
		if signature != "" {
			b, err := os.ReadFile(signature)
			if err != nil {
				return usageErrorf("--signature: %v", err)
			}
			if notAfter, err = time.Parse(time.RFC3339, notAfterFlag); err != nil {
				return usageErrorf("--signature needs --not-after, the RFC 3339 time the signed message says: %v", err)
			}
			sigText = string(b)
		}
		return onRelease(cmd, fs, identity, func(ctx context.Context, tc client.Client, id string) error {
			req := release.ApproveRequest{Approver: identity, Wave: wave}
			if signer != nil || printMessage {
				b, err := approvalBinding(ctx, tc, cmd.ErrOrStderr(), id, wave, identity, time.Now().Add(validFor).Truncate(time.Second))
				if err != nil {
					return err
				}
				if printMessage {
					fmt.Fprintf(cmd.ErrOrStderr(), "not-after %s\n", b.NotAfter.UTC().Format(time.RFC3339))
					_, err := cmd.OutOrStdout().Write(b.Message())
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "signing with key %s:\n%s", ssh.FingerprintSHA256(signer.PublicKey()), b.Message())
				if req.Signature, err = release.SignApproval(signer, b.Message()); err != nil {
					return err
				}
				notAfter = b.NotAfter
			} else if sigText != "" {
				req.Signature = sigText
			}
			if req.Signature != "" {
				req.NotAfter = &notAfter
			}
			return releaseUpdate(ctx, tc, cmd.OutOrStdout(), id, release.UpdateApprove, req)
		})
	}
	return cmd
}

// readSignKey reads an OpenSSH private key file (not passphrase-protected).
func readSignKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--sign-key: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, usageErrorf("--sign-key %s: %v (a passphrase-protected key is not supported)", path, err)
	}
	return signer, nil
}

// approvalBinding is what approving the wave the release waits at (or --wave) as identity
// binds to, from the release's status: its run, and the wave's digest, recomputed here from
// the status' spec, targets and policy and checked against the workflow's.
func approvalBinding(ctx context.Context, tc client.Client, w io.Writer, id, wave, identity string, notAfter time.Time) (release.ApprovalBinding, error) {
	st, err := query[release.Status](ctx, tc, id, release.QueryStatus)
	if err != nil {
		return release.ApprovalBinding{}, err
	}
	return bindingFor(st, w, wave, identity, notAfter)
}

// bindingFor is approvalBinding's answer from the status st.
func bindingFor(st release.Status, w io.Writer, wave, identity string, notAfter time.Time) (release.ApprovalBinding, error) {
	name, err := approvalWave(st, wave)
	if err != nil {
		return release.ApprovalBinding{}, err
	}
	if st.Spec == nil || st.Policy == nil || st.Run == "" {
		return release.ApprovalBinding{}, fmt.Errorf("sign the approval of release %s: its status has no spec, policy or run (a run begun before the worker's policy: sign with a starter of that version)", st.Name)
	}
	wi := 0
	for i, wv := range st.Waves {
		if wv.Name == name {
			wi = i
		}
	}
	digest := release.WaveDigest(*st.Spec, wi, st.Targets, *st.Policy)
	if digest != st.Waves[wi].Digest {
		return release.ApprovalBinding{}, fmt.Errorf("sign the approval of release %s, wave %s: its digest is %s here and %q in the workflow; the worker and this starter differ, or the targets are not read yet", st.Name, name, digest, st.Waves[wi].Digest)
	}
	change, _ := json.Marshal(st.Spec.Change)
	var targets []string
	for _, t := range st.Targets {
		if t.Wave == name {
			targets = append(targets, t.Namespace+"/"+t.Name)
			if t.Cluster != "" {
				targets[len(targets)-1] = t.Cluster + ":" + targets[len(targets)-1]
			}
		}
	}
	fmt.Fprintf(w, "approving release %s (run %s), wave %s: change %s, %d Deployments (%s), policy %s (%s)\n", st.Name, st.Run, name, change, len(targets), strings.Join(targets, ", "), st.PolicyDigest, st.PolicySource)
	return release.ApprovalBinding{Release: st.Name, Wave: name, Run: st.Run, Approver: release.NormalizeApprover(identity), NotAfter: notAfter, Digest: digest}, nil
}

// approvalWave is the name of the wave to approve: --wave (a name or 1-based number) or the
// wave the release is at.
func approvalWave(st release.Status, wave string) (string, error) {
	if wave == "" {
		if st.Wave < 1 || st.Wave > len(st.Waves) {
			return "", fmt.Errorf("release %s is at no wave (phase %s)", st.Name, st.Phase)
		}
		return st.Waves[st.Wave-1].Name, nil
	}
	for i, wv := range st.Waves {
		if wv.Name == wave || strconv.Itoa(i+1) == wave {
			return wv.Name, nil
		}
	}
	return "", fmt.Errorf("release %s has no wave %q", st.Name, wave)
}

// newReleaseUpdateCmd is pause, resume, abort or skip-bake.
func newReleaseUpdateCmd(use, name string) *cobra.Command {
	var reason, identity string
	cmd := &cobra.Command{
		Use: use + " NAME", Args: oneRelease, ValidArgsFunction: cobra.NoFileCompletions,
		Example: "  starter release " + use + " web-1-27",
	}
	switch name {
	case release.UpdatePause:
		cmd.Short = "Hold the release before its next Deployment and its next wave"
		cmd.Long = `Pause the release: no Deployment and no wave starts until resume; rollouts under way finish.`
		cmd.Flags().StringVar(&reason, "reason", "", "why (shown in the status)")
	case release.UpdateResume:
		cmd.Short = "End a pause (or an inconclusive analysis' hold)"
		cmd.Long = `Resume a paused release, or one an inconclusive analysis holds.`
	case release.UpdateAbort:
		cmd.Short = "Fail the release: roll back what it changed (unless onFailure: halt)"
		cmd.Long = `Abort the release: it stops waiting for rollouts under way and, unless the release says
onFailure: halt, restores every Deployment it changed to its template from before the release,
the last wave first. --reason is required; it is recorded on the release and on each
Deployment (event, annotation).`
		cmd.Example = `  starter release abort web-1-27 --reason "error rate up in eu"`
		cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	case release.UpdateSkipBake:
		cmd.Short = "End the current wave's bake now"
		cmd.Long = `Skip the rest of the current wave's bake: the next wave's gates (approval, freeze, pause)
apply as usual.`
	}
	identityFlag(cmd, &identity)
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var payload any
		switch name {
		case release.UpdateAbort:
			if strings.TrimSpace(reason) == "" {
				return usageErrorf("release abort needs --reason")
			}
			payload = release.ReasonRequest{Reason: reason}
		case release.UpdatePause:
			payload = release.ReasonRequest{Reason: reason}
		default:
			payload = struct{}{}
		}
		return onRelease(cmd, fs, identity, func(ctx context.Context, tc client.Client, id string) error {
			return releaseUpdate(ctx, tc, cmd.OutOrStdout(), id, name, payload)
		})
	}
	return cmd
}

// parseUntil reads --until: an RFC 3339 time or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--until %q is neither an RFC 3339 time (2026-12-01T08:00:00Z) nor a positive duration (8h)", s)
	}
	return now.Add(d), nil
}

func newFreezeCmd() *cobra.Command {
	var until, reason string
	cmd := &cobra.Command{
		Use:   "freeze --until TIME --reason TEXT",
		Short: "Freeze the fleet: no release starts a wave until the time or a thaw",
		Long: `Set the fleet freeze, held by the workflow freeze/fleet (started if needed): until --until (an
RFC 3339 time or a duration from now) no release starts a wave; releases waiting show it in
their status. A new freeze replaces the current one. 'starter thaw' ends it early.`,
		Example: `  starter freeze --until 2026-12-01T08:00:00Z --reason "black friday"
  starter freeze --until 2h --reason "incident 42"`,
	}
	cmd.Flags().StringVar(&until, "until", "", "end of the freeze: RFC 3339 time or duration from now (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	return fleetCommand(cmd, release.UpdateFreeze, func(identity string) (any, error) {
		if until == "" || strings.TrimSpace(reason) == "" {
			return nil, usageErrorf("freeze needs --until and --reason")
		}
		end, err := parseUntil(until, time.Now())
		if err != nil {
			return nil, usageError{err}
		}
		return release.FreezeRequest{Until: end, Reason: reason, By: identity}, nil
	})
}

func newThawCmd() *cobra.Command {
	return fleetCommand(&cobra.Command{
		Use:   "thaw",
		Short: "End the fleet freeze",
		Long:  `End the fleet freeze now: waiting releases go on. Rejected, exit 1, when nothing is frozen.`,
		Example: `  starter thaw
  temporal workflow query --workflow-id freeze/fleet --type state`,
	}, release.UpdateThaw, func(identity string) (any, error) { return release.ThawRequest{By: identity}, nil })
}

// fleetCommand finishes freeze or thaw, commands of the release group with no argument: cmd
// holds its texts and own flags; request builds update name's payload from them and the
// caller's identity (--identity), or a usage error.
func fleetCommand(cmd *cobra.Command, name string, request func(identity string) (any, error)) *cobra.Command {
	var identity string
	cmd.Args, cmd.ValidArgsFunction, cmd.GroupID = noArgs, cobra.NoFileCompletions, "release"
	identityFlag(cmd, &identity)
	fs := temporalFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		payload, err := request(identity)
		if err != nil {
			return err
		}
		return fleetUpdate(cmd, fs, identity, name, payload)
	}
	return cmd
}

// fleetUpdate runs an update on freeze/fleet, starting it first if it is not running, and
// prints the freeze's state as JSON.
func fleetUpdate(cmd *cobra.Command, fs *pflag.FlagSet, identity, name string, payload any) error {
	return withClientAs(cmd, fs, identity, func(ctx context.Context, tc client.Client) error {
		start := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: release.FleetFreezeID, TaskQueue: release.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, release.FleetFreezeType, release.FleetFreeze{})
		h, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				WorkflowID: release.FleetFreezeID, UpdateName: name, Args: []any{payload}, WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		st, err := updateResult[release.FleetFreeze](ctx, h, err, release.FleetFreezeID, name)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), st)
	})
}
