package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// Name is the stage name.
const Name = handoff.StageValidate

// version 3: the output carries the node's inventory (InventoryFile) for the seal's SBOM.
const version = "3"

// StageOptions is exactly what the validate stage reads.
type StageOptions struct {
	// Skip maps the ids of skipped checks to the blueprint's reason ("" when none).
	Skip map[string]string `json:"skip,omitempty"`
	// CPUs and MemoryMiB size the VM that boots the installed disk.
	CPUs      int `json:"cpus"`
	MemoryMiB int `json:"memoryMiB"`
	// ShipmentWindow is how long certificates must stay valid (relocation).
	ShipmentWindow time.Duration `json:"shipmentWindow"`
	// Accelerator, BootTimeout and Prober are how the VM runs, not what it checks.
	Accelerator string        `json:"-"`
	BootTimeout time.Duration `json:"-"`
	// ClusterTimeout bounds the wait for an OpenShift API after the boot (scaled under TCG).
	ClusterTimeout time.Duration `json:"-"`
	Prober         vm.Prober     `json:"-"`
}

const (
	// apiPort is the OpenShift API in the guest, forwarded to a free port on the host.
	apiPort = 6443
)

// New returns the validate stage: it boots the installed disk (a copy-on-write overlay, so
// the installed disk stays as install made it), collects the node's facts through the
// agent and runs every check; any failed check stops the build before seal.
func New(opts StageOptions) pipeline.Stage {
	return pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Deps:    handoff.Deps(handoff.Resolve{}, handoff.Render{}, handoff.Precache{}, handoff.Install{}),
		// One factory VM of the blueprint's size, while it runs: install's, when it ran in
		// this build and handed its VM on, else its own, handed on to seal.
		Resources: pipeline.Resources{VMs: 1, CPUs: max(opts.CPUs, 1), MemoryMiB: opts.MemoryMiB},
		Session:   vm.SessionKind,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return runStage(ctx, opts, env)
		},
	}
}

func runStage(ctx context.Context, opts StageOptions, env *pipeline.Env) error {
	in, err := readInputs(env)
	if err != nil {
		return err
	}
	facts, received, err := bootFacts(ctx, opts, in, env)
	if err != nil {
		return err
	}
	in.eval.Facts, in.eval.ReceivedAt = facts, received
	in.eval.Skip = opts.Skip
	in.eval.Options.ShipmentWindow = opts.ShipmentWindow
	rep, err := Evaluate(ctx, in.eval)
	if err != nil {
		return err
	}
	if err := publish(env, rep); err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("%w\nreports: %s, %s", rep.Err(), filepath.Join(env.RunDir, ReportJSON), filepath.Join(env.RunDir, ReportJUnit))
	}
	env.Log.Info("validation passed", "passed", rep.Summary.Passed, "skipped", rep.Summary.Skipped, "warnings", rep.Summary.Warnings)
	if err := writeInventory(filepath.Join(env.Out, InventoryFile), facts); err != nil {
		return err
	}
	return handoff.Write(env, handoff.Validate{Report: ReportJSON, JUnit: ReportJUnit, Inventory: InventoryFile,
		Passed: rep.Summary.Passed, Skipped: rep.Summary.Skipped, Warnings: rep.Summary.Warnings})
}

// InventoryFile holds the validated node's software (wire.Inventory JSON) in the stage's
// output: the seal lists it in the seed's SBOM without booting the node again.
const InventoryFile = "inventory.json"

// writeInventory writes the inventory part of the node's facts to path.
func writeInventory(path string, f *wire.Facts) error {
	b, err := json.MarshalIndent(f.Inventory, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the node's inventory: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the node's inventory: %w", err)
	}
	return nil
}

// stageInputs are the upstream outputs validation checks against.
type stageInputs struct {
	install handoff.Input[handoff.Install]
	// dataDisk is the precache data disk (OpenShift): the installed node takes its agent
	// from it on every boot, as its install did.
	dataDisk string
	eval     Inputs
}

