package reconfigure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/fit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// StepMedium is the first step: find the medium and read the site config on it. It runs
// on every start, since its digest decides what is already done.
const StepMedium = "medium"

// Result is what a reconfiguration did.
type Result struct {
	// Medium is the path the site config was read from.
	Medium string
	// Site is the site config's metadata.name, SiteDigest the sha256 of its
	// self-contained form.
	Site, SiteDigest string
	// SignedBy is the fingerprint of the site key that signed the medium; "" on a seed
	// without site keys.
	SignedBy string
	Steps    []StepResult
}

// StepResult is one step, with the details it reported.
type StepResult struct {
	Name string
	// Skipped: done by an earlier run for the same site config.
	Skipped bool
	Details map[string]string
}

// StepError is a failed step (steps.StepError).
type StepError = steps.StepError

// step applies one part of the site config and returns the details to report. Its Step is
// what a dry run prints: the command it runs and what it changes.
type step struct {
	steps.Step
	apply func(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error)
}

// run is one reconfiguration.
type run struct {
	o        Options
	dry      bool     // Plan: nothing is read from or done to a node
	secrets  []string // never reported or printed (the pull secret and its tokens)
	reportOK bool     // false after the reporter first failed: warn once
}

// Run reconfigures the installed system at o.Root for the site config on the medium,
// reporting each step (wire.PhaseReconfigureStep) and the outcome
// (wire.PhaseReconfigured). Steps done before for the same site config are skipped. A
// failure returns a *StepError.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, reportOK: true}
	res, err := r.run(ctx)
	if err != nil {
		d := map[string]string{wire.DetailError: err.Error()}
		if se := (*StepError)(nil); errors.As(err, &se) {
			d["step"] = se.Step
		}
		r.say("reconfiguration failed: %v", err)
		r.report(ctx, wire.PhaseReconfigured, wire.StatusFailed, d)
		return res, err
	}
	skipped := 0
	for _, s := range res.Steps {
		if s.Skipped {
			skipped++
		}
	}
	r.say("reconfigured for site %s (%d steps, %d done before)", res.Site, len(res.Steps), skipped)
	r.report(ctx, wire.PhaseReconfigured, wire.StatusOK, map[string]string{
		"site": res.Site, "siteDigest": res.SiteDigest, "steps": strconv.Itoa(len(res.Steps)), "skipped": strconv.Itoa(skipped)})
	return res, nil
}

func (r *run) run(ctx context.Context) (*Result, error) {
	res := &Result{}
	sc, medium, signedBy, err := r.medium(ctx)
	if err != nil {
		return res, &StepError{Step: StepMedium, Err: err}
	}
	norm, err := sc.Normalized()
	if err != nil {
		return res, &StepError{Step: StepMedium, Err: err}
	}
	sum := sha256.Sum256(norm)
	res.Medium, res.Site, res.SiteDigest, res.SignedBy = medium, sc.Metadata.Name, "sha256:"+hex.EncodeToString(sum[:]), signedBy
	d := map[string]string{"medium": medium, "site": res.Site, "siteDigest": res.SiteDigest}
	if signedBy != "" {
		d["signedBy"] = signedBy
	}
	if b := sc.Spec.Binding; b != nil {
		if b.Seed != "" {
			d["boundToSeed"] = b.Seed
		}
		if b.MachineSerial != "" {
			d["boundToMachine"] = b.MachineSerial
		}
	}
	res.Steps = append(res.Steps, StepResult{Name: StepMedium, Details: d})
	r.stepReport(ctx, StepMedium, wire.StatusOK, d)

	if err := r.checkPullSecret(sc); err != nil {
		r.stepReport(ctx, StepPullSecret, wire.StatusFailed, map[string]string{wire.DetailError: err.Error()})
		return res, &StepError{Step: StepPullSecret, Err: err}
	}
	prog, restarted, err := loadProgress(r.o.StateDir, res.SiteDigest)
	if err != nil {
		return res, &StepError{Step: StepMedium, Err: err}
	}
	if restarted {
		r.say("a different site config than the last run's: starting over")
	}
	plan, err := r.steps(sc)
	if err != nil {
		return res, &StepError{Step: StepMedium, Err: err}
	}
	acts := make([]steps.Action[map[string]string], len(plan))
	for i, s := range plan {
		acts[i] = steps.Action[map[string]string]{Step: s.Step, Do: func(ctx context.Context) (map[string]string, error) { return s.apply(ctx, sc) }}
	}
	err = steps.Execute(ctx, acts, steps.Hooks[map[string]string]{
		Skip: prog.done,
		Skipped: func(name string) {
			d := map[string]string{"skipped": "done before for this site config"}
			r.stepReport(ctx, name, wire.StatusInfo, d)
			res.Steps = append(res.Steps, StepResult{Name: name, Skipped: true, Details: d})
		},
		Start: func(name string) { r.stepReport(ctx, name, wire.StatusStart, nil) },
		Failed: func(name string, err error) {
			r.stepReport(ctx, name, wire.StatusFailed, map[string]string{wire.DetailError: err.Error()})
		},
		Done: func(name string, d map[string]string) error {
			prog.Done = append(prog.Done, name)
			if err := prog.save(r.o.StateDir); err != nil {
				return err
			}
			r.stepReport(ctx, name, wire.StatusOK, d)
			res.Steps = append(res.Steps, StepResult{Name: name, Details: d})
			return nil
		},
	})
	if err != nil {
		return res, err
	}
	if err := writeFile(under(r.o.Root, DoneFile), []byte(res.SiteDigest+"\n"), 0o644); err != nil {
		return res, &StepError{Step: "done", Err: err}
	}
	return res, nil
}

