package reconfigure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
)

// The medium is found by label among the candidate devices when it appears after a few
// polls; meanwhile the console says what is awaited every StatusInterval.
func TestMediumAppears(t *testing.T) {
	h := newHarness(t)
	devs := t.TempDir()
	os.WriteFile(filepath.Join(devs, "vda"), make([]byte, 64<<10), 0o644)                       // a disk, not an ISO
	os.WriteFile(filepath.Join(devs, "sr1"), mustRead(t, rawMedium(t, "OTHER", "x: 1")), 0o644) // an ISO of another label
	src := medium(t, "dhcp.yaml", nil)
	h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
	h.clock.OnSleep = func(n int, _ time.Time) {
		if n == 7 { // the technician inserts the medium
			os.WriteFile(filepath.Join(devs, "sr0"), mustRead(t, src), 0o644)
		}
	}
	o := h.options(oskind.CoreOS, "")
	o.MediumGlobs = []string{filepath.Join(devs, "by-label-SNOSITE"), filepath.Join(devs, "sr*"), filepath.Join(devs, "vd*")}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, h.console.String())
	}
	if res.Medium != filepath.Join(devs, "sr0") || res.Site != "dhcp" {
		t.Errorf("medium %s site %s", res.Medium, res.Site)
	}
	// Polls every 2s for 14s: status lines at 0s and 10s.
	waits := strings.Count(h.console.String(), "waiting for the site-config medium (label SNOSITE): insert it or see")
	if waits != 2 || !strings.Contains(h.console.String(), "; 10s of 10m\n") {
		t.Errorf("%d waiting lines in:\n%s", waits, h.console.String())
	}
	if m, ok := h.rep.step("network", wire.StatusOK); !ok || m.Details["address.eth0"] != "10.0.2.15/24" {
		t.Errorf("network report %v", m.Details)
	}
}

// A medium the image-based installer's config-image target made (label cluster-config,
// cluster-configuration/manifest.json) is found among the devices and applied.
func TestImageBasedMediumFound(t *testing.T) {
	h := newHarness(t)
	devs := t.TempDir()
	manifest := `{"api_version":1,"hostname":"sno-0042","raw_nm_state_config":"interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  ipv4:\n    enabled: true\n    dhcp: true\n"}`
	isotest.Write(t, filepath.Join(devs, "sr0"), siteconfig.ImageBasedVolumeLabel, map[string]string{"cluster-configuration/manifest.json": manifest})
	h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
	o := h.options(oskind.CoreOS, "")
	o.MediumGlobs = []string{filepath.Join(devs, "by-label-SNOSITE"), filepath.Join(devs, "sr*")}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, h.console.String())
	}
	if res.Medium != filepath.Join(devs, "sr0") || res.Site != "sno-0042" {
		t.Errorf("medium %s site %s", res.Medium, res.Site)
	}
	if got := h.read(t, "/etc/hostname"); strings.TrimSpace(got) != "sno-0042" {
		t.Errorf("hostname %q", got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A missing or malformed medium is a failed status that says what to do, and nothing is
// applied, so the seed boots as before.
func TestMediumProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		medium func(t *testing.T) string
		want   []string
	}{
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nothing-here") },
			[]string{"no site-config medium (volume label SNOSITE) after 1m", "nothing was applied", "site-config create"}},
		{"malformed yaml", func(t *testing.T) string {
			return rawMedium(t, siteconfig.VolumeLabel, "apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata: {name: x}\nspec:\n  hostname: a\n  hostnmae: b\n")
		}, []string{"not valid, nothing was applied; fix the medium and reboot", "site_config.yaml:6:3", "hostnmae"}},
		{"invalid value", func(t *testing.T) string {
			return medium(t, "dhcp.yaml", func(sc *siteconfig.SiteConfig) { sc.Spec.Hostname = "Bad_Host" })
		}, []string{"spec.hostname", "Bad_Host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			o := h.options(oskind.CoreOS, tc.medium(t))
			o.MediumTimeout = time.Minute
			_, err := Run(context.Background(), o)
			var se *StepError
			if !errors.As(err, &se) || se.Step != StepMedium {
				t.Fatalf("err %v, want a failed medium step", err)
			}
			final := h.rep.final()
			failed, _ := h.rep.step(StepMedium, wire.StatusFailed)
			for _, w := range tc.want {
				for what, s := range map[string]string{"error": err.Error(), "final report": final.Details[wire.DetailError],
					"step report": failed.Details[wire.DetailError], "console": h.console.String()} {
					if !strings.Contains(s, w) {
						t.Errorf("%s lacks %q: %s", what, w, s)
					}
				}
			}
			if final.Phase != wire.PhaseReconfigured || final.Status != wire.StatusFailed || final.Details["step"] != StepMedium {
				t.Errorf("final %+v", final)
			}
			if len(h.cmds.lines) > 0 {
				t.Errorf("commands ran: %q", h.cmds.lines)
			}
			entries, _ := os.ReadDir(h.root)
			if len(entries) != 0 {
				t.Errorf("the root was changed: %v", entries)
			}
		})
	}
}