func readInputs(env *pipeline.Env) (stageInputs, error) {
	var in stageInputs
	var err error
	if in.install, err = handoff.Read[handoff.Install](env); err != nil {
		return in, err
	}
	pc, err := handoff.Read[handoff.Precache](env)
	if err != nil {
		return in, err
	}
	in.eval.Images = pc.Out.Images
	if pc.Out.DataDisk != "" {
		in.dataDisk = pc.Path(pc.Out.DataDisk)
	}
	rd, err := handoff.Read[handoff.Render](env)
	if err != nil {
		return in, err
	}
	if rd.Out.Target == oskind.OpenShift {
		in.eval.OpenShift, err = openshiftInputs(env, rd)
		return in, err
	}
	// An OpenShift node's bootstrap config ran on the live system; its own config is
	// checked through the MachineConfigs instead.
	if cfg, ok := rd.Out.Configs[handoff.ConfigNode]; ok {
		if in.eval.Ignition, err = os.ReadFile(rd.Path(cfg.Path)); err != nil {
			return in, fmt.Errorf("reading the rendered config: %w", err)
		}
	}
	return in, nil
}

// openshiftInputs is what the OpenShift checks need from upstream: the installer's admin
// kubeconfig and the relocation MachineConfigs (render), the locked release (resolve).
func openshiftInputs(env *pipeline.Env, rd handoff.Input[handoff.Render]) (*OpenShift, error) {
	rs, err := handoff.Read[handoff.Resolve](env)
	if err != nil {
		return nil, err
	}
	lock, err := lockfile.ReadLock(rs.Path(rs.Out.Lock))
	if err != nil {
		return nil, err
	}
	if rd.Out.Kubeconfig == "" {
		return nil, errors.New("render recorded no kubeconfig for the OpenShift checks")
	}
	_, dayTwo := rd.Out.Configs[handoff.ConfigWorker]
	return &OpenShift{
		Kubeconfig:               rd.Path(rd.Out.Kubeconfig),
		Version:                  lock.Release.Version,
		RelocationMachineConfigs: rd.Out.RelocationMachineConfigs,
		DayTwoWorkers:            dayTwo,
	}, nil
}