// medium finds the medium and reads the site config on it; nothing is applied when it
// is missing or wrong. On a seed with site keys (Options.SiteKeysDir) its signature is
// checked before anything on it is parsed; a medium that fails the check is reported, on
// the console and as a failed medium step, and passed over while the hook waits on for
// another; so is one whose sealed secrets the seed's identity does not open. It returns the
// fingerprint of the key that signed the medium ("" without keys).
func (r *run) medium(ctx context.Context) (*siteconfig.SiteConfig, string, string, error) {
	r.stepReport(ctx, StepMedium, wire.StatusStart, map[string]string{"label": siteconfig.VolumeLabel})
	sc, path, signedBy, err := r.acceptMedium(ctx)
	if err != nil {
		r.stepReport(ctx, StepMedium, wire.StatusFailed, map[string]string{wire.DetailError: err.Error()})
		return nil, "", "", err
	}
	return sc, path, signedBy, nil
}

func (r *run) acceptMedium(ctx context.Context) (*siteconfig.SiteConfig, string, string, error) {
	keys, err := loadSiteKeys(r.o.SiteKeysDir)
	if err != nil {
		return nil, "", "", fmt.Errorf("this seed's site keys (%s) do not load, so no medium can be trusted; nothing was applied: %w", r.o.SiteKeysDir, err)
	}
	refused := map[string]bool{}
	w := wait{start: r.o.Clock.Now(), skip: func(path string) bool {
		if len(refused) == 0 {
			return false
		}
		m, err := siteconfig.OpenMedium(path)
		return err == nil && refused[m.Digest()]
	}}
	for {
		path, err := r.findMedium(ctx, w)
		if err != nil {
			return nil, "", "", err
		}
		m, err := siteconfig.OpenMedium(path)
		if err != nil {
			return nil, "", "", invalidMedium(path, err)
		}
		refuse := func(err error, want string) {
			refused[m.Digest()], w.refused, w.want = true, err, want
			r.stepReport(ctx, StepMedium, wire.StatusFailed, map[string]string{wire.DetailError: err.Error(), "medium": path, "waiting": "for a medium " + want})
		}
		signedBy := ""
		if len(keys) > 0 {
			if signedBy, err = m.Verify(keys); err != nil {
				refuse(err, "signed by one of this seed's site keys")
				continue
			}
			r.say("the site-config medium on %s is signed by site key %s", path, trust.ShortFingerprint(signedBy))
		}
		sc, err := m.SiteConfig()
		if err != nil {
			return nil, "", "", invalidMedium(path, err)
		}
		if err := sc.CheckBinding(r.o.SeedName, machineSerial(r.o.MachineSerialFile)); err != nil {
			refuse(&siteconfig.RefusedError{Path: path, Reason: err, Msg: err.Error() + "; bring the medium made for this site, or make one with site-config create --for-seed and --for-serial"},
				"made for this seed and this machine")
			continue
		}
		if err := fit.Check(r.o.Fit, sc); err != nil {
			refuse(&siteconfig.RefusedError{Path: path, Reason: err, Msg: "this seed cannot serve the site it describes, nothing was applied:\n" + err.Error()},
				"for a site this seed can serve (snofactory site-config validate --seed shows why)")
			continue
		}
		if err := unseal(sc, r.o.SiteIdentityFile); err != nil {
			refuse(fmt.Errorf("the site-config medium %s is refused: %w", path, err), "whose secrets this seed can open")
			continue
		}
		r.secrets = secretsOf(sc.Spec.PullSecret)
		return sc, path, signedBy, nil
	}
}

func invalidMedium(path string, err error) error {
	return fmt.Errorf("the site config on %s is not valid, nothing was applied; fix the medium and reboot: %w", path, err)
}

// StepPullSecret is the step that writes the site's pull secret.
const StepPullSecret = "pull-secret"

// checkPullSecret refuses an OpenShift site config without a usable pull secret before any
// step changes the node: lifecycle-agent's post-pivot stops on an empty one
// (lca-cli/postpivot/postpivot.go createPullSecretFile), and recert given none would leave
// the seed's in every copy. Site-config validation refuses the empty forms a file can give;
// this also catches a config that gives none at all, or a hand-made medium. A conformance
// OS site needs none.
func (r *run) checkPullSecret(sc *siteconfig.SiteConfig) error {
	if r.o.Target != oskind.OpenShift {
		return nil
	}
	msg := siteconfig.PullSecretProblem([]byte(sc.Spec.PullSecret))
	if msg == "" {
		return nil
	}
	if strings.TrimSpace(sc.Spec.PullSecret) == "" {
		msg = "the site config gives no pull secret"
	}
	return fmt.Errorf("%s: an OpenShift site needs its own, so nothing was applied; name it with spec.pullSecretFile "+
		"in the site config, make the medium again with site-config create, and reboot with it", msg)
}

