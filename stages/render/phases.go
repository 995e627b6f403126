package render

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// The OpenShift install phases reach the factory host from units render adds: some to the
// installer's bootstrap-in-place config (the live system), the others in a master
// MachineConfig (the installed system, which the installer writes to disk from the master
// Ignition the MCO renders with render's manifests). Every unit runs PhaseScript, which takes
// the agent from the precache data disk: the binary never travels in Ignition.
const (
	// PhaseScript reports one phase; see node/snofactory-phase.sh.
	PhaseScript = "/usr/local/bin/snofactory-phase"
	// PhasesMachineConfig is the MachineConfig carrying the installed system's phase units.
	PhasesMachineConfig = "90-master-snofactory-install-phases"
	// liveStamps records the phases reported in this boot of the live system.
	liveStamps = "/run/snofactory/phases"
	// diskStamps records the phases the installed system reported, across its reboots,
	// so a later boot (validation, a MachineConfig reboot) reports none of them again.
	diskStamps = "/var/lib/snofactory/phases"
)

//go:embed node/snofactory-phase.sh
var phaseScript string

//go:embed node/snofactory-seal.sh
var sealScript string

//go:embed node/snofactory-factory.sh
var factoryScript string

// The installed node's factory commands: once it reported install-complete (or
// boot-complete on a later factory boot) it stays up and asks the host what to do next,
// so a build boots it once (node/snofactory-factory.sh).
const (
	FactoryScript = "/usr/local/bin/snofactory-factory"
	FactoryUnit   = "snofactory-factory.service"
)

// factoryUnitText starts the script after the final phase units.
func factoryUnitText() string {
	return "[Unit]\nDescription=snofactory: take the factory's commands between its stages (one boot per build)\n" +
		"After=snofactory-phase-" + wire.PhaseInstallComplete + ".service snofactory-phase-" + wire.PhaseBootComplete + ".service\n\n" +
		"[Service]\nType=simple\nExecStart=" + FactoryScript + "\n\n[Install]\nWantedBy=multi-user.target\n"
}

// phaseUnit is a service that reports one install phase.
type phaseUnit struct {
	Phase string
	// After are the installer's (or the MCO's) units this one starts after (ordering only: it
	// pulls none in).
	After []string
	// Watch is the installer unit doing the phase's work: its failure (or restart loop) is
	// the phase's failure, its journal the failure's log. "" for none.
	Watch string
	// Check names the script's test that the phase is done.
	Check string
	// Prev is the phase that must be reported first, in the same system; "" for none.
	Prev string
	// Before are units that must wait until this one is done: the unit is then a oneshot
	// (a simple service counts as started at once).
	Before []string
	// EveryBoot: the unit reports on every boot of the installed system (its stamp is in
	// /run), after the install.
	EveryBoot bool
	// MountsFor are paths whose mounts the unit requires and starts after
	// (RequiresMountsFor=): a path on no mount of its own adds nothing.
	MountsFor []string
}

// unitName is the service reporting p.
func (p phaseUnit) unitName() string { return "snofactory-phase-" + p.Phase + ".service" }

// livePhases are reported by the live system, in order. bootkube.service and
// install-to-disk.service are the installer's (Restart=on-failure services, so the script
// watches their marker files, which they write when their work is done).
func livePhases() []phaseUnit {
	return []phaseUnit{
		{Phase: wire.PhaseLiveBooted, Check: "always"},
		{Phase: wire.PhaseBootkubeDone, After: []string{"bootkube.service"}, Watch: "bootkube.service",
			Check: "bootkube-done", Prev: wire.PhaseLiveBooted},
		{Phase: wire.PhaseWrittenToDisk, After: []string{"install-to-disk.service"}, Watch: "install-to-disk.service",
			Check: "install-to-disk-done", Prev: wire.PhaseBootkubeDone},
	}
}

// mcdFirstboot applies the first MachineConfig on the installed system's first boot and
// reboots the node (machine-config-operator at 7ff337a4,
// templates/common/_base/units/machine-config-daemon-firstboot.service.yaml lines 4-15: a
// oneshot conditioned on /etc/ignition-machine-config-encapsulated.json,
// Before=kubelet-dependencies.target, which crio.service follows, crio.service.yaml
// 05-mco-ordering.conf; pkg/daemon/daemon.go RunFirstbootCompleteMachineconfig reboots). The
// import is ordered after it, so the reboot never cuts an import off and the MCD's podman
// never writes the store alongside it; while it is skipped (no encapsulated config: a later
// boot) the import starts at once.
const mcdFirstboot = "machine-config-daemon-firstboot.service"

