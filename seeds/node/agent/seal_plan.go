package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// SealStep is one thing Seal did, for the report.
type SealStep struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// Runner runs a command on the node (steps.Runner); tests record the calls.
type Runner = steps.Runner

// exitCode is a failed command's exit code, or -1 when err carries none.
func exitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

// Clock is the time source of the seal's waits (clock.Clock).
type Clock = clock.Clock

// RealClock is the wall clock.
type RealClock = clock.Real

// Sealer seals the installed system under Root as Request asks. The same list of steps
// (Plan) is what a dry run prints and what Seal executes.
type Sealer struct {
	// Root is the installed system's root ("/" on a running node).
	Root string
	// BootDir is the boot directory whose ignition/config.ign goes ("" for none).
	BootDir string
	Request wire.SealRequest
	// Run runs commands (default ExecRunner); Clock paces the waits (default RealClock).
	Run   Runner
	Clock Clock
	// Rand feeds the disposable kubeadmin password (default crypto/rand).
	Rand io.Reader
	// KubeConfig reaches the local API (default LocalhostKubeConfig), a node path.
	KubeConfig string
	// APITimeout bounds the wait for the API before the cluster is read (default 20 min);
	// PullSecretTimeout and PullSecretPoll pace the wait for the MCO to roll the placeholder
	// pull secret out (lifecycle-agent: 10 min, every 30 s).
	APITimeout, PullSecretTimeout, PullSecretPoll time.Duration
	// Warn receives what goes wrong but does not stop the seal (default: discarded).
	Warn io.Writer

	planOnly bool // Plan: list the steps for any node, not this root's
}

// sealAction is a step and what carries it out; do returns the step's detail.
type sealAction struct {
	steps.Step
	do func(ctx context.Context) (string, error)
}

func (s Sealer) withDefaults() Sealer {
	if s.Root == "" {
		s.Root = "/"
	}
	if s.Run == nil {
		s.Run = steps.ExecRunner
	}
	if s.Clock == nil {
		s.Clock = RealClock{}
	}
	if s.Rand == nil {
		s.Rand = rand.Reader
	}
	if s.KubeConfig == "" {
		s.KubeConfig = LocalhostKubeConfig
	}
	if s.APITimeout <= 0 {
		s.APITimeout = 20 * time.Minute
	}
	if s.PullSecretTimeout <= 0 {
		s.PullSecretTimeout = 10 * time.Minute
	}
	if s.PullSecretPoll <= 0 {
		s.PullSecretPoll = 30 * time.Second
	}
	if s.Warn == nil {
		s.Warn = io.Discard
	}
	return s
}

// Plan lists the steps Seal takes, in order, without taking any.
func (s Sealer) Plan() []steps.Step {
	s.planOnly = true
	acts := s.withDefaults().actions()
	out := make([]steps.Step, len(acts))
	for i, a := range acts {
		out[i] = a.Step
	}
	return out
}

// Seal carries out the plan. Each step is safe to repeat, so a seal cut short by a power
// loss is sealed again from the start.
func (s Sealer) Seal(ctx context.Context) ([]SealStep, error) {
	s = s.withDefaults()
	acts := s.actions()
	run := make([]steps.Action[string], len(acts))
	for i, a := range acts {
		run[i] = steps.Action[string]{Step: a.Step, Do: a.do}
	}
	var done []SealStep
	err := steps.Execute(ctx, run, steps.Hooks[string]{Done: func(name, detail string) error {
		done = append(done, SealStep{name, detail})
		return nil
	}})
	if err != nil {
		return done, fmt.Errorf("seal %w", err) // "seal step NAME: ..."
	}
	return done, nil
}

// Seal seals the installed system under root with the real commands and clock.
func Seal(ctx context.Context, root, bootDir string, req wire.SealRequest, run Runner) ([]SealStep, error) {
	return Sealer{Root: root, BootDir: bootDir, Request: req, Run: run}.Seal(ctx)
}

