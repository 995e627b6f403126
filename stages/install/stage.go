package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// Name is the stage name.
const Name = handoff.StageInstall

// version 2: a conformance OS install gets its root file system's identity from the lock.
const version = "2"

// DiskFile is the installed disk inside the stage's output.
const DiskFile = "disk.qcow2"

const (
	// apiPort is the OpenShift API in the guest, forwarded to a free port on the host.
	apiPort = 6443
)

// Options is exactly what the stage reads. What shapes the installed disk is part of the
// key; how fast the VM runs (accelerator, timeouts) is not.
type Options struct {
	// Target is the blueprint's target: it picks the phases.
	Target    oskind.Kind `json:"target"`
	CPUs      int         `json:"cpus"`
	MemoryMiB int         `json:"memoryMiB"`
	// DiskSizeMiB is the target disk's size.
	DiskSizeMiB int `json:"diskSizeMiB"`
	// Firmware is bios or uefi.
	Firmware string `json:"firmware"`
	// SourceDateEpoch is SOURCE_DATE_EPOCH as the build saw it ("" when not set): the
	// root file system's creation time, so it keys the install (and its recipe).
	SourceDateEpoch string `json:"sourceDateEpoch,omitempty"`
	// ContainerStorage is a coreos target's separate /var/lib/containers partition
	// (spec.disk.containerStorage placed on the disk): the conformance OS's installer makes
	// the disk GPT with it, and imports the precached images onto it.
	ContainerStorage *wire.InstallPartition `json:"containerStorage,omitempty"`
	// Accelerator is auto, kvm or tcg (see vm.ResolveAccel).
	Accelerator string `json:"-"`
	// Timeouts bound each phase at KVM speed, by phase name; DefaultTimeout bounds the
	// phases not named. Both are scaled under TCG.
	Timeouts       map[string]time.Duration `json:"-"`
	DefaultTimeout time.Duration            `json:"-"`
	// Prober picks the accelerator; the zero value probes the host for real. Tests force
	// each kind of host through it.
	Prober vm.Prober `json:"-"`
}

// New returns the install stage.
func New(opts Options) pipeline.Stage {
	return pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Deps:    handoff.Deps(handoff.Resolve{}, handoff.LiveISO{}, handoff.Precache{}),
		// One factory VM of the blueprint's size, while it runs and, handed on, while
		// validate and seal use it.
		Resources: pipeline.Resources{VMs: 1, CPUs: max(opts.CPUs, 1), MemoryMiB: opts.MemoryMiB},
		Session:   vm.SessionKind,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return run(ctx, opts, env)
		},
	}
}

// inputs are the upstream outputs the install boots, and the lock that pinned them.
type inputs struct {
	iso, dataDisk, lock string
}

func readInputs(env *pipeline.Env) (inputs, error) {
	res, err := handoff.Read[handoff.Resolve](env)
	if err != nil {
		return inputs{}, err
	}
	live, err := handoff.Read[handoff.LiveISO](env)
	if err != nil {
		return inputs{}, err
	}
	pc, err := handoff.Read[handoff.Precache](env)
	if err != nil {
		return inputs{}, err
	}
	in := inputs{iso: live.Path(live.Out.ISO), lock: res.Path(res.Out.Lock)}
	if pc.Out.DataDisk != "" {
		in.dataDisk = pc.Path(pc.Out.DataDisk)
	}
	return in, nil
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	in, err := readInputs(env)
	if err != nil {
		return err
	}
	acc, err := chooseAccel(ctx, opts, env)
	if err != nil {
		return err
	}
	disk := filepath.Join(env.Out, DiskFile)
	if err := vm.CreateDisk(ctx, disk, "qcow2", opts.DiskSizeMiB); err != nil {
		return err
	}
	cfg, err := machineConfig(opts, in, disk, env)
	if err != nil {
		return err
	}
	if opts.Target == oskind.CoreOS {
		req, err := installRequest(ctx, in.lock, opts, env)
		if err != nil {
			return err
		}
		cfg.Disks = append(cfg.Disks, req)
	}
	// The VM belongs to a session from the start: if the installed node stays up it is
	// handed on to validate and seal; if the stage fails, closing the session stops it.
	sess, err := env.StartSession()
	if err != nil {
		return err
	}
	m, err := vm.Start(ctx, cfg, acc, env.Log)
	if err != nil {
		return err
	}
	fac := &vm.Factory{Machine: m, Accel: acc, Console: cfg.ConsoleLog, APIServer: apiServer(cfg)}
	sess.Value = fac
	sess.OnClose(fac.Stop)
	f := follower{opts: opts, env: env, m: m, acc: acc, console: cfg.ConsoleLog, tracker: newTracker(planFor(opts.Target))}
	if err := f.follow(ctx); err != nil {
		return f.fail(err)
	}
	if vm.TakesCommands(f.messages) {
		if err := keepRunning(ctx, fac, disk, sess.Dir, env); err == nil {
			env.HandOn(sess)
			return finish(env, opts, acc, f.tracker.done)
		} else if ctx.Err() != nil {
			return err
		} else {
			env.Log.Warn("the installed node cannot stay up for validate and seal; powering it off, and they boot it again", "error", err.Error())
			if err := fac.Do(ctx, wire.Command{Name: wire.CommandPoweroff}); err != nil {
				env.Log.Warn("the node took no poweroff command", "error", err.Error())
			}
		}
	}
	if err := shutdown(ctx, m, acc, env); err != nil {
		return err
	}
	return finish(env, opts, acc, f.tracker.done)
}

