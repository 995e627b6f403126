package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/vincent-petithory/dataurl"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/test/testbin"
)

// No cluster and no RHCOS node can run here. These tests check the units render adds
// against recorded formats: the recorded installer's bootstrap-in-place config (its unit
// names, from the stand-in's recording of the real installer), the Ignition spec packages
// and ignition-validate, and they run the phase script itself on this machine with the
// real snofactory agent, a real tar disk, and a file standing in for the virtio port.

// wantPhase is one phase the install stage follows, and where render must report it from.
type wantPhase struct {
	phase  string
	live   bool   // in the bootstrap-in-place config, else in the phases MachineConfig
	after  string // the installer unit the reporting unit starts after; "" for none
	watch  string // the installer unit whose failure fails the phase; "" for none
	prevOK string // the phase reported before it in the same system; "" for none
}

// The install stage's OpenShift plan, spelled out: renaming a phase must fail here.
var wantPhases = []wantPhase{
	{phase: "live-booted", live: true},
	{phase: "bootkube-done", live: true, after: "bootkube.service", watch: "bootkube.service", prevOK: "live-booted"},
	{phase: "written-to-disk", live: true, after: "install-to-disk.service", watch: "install-to-disk.service", prevOK: "bootkube-done"},
	{phase: "rebooted-from-disk"},
	{phase: "images-imported", after: "machine-config-daemon-firstboot.service", prevOK: "rebooted-from-disk"},
	{phase: "api-up", after: "kubelet.service", prevOK: "images-imported"},
	{phase: "bootstrap-complete", after: "bootkube.service", watch: "bootkube.service", prevOK: "api-up"},
	{phase: "install-complete", after: "bootkube.service", prevOK: "bootstrap-complete"},
}

func TestPhasePlanMatchesProtocol(t *testing.T) {
	var names []string
	for _, w := range wantPhases {
		names = append(names, w.phase)
	}
	if got := wire.OpenShiftInstallPhases(); !slices.Equal(got, names) {
		t.Fatalf("agent.OpenShiftInstallPhases() = %v, want %v", got, names)
	}
	var rendered []string
	for _, p := range append(livePhases(), diskPhases()...) {
		if !p.EveryBoot { // boot-complete ends later boots, not the install
			rendered = append(rendered, p.Phase)
		}
	}
	if !slices.Equal(rendered, names) {
		t.Fatalf("render reports %v, want %v", rendered, names)
	}
}

// execStart is a unit's ExecStart split into the script's options and arguments.
type execStart struct {
	script, stamps, prev, watch, phase, check string
}

func parseExecStart(t *testing.T, unit string) execStart {
	t.Helper()
	var line string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
	}
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("ExecStart %q", line)
	}
	e := execStart{script: f[0], phase: f[len(f)-2], check: f[len(f)-1]}
	for i := 1; i+1 < len(f)-2; i += 2 {
		switch f[i] {
		case "--stamps":
			e.stamps = f[i+1]
		case "--prev":
			e.prev = f[i+1]
		case "--watch":
			e.watch = f[i+1]
		default:
			t.Fatalf("ExecStart %q: unknown option %s", line, f[i])
		}
	}
	return e
}

// ignUnit is a systemd unit of an Ignition config of any 3.x spec (they all spell
// systemd.units alike); the configs were validated with their spec's package before.
type ignUnit struct {
	Name     string  `json:"name"`
	Enabled  *bool   `json:"enabled"`
	Contents *string `json:"contents"`
}

