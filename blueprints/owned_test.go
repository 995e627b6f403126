package blueprints

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fragment is an openshift Butane fragment inline in the blueprint (from line 14, indented
// by 8) owning body, a storage: or systemd: section.
func fragment(body string) string {
	frag := "variant: openshift\nversion: 4.16.0\nmetadata:\n  name: 99-user\n  labels:\n    machineconfiguration.openshift.io/role: master\n" + body
	var b strings.Builder
	b.WriteString("  butane:\n    - inline: |\n")
	for _, l := range strings.Split(strings.TrimSuffix(frag, "\n"), "\n") {
		b.WriteString("        " + l + "\n")
	}
	return openshift("") + b.String()
}

func file(p string) string {
	return "storage:\n  files:\n    - path: " + p + "\n      mode: 0644\n      contents:\n        inline: x\n"
}

// A MachineConfig that owns a file the seal or the site hook changes degrades the pool at
// the site: the machine-config daemon compares every file of its config with the disk
// (machine-config-operator pkg/daemon/on_disk_validation.go checkV3Files). validate names
// the fragment's line, the steps and the fix.
func TestOwnedFilesRefused(t *testing.T) {
	dir := fixtureDir(t)
	for _, tc := range []struct {
		name, body string
		want       []string // "LINE:COL MESSAGE-FRAGMENT | HINT-FRAGMENT"; none when accepted
	}{
		{"a system-connections profile", file("/etc/NetworkManager/system-connections/ens1f0.nmconnection"),
			[]string{"22:21 MachineConfig 99-user owns /etc/NetworkManager/system-connections/ens1f0.nmconnection, which the seal's factory-etc step, the site's network step and the site's dns step change | the site config sets the node's network (spec.network); remove this file from the MachineConfig"}},
		{"the hostname", file("/etc/hostname"),
			[]string{"22:21 MachineConfig 99-user owns /etc/hostname, which the seal's factory-etc step and the site's hostname step change | remove this file"}},
		{"an SSH host key", file("/etc/ssh/ssh_host_ed25519_key"),
			[]string{"22:21 MachineConfig 99-user owns /etc/ssh/ssh_host_ed25519_key, which the site's ssh-host-keys step and the site's recert step change | recert replaces the SSH host keys"}},
		{"the machine ID", file("/etc/machine-id"),
			[]string{"22:21 MachineConfig 99-user owns /etc/machine-id, which the seal's machine-id step changes | the seal empties it"}},
		{"dnsmasq's overrides", file("/etc/default/sno_dnsmasq_configuration_overrides"),
			[]string{"22:21 MachineConfig 99-user owns /etc/default/sno_dnsmasq_configuration_overrides, which the site's dnsmasq step changes | "}},
		{"a unit the seal writes", "systemd:\n  units:\n    - name: snofactory-reconfigure.service\n      contents: |\n        [Unit]\n",
			[]string{"22:21 MachineConfig 99-user owns /etc/systemd/system/snofactory-reconfigure.service, which the seal's reconfigure-unit step changes | remove this file"}},
		{"two files, both reported", file("/etc/hostname") + "    - path: /etc/machine-id\n      contents:\n        inline: x\n",
			[]string{"22:21 MachineConfig 99-user owns /etc/hostname", "26:21 MachineConfig 99-user owns /etc/machine-id"}},
		{"an unrelated file", file("/etc/sysctl.d/99-user.conf"), nil},
		{"a file recert rewrites in the MachineConfigs too", file("/var/lib/kubelet/config.json"), nil},
		{"an unrelated unit", "systemd:\n  units:\n    - name: user.service\n      contents: |\n        [Unit]\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := fragment(tc.body)
			_, err := parseIn(t, dir, doc)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("rejected:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			ps := problems(t, err)
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tc.want), err)
			}
			for i, p := range ps {
				at, hint, _ := strings.Cut(tc.want[i], " | ")
				got := itoa(p.Line) + ":" + itoa(p.Col) + " " + p.Message
				if p.Path != "spec.butane[0].inline" || !strings.HasPrefix(got, at) || !strings.Contains(p.Hint, hint) {
					t.Errorf("problem %d:\n got %s %s (hint %q)\nwant %s...", i, p.Path, got, p.Hint, tc.want[i])
				}
			}
		})
	}
}

// A MachineConfig among the extra manifests is held to the same rule as a Butane fragment:
// each file it owns that the seal or the site changes is reported at its line in the
// manifest; other objects and unrelated MachineConfigs pass.
func TestOwnedFilesInManifestsRefused(t *testing.T) {
	dir := fixtureDir(t)
	mc := `apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 10-static-network
  labels:
    machineconfiguration.openshift.io/role: master
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
        - path: /etc/sysctl.d/99-ok.conf
          contents:
            source: data:,x
        - path: /etc/NetworkManager/system-connections/ens1f0.nmconnection
          mode: 384
          contents:
            source: data:,x
    systemd:
      units:
        - name: snofactory-reconfigure.service
          contents: "[Unit]\n"
`
	if err := os.MkdirAll(filepath.Join(dir, "mcs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mcs", "net.yaml"), []byte(mc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := parseIn(t, dir, openshift("    extraManifests: mcs\n"))
	if err == nil {
		t.Fatal("accepted a MachineConfig owning the site's NIC profile")
	}
	ps := problems(t, err)
	want := []string{
		"mcs/net.yaml:21:17: MachineConfig 10-static-network owns /etc/NetworkManager/system-connections/ens1f0.nmconnection, which the seal's factory-etc step",
		"mcs/net.yaml:27:17: MachineConfig 10-static-network owns /etc/systemd/system/snofactory-reconfigure.service, which the seal's reconfigure-unit step",
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i, p := range ps {
		if p.Path != "spec.openshift.extraManifests" || !strings.HasPrefix(p.Message, want[i]) || !strings.Contains(p.Hint, "remove this file from the MachineConfig") {
			t.Errorf("problem %d: %s %q (hint %q), want %s...", i, p.Path, p.Message, p.Hint, want[i])
		}
	}
	if !strings.Contains(ps[0].Hint, "spec.network") {
		t.Errorf("the NIC profile's hint %q does not point at the site config's network", ps[0].Hint)
	}
}