// steps are the target's steps after the medium, in order.
func (r *run) steps(sc *siteconfig.SiteConfig) ([]step, error) {
	if r.o.Target == oskind.OpenShift {
		return r.openshiftSteps(sc)
	}
	return r.coreosSteps(sc), nil
}

// Plan lists the steps a reconfiguration for sc takes, in order, without taking any: the
// medium, then the target's steps. Secrets in sc are shown as placeholders. A site config
// the real run would refuse (an OpenShift one without a pull secret) is planned all the
// same, its pull-secret step saying why the run stops there.
func Plan(o Options, sc *siteconfig.SiteConfig) ([]steps.Step, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, dry: true}
	var refused error
	if sc != nil {
		refused = r.checkPullSecret(sc)
	} else {
		sc = &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "<site hostname>", ClusterName: "<site cluster>", BaseDomain: "<site domain>",
			PullSecret: "<site pull secret>", KubeadminPasswordHash: "<site kubeadmin password hash>",
			AdditionalTrustBundle: "<site additionalTrustBundle>", NodeLabels: map[string]string{"<site node label>": "<value>"}}}
	}
	r.secrets = secretsOf(sc.Spec.PullSecret)
	acts, err := r.steps(sc)
	if err != nil {
		return nil, err
	}
	out := []steps.Step{{Name: StepMedium, Detail: "find the site-config medium (label " + siteconfig.VolumeLabel + "), check its signature when the seed carries site keys (" +
		siteconfig.NodeKeysDir + "), read the site config, and refuse it when its binding names another seed or machine serial (" + DefaultMachineSerialFile + ")"}}
	for _, a := range acts {
		st := a.Step
		st.Argv = slices.Clone(st.Argv)
		for i := range st.Argv {
			st.Argv[i] = r.redact(st.Argv[i])
		}
		if st.Name == StepPullSecret && refused != nil {
			// The plan stays readable; the real run stops here before changing anything.
			st.Detail = "the real run refuses this site config before its first step: " + refused.Error()
		}
		out = append(out, st)
	}
	return out, nil
}

// stepReport reports one step's status; details get step=NAME.
func (r *run) stepReport(ctx context.Context, name string, st wire.Status, details map[string]string) {
	d := map[string]string{"step": name}
	maps.Copy(d, details)
	line := name + ": " + string(st)
	if e := d[wire.DetailError]; e != "" {
		line += ": " + e
	}
	r.say("%s", line)
	r.report(ctx, wire.PhaseReconfigureStep, st, d)
}

// report sends a message with the secrets taken out; a reporter that fails is logged once
// and otherwise ignored, since a site has no factory host to hear it.
func (r *run) report(ctx context.Context, phase string, st wire.Status, details map[string]string) {
	if r.o.Reporter == nil {
		return
	}
	d := make(map[string]string, len(details))
	for k, v := range details {
		d[k] = r.redact(v)
	}
	if _, err := r.o.Reporter.Report(ctx, phase, st, d); err != nil && r.reportOK {
		r.reportOK = false
		slog.WarnContext(ctx, "reconfigure: reporting over the agent channel failed; continuing without it", "err", r.redact(err.Error()))
	}
}

// say prints one status line on the console.
func (r *run) say(format string, args ...any) {
	fmt.Fprintf(r.o.Console, "snofactory reconfigure: %s\n", r.redact(fmt.Sprintf(format, args...)))
}

func (r *run) redact(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "<redacted>")
	}
	return s
}

// secretsOf lists what of a pull secret must never be shown: the whole of it and each
// registry's auth token and password.
func secretsOf(pullSecret string) []string {
	if strings.TrimSpace(pullSecret) == "" {
		return nil
	}
	out := []string{pullSecret}
	var ps struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Password string `json:"password"`
			Token    string `json:"identitytoken"`
		} `json:"auths"`
	}
	if json.Unmarshal([]byte(pullSecret), &ps) == nil {
		for _, a := range ps.Auths {
			for _, s := range []string{a.Auth, a.Password, a.Token} {
				if len(s) >= 4 { // a shorter value would redact ordinary words
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// cmd runs a command, wrapping its failure.
func (r *run) cmd(ctx context.Context, name string, args ...string) ([]byte, error) {
	slog.DebugContext(ctx, "reconfigure: running", "cmd", name, "args", args)
	out, err := r.o.Run(ctx, name, args...)
	if err != nil {
		return out, fmt.Errorf("running %s: %w", name, err)
	}
	return out, nil
}

// writeUnder writes a file at a node path under the root and returns the node path.
func (r *run) writeUnder(path string, data []byte, perm os.FileMode) (string, error) {
	return path, writeFile(under(r.o.Root, path), data, perm)
}