// unitsOf is a config's units by name.
func unitsOf(t *testing.T, raw []byte) map[string]ignUnit {
	t.Helper()
	var cfg struct {
		Systemd struct {
			Units []ignUnit `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	m := map[string]ignUnit{}
	for _, u := range cfg.Systemd.Units {
		m[u.Name] = u
	}
	return m
}

// fileEntry is the mode and content of the file at path in an Ignition config of any 3.x
// spec, gunzipped as Butane may have compressed it.
func fileEntry(t *testing.T, raw []byte, path string) (int, string) {
	t.Helper()
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Mode     int    `json:"mode"`
				Contents struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path != path {
			continue
		}
		d, err := dataurl.DecodeString(f.Contents.Source)
		if err != nil {
			t.Fatal(err)
		}
		data := d.Data
		if f.Contents.Compression == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		return f.Mode, string(data)
	}
	return 0, ""
}

func unitAfter(contents string) []string {
	var after []string
	for _, l := range strings.Split(contents, "\n") {
		if v, ok := strings.CutPrefix(l, "After="); ok {
			after = append(after, strings.Fields(v)...)
		}
	}
	return after
}

// Each phase's unit is in the right config, enabled, starts after the installer unit doing
// the phase's work, and calls the script with the install stage's exact phase name.
func TestOpenShiftPhaseUnits(t *testing.T) {
	out := renderTo(t, clusterOptions(t))
	files := readTree(t, out)
	ign := files[ConfigPath]
	if _, r, err := v32.Parse(ign); err != nil {
		t.Fatalf("config.ign: %v\n%s", err, r)
	}
	ignitionValidateAllowing(t, filepath.Join(out, ConfigPath), "has no install section")
	mcRel := "manifests/" + PhasesMachineConfig + ".yaml"
	mcIgn := assertMachineConfig(t, mcRel, files[mcRel], "3.4.0")
	live, disk := unitsOf(t, ign), unitsOf(t, mcIgn)

	// The live units follow units the installer's own config has.
	for _, installer := range []string{"bootkube.service", "install-to-disk.service"} {
		if _, ok := live[installer]; !ok {
			t.Fatalf("the recorded installer config has no %s to follow", installer)
		}
	}
	for name, raw := range map[string][]byte{"config.ign": ign, mcRel: mcIgn} {
		mode, got := fileEntry(t, raw, PhaseScript)
		if got != phaseScript || mode != 0o755 {
			t.Errorf("%s: %s (mode %o) is not the phase script", name, PhaseScript, mode)
		}
	}
	// Every boot after the install (validate's) reports the facts and boot-complete; its
	// stamp is per boot.
	if u, ok := disk["snofactory-phase-boot-complete.service"]; !ok || u.Contents == nil ||
		!strings.Contains(*u.Contents, "ConditionPathExists=!"+liveStamps+"/boot-complete\n") || !strings.Contains(*u.Contents, " boot-complete boot-report\n") {
		t.Errorf("no boot report unit on the installed system: %+v", u)
	}
	// The installed system takes the factory's commands after its final reports.
	if mode, got := fileEntry(t, mcIgn, FactoryScript); got != factoryScript || mode != 0o755 {
		t.Errorf("%s (mode %o) is not the factory script", FactoryScript, mode)
	}
	if u, ok := disk[FactoryUnit]; !ok || u.Enabled == nil || !*u.Enabled || u.Contents == nil ||
		!slices.Contains(unitAfter(*u.Contents), "snofactory-phase-install-complete.service") || !strings.Contains(*u.Contents, "ExecStart="+FactoryScript+"\n") {
		t.Errorf("no factory unit after install-complete on the installed system: %+v", u)
	}
	if _, ok := live[FactoryUnit]; ok {
		t.Errorf("the live system takes factory commands")
	}
	for _, w := range wantPhases {
		units, other, stamps := disk, live, diskStamps
		if w.live {
			units, other, stamps = live, disk, liveStamps
		}
		name := "snofactory-phase-" + w.phase + ".service"
		u, ok := units[name]
		if !ok {
			t.Errorf("%s: no unit %s", w.phase, name)
			continue
		}
		if _, dup := other[name]; dup {
			t.Errorf("%s: %s is in both systems", w.phase, name)
		}
		if u.Enabled == nil || !*u.Enabled || u.Contents == nil || !strings.Contains(*u.Contents, "WantedBy=multi-user.target") {
			t.Errorf("%s: %s is not enabled", w.phase, name)
			continue
		}
		if w.after != "" && !slices.Contains(unitAfter(*u.Contents), w.after) {
			t.Errorf("%s: %s does not start after %s:\n%s", w.phase, name, w.after, *u.Contents)
		}
		e := parseExecStart(t, *u.Contents)
		want := execStart{script: PhaseScript, stamps: stamps, prev: w.prevOK, watch: w.watch, phase: w.phase, check: e.check}
		if e != want {
			t.Errorf("%s: ExecStart %+v, want %+v", w.phase, e, want)
		}
		if !strings.Contains(phaseScript, "\ncheck_"+strings.ReplaceAll(e.check, "-", "_")+"() {") {
			t.Errorf("%s: the script has no check %s", w.phase, e.check)
		}
		if !strings.Contains(*u.Contents, "ConditionPathExists=!"+stamps+"/"+w.phase+"\n") {
			t.Errorf("%s: %s runs again after its phase was reported", w.phase, name)
		}
		// The import is done before the container runtime and kubelet start, so the cluster
		// finds the images in the store CRI-O reads and pulls none.
		if w.phase == "images-imported" && (!strings.Contains(*u.Contents, "Before=crio.service kubelet.service\n") || !strings.Contains(*u.Contents, "Type=oneshot\n")) {
			t.Errorf("images-imported does not hold back CRI-O and kubelet:\n%s", *u.Contents)
		}
	}
}

// mcoUnits are the ordering lines of the MCO's units the import is ordered against, as
// machine-config-operator renders them for a master at 7ff337a4 (only [Unit] ordering kept):
//   - templates/common/_base/units/machine-config-daemon-firstboot.service.yaml lines 4-11:
//     the first boot's MachineConfig and reboot, After the pull, Before kubelet-dependencies;
//   - templates/common/_base/units/machine-config-daemon-pull.service.yaml: After crio-wipe;
//   - templates/common/_base/units/crio.service.yaml 05-mco-ordering.conf: After
//     kubelet-dependencies.target;
//   - templates/master/01-master-kubelet/_base/units/kubelet.service.yaml lines 4-8: After
//     kubelet-dependencies.target and ostree-finalize-staged.service (and Requires crio).
//
// kubelet.service has no After=crio.service of its own: the least convenient variant, where
// nothing but the units themselves orders the import before either.
var mcoUnits = map[string]string{
	"machine-config-daemon-firstboot.service": "[Unit]\nAfter=machine-config-daemon-pull.service\nBefore=kubelet-dependencies.target\n",
	"machine-config-daemon-pull.service":      "[Unit]\nAfter=crio-wipe.service NetworkManager-wait-online.service network.service\n",
	"crio.service":                            "[Unit]\nAfter=kubelet-dependencies.target\n",
	"kubelet.service":                         "[Unit]\nAfter=kubelet-dependencies.target\nAfter=ostree-finalize-staged.service\n",
}

// orderGraph is systemd's ordering among units: before[a] holds every b that a's After=/
// Before= lines (or b's) put after a.
func orderGraph(t *testing.T, units map[string]string) map[string][]string {
	t.Helper()
	before := map[string][]string{}
	for name, text := range units {
		u := systemdUnit(t, text)
		for _, a := range u["Unit"]["After"] {
			before[a] = append(before[a], name)
		}
		before[name] = append(before[name], u["Unit"]["Before"]...)
	}
	return before
}

// precedes reports whether the graph orders a before b.
func precedes(before map[string][]string, a, b string) bool {
	seen := map[string]bool{}
	next := []string{a}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, m := range before[n] {
			if m == b {
				return true
			}
			if !seen[m] {
				seen[m] = true
				next = append(next, m)
			}
		}
	}
	return false
}

// The import unit of the installed system starts after the MCD's first-boot unit, which may
// reboot the node, and CRI-O and the kubelet after the import, with the MCO's own units beside
// render's; and no ordering cycle runs through it (systemd would break one by dropping a job,
// maybe the import's).
func TestImportOrderedAfterMCDFirstboot(t *testing.T) {
	files := readTree(t, renderTo(t, clusterOptions(t)))
	mcRel := "manifests/" + PhasesMachineConfig + ".yaml"
	units := map[string]string{}
	for name, u := range unitsOf(t, mcConfig(t, files[mcRel])) {
		if u.Contents != nil {
			units[name] = *u.Contents
		}
	}
	imp := "snofactory-phase-" + wire.PhaseImagesImported + ".service"
	text, ok := units[imp]
	if !ok {
		t.Fatalf("%s has no %s", mcRel, imp)
	}
	if got := systemdUnit(t, text)["Service"]["Type"]; !slices.Equal(got, []string{"oneshot"}) {
		t.Errorf("%s is Type=%v: only a oneshot holds the units after it until the import is done", imp, got)
	}
	// A separate container-storage partition (var-lib-containers.mount) is mounted before the
	// import writes the store, so the images land on it, where CRI-O reads them.
	if got := systemdUnit(t, text)["Unit"]["RequiresMountsFor"]; !slices.Equal(got, []string{"/var/lib/containers"}) {
		t.Errorf("%s has RequiresMountsFor=%v, want /var/lib/containers", imp, got)
	}
	for name, text := range mcoUnits {
		if _, clash := units[name]; clash {
			t.Fatalf("render's MachineConfig has its own %s", name)
		}
		units[name] = text
	}
	before := orderGraph(t, units)
	for _, o := range [][2]string{
		{mcdFirstboot, imp},
		{imp, "crio.service"},
		{imp, "kubelet.service"},
	} {
		if !precedes(before, o[0], o[1]) {
			t.Errorf("%s is not ordered before %s:\n%s", o[0], o[1], text)
		}
	}
	if precedes(before, imp, imp) {
		t.Errorf("an ordering cycle runs through %s", imp)
	}
	if precedes(before, "crio.service", mcdFirstboot) {
		t.Errorf("render orders CRI-O before the MCD's first boot, which upstream runs before it")
	}
}

// The phases MachineConfig is valid for every release's Butane variant; ignition-validate
// checks it too where its spec is one ignition-validate knows (up to 3.3.0).
func TestPhasesMachineConfigVersions(t *testing.T) {
	for _, tc := range []struct{ variant, ign string }{
		{"4.12.0", "3.2.0"}, {"4.14.0", "3.4.0"}, {"4.16.0", "3.4.0"}, {"4.19.0", "3.5.0"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			m, err := phasesManifest(tc.variant)
			if err != nil {
				t.Fatal(err)
			}
			if m.info.Name != PhasesMachineConfig || m.info.IgnitionVersion != tc.ign {
				t.Errorf("manifest %+v, want %s at Ignition %s", m.info, PhasesMachineConfig, tc.ign)
			}
			raw := assertMachineConfig(t, m.name, m.data, tc.ign)
			// The phases, and the factory's command taker.
			if units := unitsOf(t, raw); len(units) != len(diskPhases())+1 || units[FactoryUnit].Contents == nil {
				t.Errorf("%d units, want %d and %s", len(units), len(diskPhases())+1, FactoryUnit)
			}
			if tc.ign <= "3.3.0" {
				p := filepath.Join(t.TempDir(), "spec-config.ign")
				if err := os.WriteFile(p, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				ignitionValidate(t, p)
			}
		})
	}
}

func TestPhaseScriptSyntax(t *testing.T) {
	p := filepath.Join(t.TempDir(), "snofactory-phase")
	if err := os.WriteFile(p, []byte(phaseScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
}

// A config whose installer already has one of render's paths or units is refused, not
// overwritten; the live system's additions (phase units, and the relocation address unit when
// there is an address) go in together, the config's own entries kept.
func TestLivePhasesRefuseCollision(t *testing.T) {
	live := netip.MustParsePrefix("192.168.127.10/24")
	for _, tc := range []struct {
		name, base string
		live       netip.Prefix
		refused    string // what the error names; "" when accepted
		units      int
	}{
		{name: "the phase script", base: `"storage":{"files":[{"path":"` + PhaseScript + `","mode":493}]}`, refused: PhaseScript},
		{name: "the address script", base: `"storage":{"files":[{"path":"` + LiveAddressScript + `","mode":493}]}`, live: live, refused: LiveAddressScript},
		{name: "the address unit", base: `"systemd":{"units":[{"name":"` + LiveAddressUnit + `"}]}`, live: live, refused: LiveAddressUnit},
		{name: "the address unit name, without an address", base: `"systemd":{"units":[{"name":"` + LiveAddressUnit + `"}]}`, units: len(livePhases()) + 1},
		{name: "phases only", base: `"storage":{}`, units: len(livePhases())},
		{name: "phases and address", base: `"storage":{}`, live: live, units: len(livePhases()) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const own = `"passwd":{"users":[{"name":"core"}]}`
			got, err := withLivePhases([]byte(`{"ignition":{"version":"3.2.0"},`+own+`,`+tc.base+`}`), tc.live)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("withLivePhases over a config that has %s: %v", tc.refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			units := unitsOf(t, got)
			if len(units) != tc.units {
				t.Errorf("%d units after adding, want %d", len(units), tc.units)
			}
			if u, ok := units[LiveAddressUnit]; tc.live.IsValid() && (!ok || u.Contents == nil) {
				t.Errorf("no %s added for %s", LiveAddressUnit, tc.live)
			}
			if _, script := fileEntry(t, got, LiveAddressScript); (script != "") != tc.live.IsValid() {
				t.Errorf("%s added: %v, with address %v", LiveAddressScript, script != "", tc.live)
			}
			if !strings.Contains(string(got), own) {
				t.Errorf("the config's own entries were lost: %s", got)
			}
		})
	}
}

// precacheDisk writes a tar disk as seeds/contract/precachedisk lays it out, with the agent among
// its entries (first, or after a blob), and garbage after the agent when cut is set: the
// script must stop reading at the agent.
func precacheDisk(t *testing.T, agentBin string, agentFirst, cut bool) string {
	t.Helper()
	bin, err := os.ReadFile(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	blob := "blobs/sha256/" + strings.Repeat("ab", 32)
	if !agentFirst {
		add(blob, bytes.Repeat([]byte("layer"), 1000), 0o644)
	}
	add("agent/snofactory", bin, 0o755)
	if cut {
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		buf.Write(bytes.Repeat([]byte("not a tar header "), 300))
	} else {
		add(blob+"0", []byte("more"), 0o644)
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	buf.Write(make([]byte, 1<<20-buf.Len()%(1<<20)))
	p := filepath.Join(t.TempDir(), "precache.img")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The script, run here with the real agent: it takes the agent from the disk, reports once,
// stamps the phase, fails with the final phase and a log, and is silent without the port.
func TestPhaseScriptReports(t *testing.T) {
	bin, err := testbin.Binary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "snofactory-phase")
	if err := os.WriteFile(script, []byte(phaseScript), 0o755); err != nil {
		t.Fatal(err)
	}
	type want struct {
		phase  string
		status wire.Status
		detail string // a detail key the message must carry
	}
	cases := []struct {
		name       string
		args       []string
		agentFirst bool
		cut        bool
		live       bool // /run/ostree-live exists
		noPort     bool
		gather     bool // installer-gather.sh and the gather port are there
		preStamps  []string
		installed  bool // the install finished on an earlier boot (its disk stamp)
		factory    bool // the factory's command taker is installed
		rc         int
		msgs       []want
		stamp      string
	}{
		{name: "live-booted", args: []string{"live-booted", "always"}, agentFirst: true, cut: true,
			msgs: []want{{"live-booted", wire.StatusOK, ""}}, stamp: "live-booted"},
		{name: "agent after a blob", args: []string{"live-booted", "always"},
			msgs: []want{{"live-booted", wire.StatusOK, ""}}, stamp: "live-booted"},
		{name: "already reported", args: []string{"live-booted", "always"}, preStamps: []string{"live-booted"}},
		{name: "rebooted-from-disk", args: []string{"--prev", "x", "rebooted-from-disk", "from-disk"}, preStamps: []string{"x"},
			msgs: []want{{"rebooted-from-disk", wire.StatusOK, "firmware"}}, stamp: "rebooted-from-disk"},
		{name: "booted the live system again", args: []string{"rebooted-from-disk", "from-disk"}, live: true, rc: 1,
			msgs: []want{{"rebooted-from-disk", wire.StatusFailed, wire.DetailLog}, {"install-complete", wire.StatusFailed, wire.DetailLog}}, stamp: "failed"},
		{name: "a failure sends the log bundle first", args: []string{"rebooted-from-disk", "from-disk"}, live: true, rc: 1, gather: true,
			msgs: []want{{"rebooted-from-disk", wire.StatusFailed, wire.DetailLog}, {"install-complete", wire.StatusFailed, wire.DetailLog}}, stamp: "failed"},
		{name: "an earlier phase failed", args: []string{"--prev", "bootkube-done", "written-to-disk", "always"}, preStamps: []string{"failed"}},
		{name: "no agent port", args: []string{"live-booted", "always"}, noPort: true},
		// The data disk here holds no image layout: the import fails, and so does the install,
		// with the import's log (the import itself is tested in seeds/node/imageimport).
		{name: "images-imported from a broken data disk", args: []string{"--prev", "rebooted-from-disk", "images-imported", "import-images"},
			preStamps: []string{"rebooted-from-disk"}, rc: 1,
			msgs: []want{{"images-imported", wire.StatusFailed, wire.DetailLog}, {"install-complete", wire.StatusFailed, wire.DetailLog}}, stamp: "failed"},
		// A boot after the install sends the facts and boot-complete; the install's own boot
		// does not.
		{name: "boot report after the install", args: []string{"boot-complete", "boot-report"}, installed: true,
			msgs: []want{{"facts", wire.StatusInfo, ""}, {"boot-complete", wire.StatusOK, "mode"}}, stamp: "boot-complete"},
		{name: "no boot report during the install", args: []string{"boot-complete", "boot-report"}},
		// With the factory's command taker there, the final report says the node takes
		// commands next, and marks it for snofactory-factory.
		{name: "boot report offers commands", args: []string{"boot-complete", "boot-report"}, installed: true, factory: true,
			msgs: []want{{"facts", wire.StatusInfo, ""}, {"boot-complete", wire.StatusOK, wire.DetailCommands}}, stamp: "boot-complete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			stamps, root, run := filepath.Join(dir, "stamps"), filepath.Join(dir, "root"), filepath.Join(dir, "run")
			port := filepath.Join(dir, "port")
			for _, d := range []string{stamps, filepath.Join(root, "run"), filepath.Join(dir, "sys")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			touch(t, port)
			for _, s := range c.preStamps {
				touch(t, filepath.Join(stamps, s))
			}
			if c.live {
				touch(t, filepath.Join(root, "run", "ostree-live"))
			}
			diskStamps := filepath.Join(dir, "disk-stamps")
			if c.installed {
				os.MkdirAll(diskStamps, 0o755)
				touch(t, filepath.Join(diskStamps, "install-complete"))
			}
			cmd := exec.Command(script, append([]string{"--stamps", stamps}, c.args...)...)
			cmd.Env = append(os.Environ(), "SNOFACTORY_ROOT="+root, "SNOFACTORY_RUN="+run, "SNOFACTORY_SYS="+filepath.Join(dir, "sys"),
				"SNOFACTORY_DISK_STAMPS="+diskStamps,
				"SNOFACTORY_AGENT_STATE="+filepath.Join(dir, "state"), "SNOFACTORY_POLL=0.1",
				"SNOFACTORY_PRECACHE_DISK="+precacheDisk(t, bin, c.agentFirst, c.cut))
			if !c.noPort {
				cmd.Env = append(cmd.Env, "SNOFACTORY_PORT="+port)
			}
			factory := filepath.Join(dir, "none")
			if c.factory {
				factory = filepath.Join(dir, "snofactory-factory")
				os.WriteFile(factory, []byte("#!/bin/sh\n"), 0o755)
			}
			cmd.Env = append(cmd.Env, "SNOFACTORY_FACTORY="+factory)
			gatherDev := filepath.Join(dir, "gather-port")
			if c.gather {
				// installer-gather.sh writes its bundle to $TAR_FILE; the bundle must reach the
				// port before the failure is reported (the port file is written first).
				gather := filepath.Join(dir, "installer-gather.sh")
				os.WriteFile(gather, []byte("#!/bin/sh\n[ \"$1 $2\" = \"--id snofactory\" ] || exit 3\necho bundle-of-logs >\"$TAR_FILE\"\n"), 0o755)
				vp := filepath.Join(dir, "sys", "class", "virtio-ports", "vport1p2")
				os.MkdirAll(vp, 0o755)
				os.WriteFile(filepath.Join(vp, "name"), []byte(wire.GatherPortName+"\n"), 0o644)
				touch(t, gatherDev)
				cmd.Env = append(cmd.Env, "SNOFACTORY_GATHER="+gather, "SNOFACTORY_GATHER_DEV="+gatherDev)
			} else {
				cmd.Env = append(cmd.Env, "SNOFACTORY_GATHER="+filepath.Join(dir, "none"))
			}
			out, err := cmd.CombinedOutput()
			rc := 0
			if err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatal(err)
				}
				rc = ee.ExitCode()
			}
			if rc != c.rc {
				t.Fatalf("exit status %d, want %d\n%s", rc, c.rc, out)
			}
			if c.gather {
				if b, err := os.ReadFile(gatherDev); err != nil || string(b) != "bundle-of-logs\n" {
					t.Errorf("gather port = %q, %v; want the log bundle", b, err)
				}
			}
			got := readMessages(t, port)
			if len(got) != len(c.msgs) {
				t.Fatalf("%d messages, want %d: %+v\n%s", len(got), len(c.msgs), got, out)
			}
			for i, w := range c.msgs {
				m := got[i]
				if m.Phase != w.phase || m.Status != w.status || (w.detail != "" && m.Details[w.detail] == "") {
					t.Errorf("message %d: %s %s %v, want %s %s with %q", i, m.Phase, m.Status, m.Details, w.phase, w.status, w.detail)
				}
				if w.status == wire.StatusFailed && m.Details[wire.DetailError] == "" {
					t.Errorf("message %d: a failure without %s", i, wire.DetailError)
				}
			}
			if c.stamp != "" {
				if _, err := os.Stat(filepath.Join(stamps, c.stamp)); err != nil {
					t.Errorf("no stamp %s: %v", c.stamp, err)
				}
			}
			if _, err := os.Stat(filepath.Join(run, "commands")); (err == nil) != c.factory {
				t.Errorf("commands marker: %v, want it only with the factory's command taker", err)
			}
			_, err = os.Stat(filepath.Join(run, "bin", "snofactory"))
			if extracted := err == nil; extracted != (len(c.msgs) > 0) {
				t.Errorf("agent extracted: %v, want %v", extracted, len(c.msgs) > 0)
			}
		})
	}
}

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readMessages decodes what the agent wrote to the port file.
func readMessages(t *testing.T, port string) []wire.Message {
	t.Helper()
	b, err := os.ReadFile(port)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []wire.Message
	d := wire.NewDecoder(bytes.NewReader(b))
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			t.Fatalf("port: %v\n%s", err, b)
		}
		msgs = append(msgs, m)
	}
}

// sealRun is one run of the seal script with the real agent on a tree shaped like a node.
type sealRun struct {
	dir, root, port, poweredOff, installed, log string
}

// runSealScript writes files (root-relative) under a fresh root and runs the seal script
// with req on the seal disk; with standins, the node's commands (oc, systemctl, crictl,
// podman, curl) are the recording stand-ins, whose log is run.log.
func runSealScript(t *testing.T, req wire.SealRequest, files map[string]string, standins bool) sealRun {
	t.Helper()
	bin, err := testbin.Binary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := sealRun{dir: dir, root: filepath.Join(dir, "root"), port: filepath.Join(dir, "port"), poweredOff: filepath.Join(dir, "powered-off"),
		installed: filepath.Join(dir, "usr", "local", "bin", "snofactory"), log: filepath.Join(dir, "commands.log")}
	script := filepath.Join(dir, "snofactory-seal")
	if err := os.WriteFile(script, []byte(sealScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		os.MkdirAll(filepath.Join(r.root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(r.root, p), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	disk, err := wire.EncodeSealRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	request := filepath.Join(dir, "seal.img")
	os.WriteFile(request, disk, 0o644)
	touch(t, r.port)
	env := []string{"SNOFACTORY_ROOT=" + r.root, "SNOFACTORY_SYS=" + filepath.Join(dir, "sys"),
		"SNOFACTORY_AGENT=" + r.installed, "SNOFACTORY_SEAL_REQUEST=" + request, "SNOFACTORY_PORT=" + r.port,
		"SNOFACTORY_AGENT_STATE=" + filepath.Join(dir, "state"), "SNOFACTORY_POWEROFF=touch " + r.poweredOff,
		"SNOFACTORY_PRECACHE_DISK=" + precacheDisk(t, bin, true, false)}
	if standins {
		stand := filepath.Join(dir, "standins")
		os.MkdirAll(stand, 0o755)
		if err := os.WriteFile(filepath.Join(stand, "standin"), []byte(standin), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"oc", "systemctl", "crictl", "podman", "curl", "rpm-ostree", "ostree"} {
			if err := os.Symlink("standin", filepath.Join(stand, c)); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, "PATH="+stand+":"+os.Getenv("PATH"), "STANDIN_LOG="+r.log, "STANDIN_ROOT="+r.root)
	}
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("seal script: %v\n%s", err, out)
	}
	return r
}

// The seal script, run here with the real agent on a tree shaped like a node: it installs
// the agent from the data disk where the site's reconfiguration runs it, seals the root as
// the request asks, reports, and powers off last.
func TestSealScript(t *testing.T) {
	r := runSealScript(t, wire.SealRequest{Version: wire.SealRequestVersion, Target: "coreos"}, map[string]string{"etc/machine-id": "0123\n"}, false)
	if fi, err := os.Stat(r.installed); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("agent not installed for the site: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.root, wire.SealedFile)); err != nil {
		t.Errorf("not sealed: %v", err)
	}
	msgs := readMessages(t, r.port)
	if len(msgs) != 1 || msgs[0].Phase != wire.PhaseSealed || msgs[0].Status != wire.StatusOK {
		t.Errorf("reports = %+v, want one sealed ok", msgs)
	}
	if _, err := os.Stat(r.poweredOff); err != nil {
		t.Error("the node was not powered off after sealing")
	}
}

// standin is a recording stand-in for the node commands an OpenShift seal runs (oc,
// systemctl, crictl, podman, curl): no OpenShift node runs here. It logs each command line and
// answers as the node would: a ready API, the cluster objects, pools whose machines are
// ready; setting the pull secret writes the placeholder where the MCO would, and recert
// (podman with RECERT_CONFIG) leaves its clean summary. Each answer imitates upstream,
// cited beside it; where upstream varies, it gives the least convenient form:
//   - oc ... -o json: kubectl's JSON printer (k8s.io/cli-runtime pkg/printers/json.go
//     JSONPrinter.PrintObj) indents by four spaces over many lines, with a final newline;
//     a list's items come in the API server's order (by name), not the order asked about.
//   - oc get --raw /readyz: the apiserver's healthz handler (k8s.io/apiserver
//     pkg/server/healthz/healthz.go handleRootHealth) answers "ok" without a newline.
//   - systemctl is-active UNIT: systemd src/systemctl/systemctl-is-active.c
//     verb_is_active prints the state and exits 0 for active, 3 otherwise.
//   - crictl ps -q / crictl pods -q: cri-tools cmd/crictl/container.go ListContainers and
//     sandbox.go OutputPodSandboxes print one full 64-hex ID a line, newest first (sorted by
//     creation time), so not in lexical order.
//   - etcd's /health: go.etcd.io/etcd server/etcdserver/api/etcdhttp/health.go
//     NewHealthHandler: {"health":"true","reason":""}.
//   - oc delete pods --field-selector=...: kubectl pkg/cmd/delete/delete.go DeleteResult
//     says "No resources found" on stderr and exits 0 when nothing matches.
//   - podman run --detach prints the new container's full ID (podman cmd/podman/containers/run.go).
//   - rpm-ostree status --json: rpm-ostree src/app/rpmostree-builtin-status.cxx
//     (json-glib's pretty printer, "key" : value) lists deployments in bootloader order
//     with more keys than the seal reads; after the MCD's first-boot rebase the booted
//     deployment is index 0 and the boot image's is index 1.
//   - ostree admin undeploy INDEX: ostree src/ostree/ot-admin-builtin-undeploy.c prints
//     "Deleted deployment CHECKSUM.SERIAL" and refuses an index out of range.
const standin = `#!/bin/sh
echo "$(basename "$0") $*" >>"$STANDIN_LOG"
case "$(basename "$0") $*" in
oc*--raw\ /readyz*) printf ok ;;
oc*clusterversion.config.openshift.io/version*)
	cat <<'JSON'
{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {
                "name": "version"
            },
            "spec": {
                "clusterID": "c1"
            },
            "status": {
                "desired": {
                    "version": "4.20.3"
                }
            }
        },
        {
            "apiVersion": "config.openshift.io/v1",
            "kind": "Infrastructure",
            "metadata": {
                "name": "cluster"
            },
            "status": {
                "infrastructureName": "seed-abcde"
            }
        },
        {
            "apiVersion": "v1",
            "data": {
                "install-config": "baseDomain: factory.example\nmetadata:\n  name: seed\n"
            },
            "kind": "ConfigMap",
            "metadata": {
                "name": "cluster-config-v1",
                "namespace": "kube-system"
            }
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
JSON
	;;
oc*get\ nodes*)
	cat <<'JSON'
{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "seed-node"
            },
            "status": {
                "addresses": [
                    {
                        "address": "192.168.127.10",
                        "type": "InternalIP"
                    },
                    {
                        "address": "seed-node",
                        "type": "Hostname"
                    }
                ]
            }
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
JSON
	;;
oc*secret/router-ca*) ;;
oc*delete\ pods*) echo "No resources found" >&2 ;;
oc*set\ data\ secret/pull-secret*)
	mkdir -p "$STANDIN_ROOT/var/lib/kubelet"
	cp "${8#--from-file=.dockerconfigjson=}" "$STANDIN_ROOT/var/lib/kubelet/config.json" ;;