// diskPhases are reported by the installed system, in order. There bootkube.service is the
// installer's post-reboot service (a oneshot that approves the CSRs, waits for the cluster
// version and removes the bootstrap leftovers last).
func diskPhases() []phaseUnit {
	return []phaseUnit{
		{Phase: wire.PhaseRebootedFromDisk, Check: "from-disk"},
		// Upstream pulls the precache list into the shared store with podman (lifecycle-agent
		// precache); the factory has no registry, so the images come off the data disk. The
		// import starts once the MCD's first boot is over (mcdFirstboot) and holds back CRI-O
		// and the kubelet until the store is complete. With a separate container-storage
		// partition the store must be the partition's, the one CRI-O reads, never the root
		// directory beneath the mount point.
		{Phase: wire.PhaseImagesImported, After: []string{mcdFirstboot}, Before: []string{"crio.service", "kubelet.service"},
			Check: "import-images", Prev: wire.PhaseRebootedFromDisk, MountsFor: []string{"/var/lib/containers"}},
		{Phase: wire.PhaseAPIUp, After: []string{"kubelet.service"}, Check: "api-readyz", Prev: wire.PhaseImagesImported},
		{Phase: wire.PhaseBootstrapComplete, After: []string{"bootkube.service"}, Watch: "bootkube.service",
			Check: "bootstrap-cleaned", Prev: wire.PhaseAPIUp},
		{Phase: wire.PhaseInstallComplete, After: []string{"bootkube.service", "kubelet.service"},
			Check: "install-complete", Prev: wire.PhaseBootstrapComplete},
		// Every later boot (validate's) sends the node's facts and boot-complete, as the
		// conformance OS's init does.
		{Phase: wire.PhaseBootComplete, Check: "boot-report", EveryBoot: true},
	}
}

// unitText is p's systemd unit. It is a simple service: a oneshot would hold up
// multi-user.target for the whole bootstrap.
func (p phaseUnit) unitText(stamps string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[Unit]\nDescription=snofactory: report the install phase %s to the factory\n", p.Phase)
	if len(p.After) > 0 {
		fmt.Fprintf(&b, "After=%s\n", strings.Join(p.After, " "))
	}
	if len(p.Before) > 0 {
		fmt.Fprintf(&b, "Before=%s\n", strings.Join(p.Before, " "))
	}
	if len(p.MountsFor) > 0 {
		fmt.Fprintf(&b, "RequiresMountsFor=%s\n", strings.Join(p.MountsFor, " "))
	}
	if p.EveryBoot {
		stamps = liveStamps
	}
	kind := "simple"
	if len(p.Before) > 0 {
		kind = "oneshot"
	}
	fmt.Fprintf(&b, "ConditionPathExists=!%s/%s\n\n[Service]\nType=%s\nExecStart=%s --stamps %s", stamps, p.Phase, kind, PhaseScript, stamps)
	if p.Prev != "" {
		fmt.Fprintf(&b, " --prev %s", p.Prev)
	}
	if p.Watch != "" {
		fmt.Fprintf(&b, " --watch %s", p.Watch)
	}
	fmt.Fprintf(&b, " %s %s\n\n[Install]\nWantedBy=multi-user.target\n", p.Phase, p.Check)
	return b.String()
}

// phaseButane adds the script and the units of phases to b.
func phaseButane(b butane, phases []phaseUnit, stamps string) butane {
	t := true
	b.Storage = &butaneStorage{Files: []butaneFile{{Path: PhaseScript, Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: phaseScript}}}}
	b.Systemd = &butaneSystemd{}
	for _, p := range phases {
		b.Systemd.Units = append(b.Systemd.Units, butaneUnit{Name: p.unitName(), Enabled: &t, Contents: p.unitText(stamps)})
	}
	return b
}

// phasesManifest is the MachineConfig with the installed system's phase units.
func phasesManifest(variant string) (extraManifest, error) {
	mc := phaseButane(masterMC(variant, PhasesMachineConfig), diskPhases(), diskStamps)
	t := true
	mc.Storage.Files = append(mc.Storage.Files, butaneFile{Path: FactoryScript, Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: factoryScript}})
	mc.Systemd.Units = append(mc.Systemd.Units, butaneUnit{Name: FactoryUnit, Enabled: &t, Contents: factoryUnitText()})
	doc, err := translateOwn(PhasesMachineConfig, mc, false)
	if err != nil {
		return extraManifest{}, err
	}
	return machineConfigManifest(PhasesMachineConfig, "install-phases", doc)
}

// withLivePhases returns the installer's bootstrap-in-place config ign with everything render
// adds to the live system: the phase script and units and, when live is valid, the
// relocation address script and unit. The installer's own entries are kept as they are; one
// of ours at a path or unit name the installer already uses is an error.
func withLivePhases(ign []byte, live netip.Prefix) ([]byte, error) {
	version, err := configVersion(ign)
	if err != nil {
		return nil, &ReportError{What: installerIgnition, Err: err}
	}
	s, ok := specs[version]
	if !ok {
		return nil, &ReportError{What: installerIgnition, Err: fmt.Errorf("ignition spec %s is not one render can add to (%s)", version, strings.Join(specVersions(), ", "))}
	}
	own, err := translateOwn("live system units", liveButane(s.fcos, live), false)
	if err != nil {
		return nil, err
	}
	return appendEntries(ign, own)
}