// keepRunning lets the installed node run on for validate and seal while the disk install
// made stays as it is: the node freezes its root (a clean filesystem on the disk), the
// VM moves onto an overlay in the session's directory, the node thaws. The disk is the
// stage's output; the overlay, everything the node writes after, goes with the session.
func keepRunning(ctx context.Context, fac *vm.Factory, disk, sessionDir string, env *pipeline.Env) error {
	if err := fac.Do(ctx, wire.Command{Name: wire.CommandFreeze}); err != nil {
		return err
	}
	if err := fac.Ask(ctx); err != nil {
		return fmt.Errorf("freezing the node's root: %w", err)
	}
	overlay := filepath.Join(sessionDir, DiskFile)
	if err := vm.CreateOverlay(ctx, disk, "qcow2", overlay); err != nil {
		return err
	}
	snapErr := fac.Machine.Snapshot(ctx, overlay)
	// Thaw whatever happened: a node left frozen hangs.
	if err := fac.Do(ctx, wire.Command{Name: wire.CommandThaw}); err != nil {
		return errors.Join(snapErr, err)
	}
	if err := errors.Join(snapErr, fac.Ask(ctx)); err != nil {
		return err
	}
	fac.Disk = overlay
	env.Log.Info("installed disk taken; the node runs on for validate and seal", "overlay", overlay)
	return nil
}

// installRequest writes the conformance OS installer's request disk into scratch: the root
// file system's UUID and hash seed derived from the lock's digest, and its creation time
// from SOURCE_DATE_EPOCH when that is set, so two installs from one lock make the same
// file system. (RHCOS makes its own on first boot: its install writes an image.)
func installRequest(ctx context.Context, lock string, opts Options, env *pipeline.Env) (vm.Disk, error) {
	_, lockDigest, err := seed.FileDigest(ctx, lock)
	if err != nil {
		return vm.Disk{}, fmt.Errorf("the lock the root file system's identity comes from: %w", err)
	}
	req := wire.InstallRequest{ContainerStorage: opts.ContainerStorage}
	req.RootUUID, req.HashSeed = wire.FSIdentity(lockDigest.String())
	if req.ContainerStorage != nil {
		req.GPT = wire.NewGPTIdentity(lockDigest.String())
	}
	switch date, ok, err := seed.ParseSourceDateEpoch(opts.SourceDateEpoch); {
	case err != nil:
		return vm.Disk{}, err
	case ok:
		req.MkfsTime = date.Unix()
	}
	b, err := wire.EncodeInstallRequest(req)
	if err != nil {
		return vm.Disk{}, err
	}
	p := filepath.Join(env.Scratch, "install-request.img")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return vm.Disk{}, fmt.Errorf("writing the install request: %w", err)
	}
	env.Log.Info("the root file system's identity comes from the lock", "uuid", req.RootUUID, "lock", lockDigest.String(),
		"mkfs_time", req.MkfsTime)
	return vm.Disk{Path: p, Format: "raw", ReadOnly: true, Serial: wire.InstallDiskSerial}, nil
}