oc*machineconfigpools*)
	cat <<'JSON'
{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {
                "name": "master"
            },
            "spec": {
                "configuration": {
                    "name": "rendered-master-b"
                }
            },
            "status": {
                "configuration": {
                    "name": "rendered-master-b"
                },
                "machineCount": 1,
                "readyMachineCount": 1
            }
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
JSON
	;;
oc*get\ machineconfigs*)
	cat <<'JSON'
{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {
                "name": "rendered-master-a"
            }
        },
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {
                "name": "rendered-master-b"
            }
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
JSON
	;;
rpm-ostree\ status\ --json)
	# The first boot's deployment (index 1) is still there after the MCD's rebase.
	cat <<'JSON'
{
  "deployments" : [
    {
      "id" : "rhcos-9e1b7c4d2f0a.0",
      "osname" : "rhcos",
      "serial" : 0,
      "checksum" : "9e1b7c4d2f0a",
      "booted" : true,
      "staged" : false,
      "pinned" : false,
      "unlocked" : "none",
      "requested-packages" : [ ]
    },
    {
      "id" : "rhcos-51c0ffee77aa.0",
      "osname" : "rhcos",
      "serial" : 0,
      "checksum" : "51c0ffee77aa",
      "booted" : false,
      "staged" : false,
      "pinned" : false,
      "unlocked" : "none",
      "requested-packages" : [ ]
    }
  ],
  "transaction" : null,
  "cached-update" : null,
  "update-driver" : null
}
JSON
	;;
