// Package node holds the scripts render installs on an OpenShift node; this test runs the
// phase script's image import against stand-ins of the units it must wait for.
package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// systemctlStandIn imitates `systemctl show -p ActiveState --value UNIT` (systemd
// src/systemctl/systemctl-show.c, show_one: with --value only the value is printed; a unit
// systemd does not know is shown all the same, ActiveState=inactive, exit 0). Each query
// takes the next state of $STATES/UNIT (one a line, the last one stays); a state written
// "activating rm" also removes the MCD's encapsulated config, as RunFirstbootCompleteMachineconfig
// does before it reboots (machine-config-operator pkg/daemon/daemon.go).
const systemctlStandIn = `#!/bin/sh
[ "$1 $2 $3 $4" = "show -p ActiveState --value" ] || { echo "systemctl stand-in: unexpected $*" >&2; exit 1; }
f=$STATES/$5
if [ ! -s "$f" ]; then
	echo inactive
	echo "systemctl $5 inactive" >>"$LOG"
	exit 0
fi
set -- $(head -n 1 "$f")
[ "$(wc -l <"$f")" -gt 1 ] && sed -i 1d "$f"
[ "${2:-}" = rm ] && rm -f "$ROOT/etc/ignition-machine-config-encapsulated.json"
echo "$1"
echo "systemctl $f $1" | sed "s|$STATES/||" >>"$LOG"
`

// agentStandIn logs each agent command; import-images prints a report shaped as the agent's
// (cmd/snofactory writeJSON of seeds/node/imageimport.Report, two-space indent).
const agentStandIn = `#!/bin/sh
echo "agent $*" >>"$LOG"
[ "$2" = import-images ] || exit 0
cat <<'EOF'
{
  "images": [
    {
      "ref": "registry.example.com/ocp/a@sha256:aa",
      "digest": "sha256:aa",
      "id": "1"
    },
    {
      "ref": "registry.example.com/ocp/b@sha256:bb",
      "digest": "sha256:bb",
      "id": "2"
    }
  ],
  "storage": {
    "config": "/etc/containers/storage.conf",
    "driver": "overlay",
    "graphRoot": "/var/lib/containers/storage",
    "runRoot": "/run/containers/storage"
  },
  "selinux": {
    "relabeled": false,
    "skipped": "this system has no SELinux policy (no /etc/selinux/config)"
  }
}
EOF
`

const firstboot = "machine-config-daemon-firstboot.service"

// The import waits until the MCD's first-boot unit can no longer reboot the node under it:
// while the unit runs (also after it renamed its config, when its reboot is under way) the
// agent is not started; it is once the unit is over or has nothing to do.
func TestImportWaitsForMCDFirstboot(t *testing.T) {
	tests := []struct {
		name         string
		states       []string // the unit's states, query by query
		encapsulated bool     // the MCD's first config is there at the start
		wantImport   bool
		wantAfter    string // the last unit state seen before the import
	}{
		{name: "applies, then ends without a reboot", states: []string{"inactive", "activating", "activating rm", "active"},
			encapsulated: true, wantImport: true, wantAfter: "active"},
		{name: "config renamed, reboot under way", states: []string{"activating", "activating rm", "activating", "activating", "deactivating", "active"},
			encapsulated: true, wantImport: true, wantAfter: "active"},
		{name: "not started yet", states: []string{"inactive", "inactive", "activating", "activating rm", "active"},
			encapsulated: true, wantImport: true, wantAfter: "active"},
		{name: "no first-boot config", wantImport: true, wantAfter: "inactive"},
		{name: "first boot failed", states: []string{"activating", "failed"}, encapsulated: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root, states, bin, stamps := filepath.Join(dir, "root"), filepath.Join(dir, "states"), filepath.Join(dir, "bin"), filepath.Join(dir, "stamps")
			log := filepath.Join(dir, "log")
			for _, d := range []string{root + "/etc", states, bin, stamps} {
				os.MkdirAll(d, 0o755)
			}
			os.WriteFile(filepath.Join(stamps, "rebooted-from-disk"), nil, 0o644)
			os.WriteFile(filepath.Join(bin, "systemctl"), []byte(systemctlStandIn), 0o755)
			os.WriteFile(filepath.Join(bin, "snofactory"), []byte(agentStandIn), 0o755)
			if len(tc.states) > 0 {
				os.WriteFile(filepath.Join(states, firstboot), []byte(strings.Join(tc.states, "\n")+"\n"), 0o644)
			}
			if tc.encapsulated {
				os.WriteFile(filepath.Join(root, "etc/ignition-machine-config-encapsulated.json"), []byte("{}"), 0o644)
			}
			disk := filepath.Join(dir, "precache.tar")
			os.WriteFile(disk, nil, 0o644)
			cmd := exec.Command("bash", "snofactory-phase.sh", "--stamps", stamps, "--prev", "rebooted-from-disk", "images-imported", "import-images")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log, "STATES="+states, "ROOT="+root,
				"SNOFACTORY_ROOT="+root, "SNOFACTORY_RUN="+filepath.Join(dir, "run"), "SNOFACTORY_SYS="+filepath.Join(dir, "sys"),
				"SNOFACTORY_AGENT="+filepath.Join(bin, "snofactory"), "SNOFACTORY_AGENT_STATE="+filepath.Join(dir, "state"),
				"SNOFACTORY_PORT="+filepath.Join(dir, "port"), "SNOFACTORY_PRECACHE_DISK="+disk, "SNOFACTORY_POLL=0",
				"SNOFACTORY_GATHER="+filepath.Join(dir, "none"), "SNOFACTORY_FACTORY="+filepath.Join(dir, "none"))
			out, err := cmd.CombinedOutput()
			b, _ := os.ReadFile(log)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			imp := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "agent agent import-images") })
			if !tc.wantImport {
				if err == nil || imp >= 0 || !strings.Contains(string(b), "error="+firstboot+" failed") {
					t.Fatalf("want the phase failed naming %s, no import; err %v, log:\n%s\n%s", firstboot, err, b, out)
				}
				return
			}
			if err != nil || imp < 1 {
				t.Fatalf("err %v, import at %d; log:\n%s\n%s", err, imp, b, out)
			}
			if want := "systemctl " + firstboot + " " + tc.wantAfter; lines[imp-1] != want {
				t.Errorf("the import followed %q, want %q; log:\n%s", lines[imp-1], want, b)
			}
			if len(tc.states) > 0 && strings.Count(string(b), "systemctl "+firstboot) != len(tc.states) {
				t.Errorf("the import did not wait through every state of %s; log:\n%s", firstboot, b)
			}
			if !strings.Contains(lines[imp], "--root "+root+" ") {
				t.Errorf("the import was not given the node's root: %s", lines[imp])
			}
			report := lines[len(lines)-1]
			for _, want := range []string{"--phase images-imported --status ok", "--detail images=2", "--detail storage=/var/lib/containers/storage",
				"--detail selinux=skipped: this system has no SELinux policy (no /etc/selinux/config)"} {
				if !strings.Contains(report, want) {
					t.Errorf("report %q lacks %q", report, want)
				}
			}
		})
	}
}