// bootFacts returns the facts the node's agent reports, and when they arrived (for the
// clock check): from the factory VM install handed on, asked to report as a booted node,
// or else from a boot of the installed disk through an overlay of its own. A node that
// takes commands afterwards is handed on to seal.
func bootFacts(ctx context.Context, opts StageOptions, in stageInputs, env *pipeline.Env) (*wire.Facts, time.Time, error) {
	sess := env.TakeSession()
	var fac *vm.Factory
	if sess != nil {
		fac = sess.Value.(*vm.Factory)
		env.Log.Info("validating the node install left running", "console", fac.Console)
		if err := fac.Do(ctx, wire.Command{Name: wire.CommandReport}); err != nil {
			return nil, time.Time{}, err
		}
	} else {
		var err error
		if sess, fac, err = bootInstalled(ctx, opts, in, env); err != nil {
			return nil, time.Time{}, err
		}
	}
	if in.eval.OpenShift != nil {
		in.eval.OpenShift.Server = fac.APIServer
	}
	bootTimeout := opts.BootTimeout
	if bootTimeout <= 0 {
		bootTimeout = 10 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, fac.Accel.Scale(bootTimeout))
	defer cancel()
	var received time.Time
	msgs, err := fac.Machine.WaitFinal(wctx, wire.PhaseBootComplete, func(msg wire.Message) {
		if msg.Phase == wire.PhaseFacts {
			received = time.Now()
		}
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("booting the installed disk: %w", err)
	}
	if in.eval.OpenShift != nil {
		if err := waitForCluster(ctx, opts, fac.Accel, in.eval.OpenShift, env); err != nil {
			return nil, time.Time{}, err
		}
	}
	if vm.TakesCommands(msgs) {
		env.HandOn(sess)
	}
	return factsFrom(msgs, received)
}

// bootInstalled boots the installed disk through an overlay in a new session's directory.
func bootInstalled(ctx context.Context, opts StageOptions, in stageInputs, env *pipeline.Env) (*pipeline.Session, *vm.Factory, error) {
	inst := in.install
	p := opts.Prober
	p.Log = env.Log
	acc, err := p.Resolve(ctx, vm.Accel(opts.Accelerator))
	if err != nil {
		return nil, nil, err
	}
	sess, err := env.StartSession()
	if err != nil {
		return nil, nil, err
	}
	overlay := filepath.Join(sess.Dir, "disk.qcow2")
	if err := vm.CreateOverlay(ctx, inst.Path(inst.Out.Disk), inst.Out.Format, overlay); err != nil {
		return nil, nil, err
	}
	cfg := vm.Config{
		Name: "validate",
		// Discard, as install's: the seal may run on this VM and trims what it removed.
		Disks:      []vm.Disk{{Path: overlay, Format: "qcow2", Serial: wire.TargetDiskSerial, Discard: true}},
		CPUs:       opts.CPUs,
		MemoryMiB:  opts.MemoryMiB,
		Firmware:   vm.Firmware(inst.Out.Firmware),
		ConsoleLog: filepath.Join(env.RunDir, "logs", Name+"-console.log"),
	}
	if in.eval.OpenShift != nil && in.dataDisk != "" {
		// The node's boot report unit takes the agent that sends boot-complete and the facts
		// off this disk (render's node/snofactory-phase.sh).
		cfg.Disks = append(cfg.Disks, vm.Disk{Path: in.dataDisk, Format: "raw", ReadOnly: true, Serial: wire.PrecacheDiskSerial})
	}
	fac := &vm.Factory{Accel: acc, Disk: overlay, Console: cfg.ConsoleLog}
	if in.eval.OpenShift != nil {
		port, err := vm.FreePort()
		if err != nil {
			return nil, nil, err
		}
		cfg.Network = &vm.UserNetwork{Forwards: []vm.Forward{{HostPort: port, GuestPort: apiPort}}}
		fac.APIServer = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	if fac.Machine, err = vm.Start(ctx, cfg, acc, env.Log); err != nil {
		return nil, nil, err
	}
	sess.Value = fac
	sess.OnClose(fac.Stop)
	return sess, fac, nil
}

// waitForCluster waits for the booted node's API (forwarded to the host) to be ready.
func waitForCluster(ctx context.Context, opts StageOptions, acc vm.Accelerator, o *OpenShift, env *pipeline.Env) error {
	timeout := opts.ClusterTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	env.Log.Info("waiting for the OpenShift API", "server", o.Server, "timeout", acc.Scale(timeout).String())
	wctx, cancel := context.WithTimeout(ctx, acc.Scale(timeout))
	defer cancel()
	if err := WaitForAPI(wctx, o, 5*time.Second); err != nil {
		return err
	}
	// /readyz says nothing of the operators: poll until the cluster settles, as
	// openshift-install wait-for install-complete does, within the same bound.
	env.Log.Info("waiting for the cluster to settle", "window", DefaultSettleWindow.String())
	return WaitSettled(wctx, o, Options{}, nil, 5*time.Second)
}

// factsFrom picks the facts report out of a boot's messages.
func factsFrom(msgs []wire.Message, received time.Time) (*wire.Facts, time.Time, error) {
	for _, msg := range msgs {
		if msg.Phase == wire.PhaseFacts {
			f, err := wire.DecodeFacts(msg)
			return f, received, err
		}
	}
	return nil, time.Time{}, errors.New("the installed node booted but its agent reported no facts (is the agent in the installed image?)")
}

// publish writes the reports into the stage output and the build's output directory (where
// they stay when validation fails and the stage output is discarded), and the summary into
// run.json.
func publish(env *pipeline.Env, rep *Report) error {
	for _, dir := range []string{env.Out, env.RunDir} {
		if _, _, err := WriteReports(dir, rep); err != nil {
			return err
		}
	}
	return env.Summarize(struct {
		Summary
		Failures []string `json:"failures,omitempty"`
	}{rep.Summary, rep.FailureLines()})
}