// After a power cut (here: a failing step), the next run skips what was done for the same
// site config and does the rest; a different site config starts over.
func TestResume(t *testing.T) {
	h := newHarness(t)
	h.cmds.outputs["ip -o addr show"] = busyboxAddrShow
	site := medium(t, "site.yaml", nil)
	h.cmds.failOn = "hostname sno-0042"
	_, err := Run(context.Background(), h.options(oskind.CoreOS, site))
	var se *StepError
	if !errors.As(err, &se) || se.Step != "hostname" {
		t.Fatalf("first run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.root, DoneFile)); err == nil {
		t.Fatal("a failed run marked the reconfiguration done")
	}

	h.cmds.lines, h.rep.msgs = nil, nil
	res, err := Run(context.Background(), h.options(oskind.CoreOS, site))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Steps {
		if s.Skipped != (s.Name == "container-storage" || s.Name == "network") {
			t.Errorf("step %s skipped=%v", s.Name, s.Skipped)
		}
	}
	if m, ok := h.rep.step("network", wire.StatusInfo); !ok || m.Details["skipped"] == "" {
		t.Errorf("no skipped report for network: %v", h.rep.msgs)
	}
	if strings.Join(h.cmds.lines, "\n") != "hostname sno-0042" {
		t.Errorf("second run's commands %q, want the hostname only", h.cmds.lines)
	}

	// Another site config: everything again.
	h.cmds.lines = nil
	other := medium(t, "site.yaml", func(sc *siteconfig.SiteConfig) { sc.Spec.Hostname = "sno-0043" })
	res, err = Run(context.Background(), h.options(oskind.CoreOS, other))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Steps {
		if s.Skipped {
			t.Errorf("step %s skipped for a different site config", s.Name)
		}
	}
	if !strings.Contains(h.console.String(), "different site config") || h.read(t, "/etc/hostname") != "sno-0043\n" {
		t.Errorf("hostname %q; console:\n%s", h.read(t, "/etc/hostname"), h.console.String())
	}
	if got := h.read(t, DoneFile); strings.TrimSpace(got) != res.SiteDigest {
		t.Errorf("done file %q, want %s", got, res.SiteDigest)
	}
}

// A site config without the optional parts applies what it has and leaves the rest.
func TestMinimalSite(t *testing.T) {
	h := newHarness(t)
	h.cmds.outputs["ip -o addr show"] = ""
	if _, err := Run(context.Background(), h.options(oskind.CoreOS, medium(t, "dhcp.yaml", nil))); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"dns", "ntp", "pull-secret", "mirrors", "proxy", "ssh-keys"} {
		if m, _ := h.rep.step(step, wire.StatusOK); !strings.HasPrefix(m.Details["applied"], "nothing") {
			t.Errorf("step %s: %v", step, m.Details)
		}
	}
	for _, p := range []string{"/etc/resolv.conf", CoreOSPullSecretFile, MirrorsFile, CoreOSProxyFile, CoreOSKeysFile} {
		if _, err := os.Stat(filepath.Join(h.root, p)); err == nil {
			t.Errorf("%s written for a site config without it", p)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Target: oskind.CoreOS}, {Root: "/x", Target: "rhel"}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{40 * time.Second: "40s", 10 * time.Minute: "10m", 90 * time.Second: "1m30s", time.Hour: "1h"} {
		if got := shortDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}