ostree\ admin\ undeploy\ 1) echo "Deleted deployment 51c0ffee77aa.0" ;;
ostree\ admin\ undeploy*) echo "error: Out of range deployment index" >&2; exit 1 ;;
systemctl\ is-active*) echo active ;;
curl*/health) printf '%s' '{"health":"true","reason":""}' ;;
crictl\ ps*) printf '%s\n' ` + standinContainers + ` ;;
crictl\ pods*) printf '%s\n' ` + standinPods + ` ;;
podman\ run*--detach*) echo 6f1c0a9e5b2d4c3a8e7f6b5a4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c ;;
podman*RECERT_CONFIG=*)
	mkdir -p "$STANDIN_ROOT/etc/kubernetes" && echo "cluster_crypto: {}" >"$STANDIN_ROOT/etc/kubernetes/recert-seed-creation-summary.yaml" ;;
esac
exit 0
`

// The IDs crictl lists, newest first: not in lexical order (see standin).
const (
	standinContainers = "d25c7e0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d " +
		"1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e " +
		"a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6"
	standinPods = "8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a " +
		"05f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4"
)

// The seal script with an OpenShift request, run with the real agent against recording
// stand-ins: the node seals itself in lifecycle-agent's order and reports sealed.
func TestSealScriptOpenShift(t *testing.T) {
	r := runSealScript(t, wire.SealRequest{Version: wire.SealRequestVersion, Target: "openshift",
		RecertImage: "quay.io/edge-infrastructure/recert@sha256:1111", EtcdImage: "quay.io/openshift-release-dev/etcd@sha256:2222",
		RequiredFiles: []string{NodeIPHintFile}},
		map[string]string{"etc/machine-id": "0123\n", "var/lib/kubelet/config.json": `{"auths":{"quay.io":{"auth":"QlVJTEQ6c2VjcmV0"}}}`,
			"etc/kubernetes/manifests/etcd-pod.yaml": "etcd", NodeIPHintFile[1:]: "KUBELET_NODEIP_HINT=192.168.127.0\n"}, true)
	root, port, poweredOff, log := r.root, r.port, r.poweredOff, r.log
	msgs := readMessages(t, port)
	if len(msgs) != 1 || msgs[0].Phase != wire.PhaseSealed || msgs[0].Status != wire.StatusOK || msgs[0].Details["step.recert"] == "" {
		t.Fatalf("reports = %+v, want one sealed ok with the recert step", msgs)
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	at := func(prefix string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	last := -1
	for _, want := range []string{"oc --kubeconfig", "systemctl stop kubelet.service", "systemctl disable kubelet.service", "crictl ps -q",
		"crictl pods -q", "systemctl stop crio.service", "podman run --detach", "curl --silent --fail --max-time 5 http://localhost:2379/health",
		"podman run --rm --replace --name snofactory-recert", "systemctl enable snofactory-reconfigure.service"} {
		i := at(want)
		if i <= last {
			t.Fatalf("%q at %d, want after %d:\n%s", want, i, last, b)
		}
		last = i
	}
	// Every container crictl listed is stopped (lifecycle-agent lca-cli/ops/ops.go
	// StopClusterServices: crictl stop --timeout 5 for each, in any order) between the
	// listing and the sandboxes, and every sandbox removed before CRI-O stops.
	ps, pods, crio := at("crictl ps -q"), at("crictl pods -q"), at("systemctl stop crio.service")
	for _, id := range strings.Fields(standinContainers) {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "crictl stop") && strings.Contains(l, id) })
		if i < ps || i > pods {
			t.Errorf("container %s stopped at line %d, want between %d and %d:\n%s", id, i, ps, pods, b)
		}
	}
	for _, id := range strings.Fields(standinPods) {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "crictl rmp") && strings.Contains(l, id) })
		if i < pods || i > crio {
			t.Errorf("sandbox %s removed at line %d, want between %d and %d:\n%s", id, i, pods, crio, b)
		}
	}
	// A MachineConfig owns the kubelet's pull secret file: it stays, holding the placeholder
	// the MCO rolled out (lifecycle-agent seedgen_controller.go waitForPullSecretOverride).
	if b, err := os.ReadFile(filepath.Join(root, "var/lib/kubelet/config.json")); err != nil || !bytes.Contains(b, []byte(`"username":"empty"`)) {
		t.Errorf("the kubelet's pull secret file after the seal: %q, %v; want the placeholder", b, err)
	}
	// The boot image's deployment, whose /etc holds the first config, is undeployed.
	if at("ostree admin undeploy 1") < 0 || at("ostree admin undeploy 0") >= 0 {
		t.Errorf("undeploys: want only the non-booted deployment (index 1):\n%s", b)
	}
	if _, err := os.Stat(poweredOff); err != nil {
		t.Error("the node was not powered off after sealing")
	}
}

// The factory script, with the real agent on a pseudo-terminal standing in for the agent
// port: the test is the host. It asks before each command and says how the last one went;
// freeze and thaw go through every filesystem in order and back; report sends the facts
// and boot-complete; seal hands the request to the seal script. A freeze that fails says
// where, and leaves nothing frozen; poweroff ends it.
func TestFactoryScript(t *testing.T) {
	bin, err := testbin.Binary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "snofactory-factory")
	if err := os.WriteFile(script, []byte(factoryScript), 0o755); err != nil {
		t.Fatal(err)
	}
	type step struct {
		send     wire.Command
		wantLast string   // the ask after it: its last detail ("" when the script ends)
		phases   []string // what the node reports before that ask
	}
	seal := &wire.SealRequest{Version: wire.SealRequestVersion, Target: "openshift", RecertImage: "r", EtcdImage: "e"}
	cases := []struct {
		name       string
		failFreeze string // the filesystem fsfreeze fails on
		steps      []step
		freezes    string
		sealed     bool
		poweredOff bool
	}{
		{name: "freeze, thaw, report, seal", steps: []step{
			{send: wire.Command{Name: wire.CommandFreeze}, wantLast: "freeze:ok"},
			{send: wire.Command{Name: wire.CommandThaw}, wantLast: "thaw:ok"},
			{send: wire.Command{Name: wire.CommandReport}, wantLast: "report:ok", phases: []string{wire.PhaseFacts, wire.PhaseBootComplete}},
			{send: wire.Command{Name: wire.CommandSeal, Seal: seal}},
		}, freezes: "--freeze /boot,--freeze /sysroot,--unfreeze /sysroot,--unfreeze /boot,", sealed: true},
		{name: "a freeze that fails", failFreeze: "/sysroot", steps: []step{
			{send: wire.Command{Name: wire.CommandFreeze}, wantLast: "freeze:failed"},
			{send: wire.Command{Name: wire.CommandPoweroff}},
		}, freezes: "--freeze /boot,--freeze /sysroot,--unfreeze /boot,", poweredOff: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			run, stand := filepath.Join(dir, "run"), filepath.Join(dir, "standins")
			for _, d := range []string{run, stand, filepath.Join(dir, "root")} {
				os.MkdirAll(d, 0o755)
			}
			touch(t, filepath.Join(run, "commands"))
			freezeLog, sealed, poweredOff := filepath.Join(dir, "freezes"), filepath.Join(dir, "sealed.json"), filepath.Join(dir, "powered-off")
			os.WriteFile(filepath.Join(stand, "fsfreeze"), []byte("#!/bin/sh\nprintf '%s %s,' \"$1\" \"$2\" >>"+freezeLog+
				"\n[ \"$1 $2\" = \"--freeze "+c.failFreeze+"\" ] && { echo 'Operation not supported' >&2; exit 1; }\nexit 0\n"), 0o755)
			sealScript := filepath.Join(stand, "seal")
			os.WriteFile(sealScript, []byte("#!/bin/sh\ncp \"$SNOFACTORY_SEAL_REQUEST\" "+sealed+"\n"), 0o755)
			host, guest := testbin.PTY(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := exec.CommandContext(ctx, script)
			cmd.Env = append(os.Environ(), "PATH="+stand+":"+os.Getenv("PATH"), "SNOFACTORY_PORT="+guest, "SNOFACTORY_RUN="+run,
				"SNOFACTORY_ROOT="+filepath.Join(dir, "root"), "SNOFACTORY_AGENT="+bin, "SNOFACTORY_AGENT_STATE="+filepath.Join(dir, "state"),
				"SNOFACTORY_SEAL="+sealScript, "SNOFACTORY_POWEROFF=touch "+poweredOff, "SNOFACTORY_POLL=0.1")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			d := wire.NewDecoder(host)
			next := func() wire.Message {
				m, err := d.Next()
				if err != nil {
					t.Fatalf("reading the port: %v\n%s", err, out.String())
				}
				return m
			}
			if m := next(); m.Phase != wire.PhaseAwaiting || m.Details[wire.DetailLast] != "" {
				t.Fatalf("first message %+v, want a plain ask", m)
			}
			for _, s := range c.steps {
				s.send.Version = wire.CommandVersion
				if err := wire.EncodeCommand(host, s.send); err != nil {
					t.Fatal(err)
				}
				if s.wantLast == "" {
					break
				}
				var phases []string
				m := next()
				for ; m.Phase != wire.PhaseAwaiting; m = next() {
					phases = append(phases, m.Phase)
					if m.Phase == wire.PhaseBootComplete && m.Details[wire.DetailCommands] != "1" {
						t.Errorf("boot-complete does not say the node takes commands: %v", m.Details)
					}
				}
				if fmt.Sprint(phases) != fmt.Sprint(s.phases) || m.Details[wire.DetailLast] != s.wantLast {
					t.Errorf("after %s: reports %v and an ask with last=%q, want %v and %q", s.send.Name, phases, m.Details[wire.DetailLast], s.phases, s.wantLast)
				}
				if strings.HasSuffix(s.wantLast, ":failed") && !strings.Contains(m.Details[wire.DetailError], c.failFreeze+": Operation not supported") {
					t.Errorf("the failure says %q", m.Details[wire.DetailError])
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("factory script: %v\n%s", err, out.String())
			}
			if b, _ := os.ReadFile(freezeLog); string(b) != c.freezes {
				t.Errorf("fsfreeze calls %q, want %q", b, c.freezes)
			}
			if b, err := os.ReadFile(sealed); c.sealed && (err != nil || !strings.Contains(string(b), `"recertImage":"r"`)) {
				t.Errorf("the seal script got %q (%v)", b, err)
			}
			if _, err := os.Stat(poweredOff); (err == nil) != c.poweredOff {
				t.Errorf("powered off: %v, want %v", err == nil, c.poweredOff)
			}
		})
	}
}
