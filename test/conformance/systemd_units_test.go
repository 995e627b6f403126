package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/agent"
)

// unitValues is every value of key in the unit text's section, split on spaces (systemd
// joins repeated list settings).
func unitValues(unit, section, key string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = line == "["+section+"]"
			continue
		}
		if k, v, ok := strings.Cut(line, "="); in && ok && k == key {
			out = append(out, strings.Fields(v)...)
		}
	}
	return out
}

// A seed of the metal image at its site reports boot-complete only once the site is
// applied: the seal enables the reconfiguration unit in multi-user.target, a target waits
// for what it wants (systemd.target(5), "Default Dependencies": Wants= complemented by
// After=) and a oneshot unit is up only once its command exited (systemd.service(5),
// Type=oneshot); the factory unit, whose sealed-root branch runs ready.sh, starts after the
// target. Were any link missing, boot-complete could reach seed boot before the site.
func TestSealedMetalReportsAfterTheSite(t *testing.T) {
	factory, err := systemdFiles.ReadFile("systemd/" + "metal/snofactory-factory.service")
	if err != nil {
		t.Fatal(err)
	}
	if after := unitValues(string(factory), "Unit", "After"); !slices.Contains(after, "multi-user.target") {
		t.Errorf("snofactory-factory.service is not ordered after multi-user.target: After=%q", after)
	}
	u := agent.ReconfigureUnit
	for _, tc := range []struct{ section, key, want string }{
		{"Install", "WantedBy", "multi-user.target"},
		{"Service", "Type", "oneshot"},
	} {
		if got := unitValues(u, tc.section, tc.key); !slices.Contains(got, tc.want) {
			t.Errorf("the reconfiguration unit's %s=%q lacks %s", tc.key, got, tc.want)
		}
	}
	for _, unit := range []string{u, string(factory)} {
		if got := unitValues(unit, "Unit", "DefaultDependencies"); slices.Contains(got, "no") {
			t.Errorf("a unit drops its default dependencies, so multi-user.target does not wait for it:\n%s", unit)
		}
	}
}

// factory.sh commands on a sealed root (a seed at its site) runs the readiness report,
// which says boot-complete, and takes no factory command: the agent is never asked to wait
// for one. The script runs with its node paths moved under a temporary root, a stand-in
// ready.sh and agent that record their calls, and the agent's port present.
func TestFactoryCommandsOnASealedRoot(t *testing.T) {
	script, err := systemdFiles.ReadFile("systemd/metal/factory.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	calls := filepath.Join(root, "calls")
	moved := string(script)
	for _, p := range []string{"/etc/snofactory/", "/usr/local/lib/snofactory/", "/usr/local/bin/snofactory", "/sys/class/virtio-ports/", "/run/snofactory"} {
		moved = strings.ReplaceAll(moved, p, root+p)
	}
	for p, body := range map[string]string{
		"etc/snofactory/sealed.json":           `{"version":1,"target":"coreos"}`,
		"sys/class/virtio-ports/vport0p1/name": "org.snofactory.agent.0\n",
		"usr/local/lib/snofactory/ready.sh":    "#!/bin/sh\necho \"ready.sh $*\" >>" + calls + "\n",
		"usr/local/bin/snofactory":             "#!/bin/sh\necho \"agent $*\" >>" + calls + "\n",
		"usr/local/lib/snofactory/factory.sh":  moved,
	} {
		if err := writeUnder(root, p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("sh", filepath.Join(root, "usr/local/lib/snofactory/factory.sh"), "commands").CombinedOutput()
	if err != nil {
		t.Fatalf("factory.sh commands on a sealed root: %v\n%s", err, out)
	}
	b, err := os.ReadFile(calls)
	if err != nil || string(b) != "ready.sh \n" {
		t.Errorf("factory.sh commands on a sealed root ran %q (%v), want the readiness report alone, with no argument", b, err)
	}
}