// apiServer is the node's API as the host reaches it, when the VM forwards it.
func apiServer(cfg vm.Config) string {
	if cfg.Network == nil {
		return ""
	}
	for _, fw := range cfg.Network.Forwards {
		if fw.GuestPort == apiPort {
			return fmt.Sprintf("https://127.0.0.1:%d", fw.HostPort)
		}
	}
	return ""
}

// chooseAccel probes KVM for real (through opts.Prober) and falls back to TCG with a
// visible warning; the UseTool entry puts the choice in run.json.
func chooseAccel(ctx context.Context, opts Options, env *pipeline.Env) (vm.Accelerator, error) {
	p := opts.Prober
	p.Log = env.Log
	acc, err := p.Resolve(ctx, vm.Accel(opts.Accelerator))
	if err != nil {
		return acc, err
	}
	env.UseTool("accelerator", fmt.Sprintf("%s (%s)", acc.Name, acc.Reason))
	return acc, nil
}

// machineConfig is the factory VM: the live ISO, the empty target disk and the read-only
// precache disk found by their serials, the console in the run's logs, and for OpenShift
// the API port forwarded to the host.
func machineConfig(opts Options, in inputs, disk string, env *pipeline.Env) (vm.Config, error) {
	cfg := vm.Config{
		Name: "install",
		ISO:  in.iso,
		// Discard: the node's seal trims what it removed, through the overlay it then writes.
		Disks:     []vm.Disk{{Path: disk, Format: "qcow2", Serial: wire.TargetDiskSerial, BootIndex: 1, Discard: true}},
		CPUs:      opts.CPUs,
		MemoryMiB: opts.MemoryMiB,
		Firmware:  vm.Firmware(opts.Firmware),
		// The target disk first: empty, the firmware falls through to the ISO; installed,
		// it boots the new OS. Boot indexes, because UEFI ignores -boot order.
		ISOBootIndex: 2,
		ConsoleLog:   filepath.Join(env.RunDir, "logs", Name+"-console.log"),
		GatherFile:   filepath.Join(env.Scratch, gatherPortFile),
	}
	if in.dataDisk != "" {
		cfg.Disks = append(cfg.Disks, vm.Disk{Path: in.dataDisk, Format: "raw", ReadOnly: true, Serial: wire.PrecacheDiskSerial})
	}
	if opts.Target == oskind.OpenShift {
		port, err := vm.FreePort()
		if err != nil {
			return cfg, err
		}
		cfg.Network = &vm.UserNetwork{Forwards: []vm.Forward{{HostPort: port, GuestPort: apiPort}}}
		env.Log.Info("OpenShift API forwarded", "host", fmt.Sprintf("127.0.0.1:%d", port))
	}
	return cfg, nil
}

// shutdown asks the installed guest to power off and waits for qemu to exit; a guest that
// ignores the power button is stopped (it has synced its disk before install-complete).
func shutdown(ctx context.Context, m *vm.Machine, acc vm.Accelerator, env *pipeline.Env) error {
	if err := m.Powerdown(ctx); err != nil && !errors.Is(err, vm.ErrExited) {
		env.Log.Warn("the VM did not take the power button; stopping it", "error", err.Error())
	}
	select {
	case <-m.Done():
	case <-time.After(acc.Scale(10 * time.Second)):
		env.Log.Info("the guest did not power off; stopping the VM")
	case <-ctx.Done():
		return ctx.Err()
	}
	m.Stop()
	return nil
}

// finish writes the output record: the installed disk and how the install went.
func finish(env *pipeline.Env, opts Options, acc vm.Accelerator, phases []PhaseTime) error {
	if err := env.Summarize(map[string]any{"accelerator": acc.Name, "phases": phases}); err != nil {
		return err
	}
	rec := handoff.Install{Disk: DiskFile, Format: "qcow2", Firmware: opts.Firmware, Target: opts.Target}
	if opts.ContainerStorage != nil {
		rec.ContainerStorageLabel = opts.ContainerStorage.Label
	}
	return handoff.Write(env, rec)
}