// actions is the target's sequence. Cheap checks come first; on OpenShift the cluster is
// read and cleaned through its API while it runs, then stopped, then re-signed by the
// seed-time recert, and only then are files removed (lifecycle-agent's order).
func (s Sealer) actions() []sealAction {
	acts := []sealAction{s.requiredFiles()}
	if s.Request.Target.IsOpenShift() {
		acts = append(acts, s.openshiftActions()...)
	}
	return append(acts, s.nodeStateActions()...)
}

// under is a node path under the root.
func (s Sealer) under(p string) string { return filepath.Join(s.Root, p) }

// cmd is a step that runs one command.
func (s Sealer) cmd(name, detail string, changes []string, argv ...string) sealAction {
	return sealAction{steps.Step{Name: name, Argv: argv, Changes: changes, Detail: detail}, func(ctx context.Context) (string, error) {
		if _, err := s.Run(ctx, argv[0], argv[1:]...); err != nil {
			return "", err
		}
		return strings.Join(argv, " "), nil
	}}
}

func (s Sealer) requiredFiles() sealAction {
	req := s.Request.RequiredFiles
	return sealAction{steps.Step{Name: "relocation-config", Detail: "the relocation configuration render wrote is in place"}, func(context.Context) (string, error) {
		var missing []string
		for _, p := range req {
			if _, err := os.Lstat(s.under(p)); err != nil {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("the relocation configuration is not in place (were its MachineConfigs applied?): missing %s", strings.Join(missing, ", "))
		}
		return fmt.Sprintf("%d files in place", len(req)), nil
	}}
}

// pullSecretPaths are where a node keeps the build-time pull secret: the kubelet's and
// CRI-O's global pull secret, and the registry auth files of root.
func pullSecretPaths() []string {
	return []string{kubeletAuthFile, "/root/.docker/config.json", "/run/containers/0/auth.json", "/etc/containers/auth.json"}
}

// kubeletAuthFile is the kubelet's and CRI-O's pull secret. On OpenShift a MachineConfig
// owns it (machine-config-operator templates/common/_base/files/pull-secret.yaml).
const kubeletAuthFile = "/var/lib/kubelet/config.json"

// nodeStateActions clear what must not ship, on every target.
func (s Sealer) nodeStateActions() []sealAction {
	req := s.Request
	acts := []sealAction{
		s.removeAction("per-node-state", perNodeState(), "emptied, the directories kept; a file a MachineConfig owns stays"),
		s.removeAction("shell-history", []string{shellHistory}, "the factory's shells (lifecycle-agent's */.bash_history)"),
	}
	if req.Target.IsOpenShift() {
		acts = append(acts, s.removeAction("factory-etc", factoryEtcState(), "what lifecycle-agent leaves out of a seed's /etc; a file a MachineConfig owns stays"))
	}
	acts = append(acts,
		s.machineIDAction(),
		s.sshHostKeysAction(),
		s.pullSecretAction(),
	)
	if s.BootDir != "" {
		cfg := filepath.Join(s.BootDir, "ignition", "config.ign")
		acts = append(acts, sealAction{steps.Step{Name: "ignition-config", Changes: []string{cfg}, Detail: "the first-boot config may embed secrets"}, func(context.Context) (string, error) {
			if err := shred(cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("removing the first-boot Ignition config: %w", err)
			}
			return "removed " + cfg, nil
		}})
	}
	if req.RecertImage != "" {
		acts = append(acts, sealAction{steps.Step{Name: "reconfigure-images", Changes: []string{wire.ReconfigureImagesFile}}, func(context.Context) (string, error) {
			imgs, err := json.Marshal(map[string]string{"recertImage": req.RecertImage, "etcdImage": req.EtcdImage})
			if err != nil {
				return "", err
			}
			return wire.ReconfigureImagesFile, writeUnder(s.Root, wire.ReconfigureImagesFile, imgs, 0o644)
		}})
	}
	if req.Target.IsOpenShift() {
		acts = append(acts, s.reconfigureUnitActions()...)
	} else if req.Target == oskind.CoreOS {
		acts = append(acts, s.coreosReconfigureUnitAction())
	}
	if req.Target == oskind.CoreOS {
		acts = append(acts, s.ignitionResultAction())
	}
	if req.SiteIdentity != "" {
		acts = append(acts, s.siteIdentityAction())
	}
	acts = append(acts, sealAction{steps.Step{Name: "sealed", Changes: []string{wire.SealedFile}}, func(context.Context) (string, error) {
		b, err := json.Marshal(req.Public())
		if err != nil {
			return "", err
		}
		return wire.SealedFile, writeUnder(s.Root, wire.SealedFile, b, 0o644)
	}})
	// Last: every file the seal wrote gets the source date too.
	if req.Target == oskind.CoreOS && req.SourceDateEpoch > 0 {
		acts = append(acts, s.clampTimesAction())
	}
	return acts
}

// siteIdentityAction places the identity that opens the site media's sealed secrets,
// 0600, replacing whatever was there (its mode too). The step's detail never quotes it.
func (s Sealer) siteIdentityAction() sealAction {
	p := siteconfig.NodeIdentityFile
	return sealAction{steps.Step{Name: "site-identity", Changes: []string{p}, Detail: "the site media's identity placed, 0600"}, func(context.Context) (string, error) {
		id := []byte(s.Request.SiteIdentity)
		if _, err := siteconfig.ParseIdentities(id); err != nil {
			return "", fmt.Errorf("the request's site identity: %w", err)
		}
		if err := os.Remove(s.under(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("replacing %s: %w", p, err)
		}
		return "placed " + p + ", 0600", writeUnder(s.Root, p, bytes.TrimRight(id, "\n"), 0o600)
	}}
}

// removeAction removes the node paths ps (DIR/ is emptied, kept), sparing every file a
// MachineConfig owns: the machine-config daemon would report it missing.
func (s Sealer) removeAction(name string, ps []string, detail string) sealAction {
	return sealAction{steps.Step{Name: name, Changes: ps, Detail: detail}, func(context.Context) (string, error) {
		owned, err := mcOwned(s.Root)
		if err != nil {
			return "", err
		}
		r := removal{root: s.Root, owned: owned}
		for _, p := range ps {
			if p == shellHistory {
				err = r.removeShellHistory()
			} else {
				err = r.remove(p)
			}
			if err != nil {
				return "", err
			}
		}
		return r.detail(), nil
	}}
}

// sshHostKeysAction keeps the host keys on OpenShift, as lifecycle-agent does: the site's
// recert replaces them (regenerate_server_ssh_keys), so no two sites share keys, and stops
// when it finds none (recert src/server_ssh_keys.rs remove_old_keys: "No SSH server keys
// found"). Elsewhere they go, and the site's sshd-keygen makes new ones at its first boot
// (Fedora's openssh sshd-keygen@.service, ConditionFileNotEmpty=|!/etc/ssh/ssh_host_%i_key).
func (s Sealer) sshHostKeysAction() sealAction {
	if s.Request.Target.IsOpenShift() {
		return sealAction{steps.Step{Name: "ssh-host-keys", Detail: "kept: the site's recert replaces them"}, func(context.Context) (string, error) {
			keys, _ := filepath.Glob(s.under("/etc/ssh/ssh_host_*"))
			return fmt.Sprintf("%d kept for the site's recert to replace", len(keys)), nil
		}}
	}
	return sealAction{steps.Step{Name: "ssh-host-keys", Changes: []string{"/etc/ssh/ssh_host_*"}, Detail: "removed: regenerated at the site"}, func(context.Context) (string, error) {
		keys, _ := filepath.Glob(s.under("/etc/ssh/ssh_host_*"))
		return fmt.Sprintf("%d removed", len(keys)), removeAll(keys)
	}}
}

// pullSecretAction shreds the pull secret files unless the request keeps them. A file a
// MachineConfig owns is not removed (the MCD checks it) but must hold the placeholder the
// MCO rolled out, as lifecycle-agent's seed carries it (seedgen_controller.go
// waitForPullSecretOverride; seedcreator.go backupVar adds every MCD-managed file).
func (s Sealer) pullSecretAction() sealAction {
	step := steps.Step{Name: "pull-secret", Changes: pullSecretPaths(), Detail: "the build's pull secret files shredded"}
	if s.Request.Target.IsOpenShift() {
		step.Changes = slices.DeleteFunc(pullSecretPaths(), func(p string) bool { return p == kubeletAuthFile })
		step.Detail = "the build's pull secret files shredded; " + kubeletAuthFile + ", which a MachineConfig owns, must hold the placeholder and stays"
	}
	if s.Request.KeepPullSecret {
		step.Changes, step.Detail = nil, "kept: the blueprint keeps it"
	}
	return sealAction{step, func(context.Context) (string, error) { return s.removePullSecretFiles() }}
}

// removePullSecretFiles shreds the pull secret files unless the request keeps them.
func (s Sealer) removePullSecretFiles() (string, error) {
	if s.Request.KeepPullSecret {
		return "kept: the blueprint keeps it", nil
	}
	owned, err := mcOwned(s.Root)
	if err != nil {
		return "", err
	}
	if s.Request.Target.IsOpenShift() {
		owned[kubeletAuthFile] = true
	}
	var removed, kept []string
	for _, p := range pullSecretPaths() {
		if owned[p] {
			if err := s.holdsPlaceholder(p); err != nil {
				return "", err
			}
			kept = append(kept, p)
			continue
		}
		err := shred(s.under(p))
		switch {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("removing the pull secret: %w", err)
		}
	}
	d := "none on the node"
	if len(removed) > 0 {
		d = "removed " + strings.Join(removed, ", ")
	}
	if len(kept) > 0 {
		d += "; the placeholder stays in " + strings.Join(kept, ", ")
	}
	return d, nil
}

// holdsPlaceholder refuses a MachineConfig-owned pull secret file that holds anything but
// the placeholder. Its content is never quoted: it may be the build's secret.
func (s Sealer) holdsPlaceholder(p string) error {
	b, err := os.ReadFile(s.under(p))
	if err != nil {
		return fmt.Errorf("%s, which a MachineConfig owns, cannot be read: %w", p, err)
	}
	if canonicalJSON(b) != canonicalJSON([]byte(PlaceholderPullSecret)) {
		return fmt.Errorf("%s, which a MachineConfig owns, holds a pull secret other than the placeholder, and the seal cannot remove it "+
			"(the machine-config daemon would find it missing and degrade the pool): let the MCO roll the placeholder in openshift-config/pull-secret out to the node, then seal again", p)
	}
	return nil
}

// dbusMachineID is the D-Bus copy of the machine ID, which systemd takes over instead of
// making a new ID when it is a regular file (systemd src/shared/machine-id-setup.c
// generate_machine_id); RHCOS links it to /etc/machine-id.
const dbusMachineID = "/var/lib/dbus/machine-id"

// machineIDAction empties /etc/machine-id, so every site gets its own ID (NetworkManager's
// DHCP identities come from it; seeds of one build boot side by side in the depot), and
// removes a D-Bus copy that would hand the factory's ID back. An empty file is not a first
// boot (machine-id(5), "First Boot Semantics"): no presets are re-applied; a missing file or
// "uninitialized" would be one. Upstream keeps the seed's ID (docs/openshift-fidelity.md).
func (s Sealer) machineIDAction() sealAction {
	const done = "emptied: the site's boot makes a new one"
	return sealAction{steps.Step{Name: "machine-id", Changes: []string{"/etc/machine-id", dbusMachineID}, Detail: done + "; a D-Bus copy that is a regular file removed"}, func(context.Context) (string, error) {
		if err := truncateIfExists(s.under("/etc/machine-id")); err != nil {
			return "", err
		}
		fi, err := os.Lstat(s.under(dbusMachineID))
		switch {
		case err == nil && fi.Mode().IsRegular():
			if err := shred(s.under(dbusMachineID)); err != nil {
				return "", fmt.Errorf("removing the D-Bus machine ID: %w", err)
			}
			return done + "; removed " + dbusMachineID, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("reading %s: %w", dbusMachineID, err)
		}
		return done, nil
	}}
}