// liveButane is what render adds to the live system, as one Butane config, so the
// installer's config is merged, validated and written once.
func liveButane(fcos string, live netip.Prefix) butane {
	b := phaseButane(butane{Variant: "fcos", Version: fcos}, livePhases(), liveStamps)
	if live.IsValid() {
		a := liveAddressButane(fcos, live)
		b.Storage.Files = append(b.Storage.Files, a.Storage.Files...)
		b.Systemd.Units = append(b.Systemd.Units, a.Systemd.Units...)
	}
	return b
}

// appendEntries appends extra's storage.files and systemd.units (the same shape in every
// 3.x spec) to base's, refusing a path or unit name base already has. Numbers keep their
// spelling; keys come out sorted.
func appendEntries(base, extra []byte) ([]byte, error) {
	var b, e map[string]any
	if err := decodeJSON(base, &b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", installerIgnition, err)
	}
	if err := decodeJSON(extra, &e); err != nil {
		return nil, fmt.Errorf("reading the live system units: %w", err)
	}
	for _, sec := range []struct{ section, list, key string }{{"storage", "files", "path"}, {"systemd", "units", "name"}} {
		add := listAt(e, sec.section, sec.list)
		if len(add) == 0 {
			continue
		}
		have := listAt(b, sec.section, sec.list)
		for _, a := range add {
			for _, h := range have {
				if k := field(a, sec.key); field(h, sec.key) == k {
					return nil, fmt.Errorf("%s already has %s.%s entry %v; render would add its own", installerIgnition, sec.section, sec.list, k)
				}
			}
		}
		parent, _ := b[sec.section].(map[string]any)
		if parent == nil {
			parent = map[string]any{}
			b[sec.section] = parent
		}
		parent[sec.list] = append(have, add...)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", installerIgnition, err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

func decodeJSON(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// listAt is cfg[section][list] as a list; nil when absent.
func listAt(cfg map[string]any, section, list string) []any {
	s, _ := cfg[section].(map[string]any)
	l, _ := s[list].([]any)
	return l
}

// field is v[key] when v is an object.
func field(v any, key string) any {
	m, _ := v.(map[string]any)
	return m[key]
}

// The live system carries the relocation address too. The bootstrap etcd takes the first
// address of the host inside the machine network as its member's peer and client address
// (cluster-etcd-operator pkg/cmd/render/bootstrap_ip.go getBootstrapIP, run by the
// installer's bootkube.sh), and bootstrap-in-place carries that member's data to the disk
// (installer bootstrap-in-place.sh, master-update.fcc: etcd-data to /var/lib/etcd). The
// installed node's InternalIP is the relocation address, and nothing in the cluster moves an
// SNO's etcd member to another address, so the live system must already have it when
// bootkube renders etcd.
const (
	// LiveAddressScript is internalIPScript, run without arguments.
	LiveAddressScript = "/usr/local/bin/snofactory-internal-ip"
	// LiveAddressUnit runs it once the network is online, before bootkube.service renders
	// etcd and before the bootstrap kubelet starts.
	LiveAddressUnit = "snofactory-internal-ip.service"
)

// liveAddressUnitText is LiveAddressUnit for the address p. It is wanted by
// multi-user.target, not required by bootkube.service: should it fail, bootkube goes on with
// the address it finds and validate's etcd-endpoints check names both addresses, where a
// bootkube held back would only stall the install.
func liveAddressUnitText(p netip.Prefix) string {
	return "[Unit]\nDescription=snofactory: add the relocation address " + p.String() +
		" before the bootstrap etcd chooses its member address\n" +
		"Wants=network-online.target\nAfter=network-online.target\nBefore=kubelet.service bootkube.service\n\n" +
		"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=" + LiveAddressScript + "\n\n" +
		"[Install]\nWantedBy=multi-user.target\n"
}

// liveAddressButane is the live system's address script and unit, as Butane.
func liveAddressButane(fcos string, p netip.Prefix) butane {
	t := true
	return butane{Variant: "fcos", Version: fcos,
		Storage: &butaneStorage{Files: []butaneFile{{Path: LiveAddressScript, Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: internalIPScript(p)}}}},
		Systemd: &butaneSystemd{Units: []butaneUnit{{Name: LiveAddressUnit, Enabled: &t, Contents: liveAddressUnitText(p)}}},
	}
}

// bootstrapAddress is the relocation address the live system adds, once it is certain that
// the bootstrap etcd will choose it (cluster-etcd-operator pkg/cmd/render/bootstrap_ip.go
// getBootstrapIP, render.go getMachineCIDR and preferIPv6). The rule is the blueprint's
// (v1alpha1.BootstrapAddress), so that validate reports it first at the blueprint's fields;
// render applies it to the installer's defaults too.
func bootstrapAddress(c *OpenShift, r Relocation) (netip.Prefix, error) {
	machine, service := c.MachineNetwork, c.ServiceNetwork
	if len(machine) == 0 {
		machine = defaultMachineNetwork
	}
	if len(service) == 0 {
		service = defaultServiceNetwork
	}
	p, err := v1alpha1.BootstrapAddress(machine, service, r.InternalIP)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("relocation.internalIP: %w", err)
	}
	return p, nil
}
