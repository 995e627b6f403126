package systemdsite_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// The demo pipeline on the systemd OS installed as RHCOS is, and its seed at a site:
// `snofactory build` of a copy of blueprints/demo.yaml whose source is the systemd live ISO
// runs install (the live installer writes the metal image; the disk's first boot runs
// Ignition on the config and reports install-complete from a systemd unit), validate (the
// unit reports the node's facts when asked, and validate checks them against the config:
// what Ignition wrote is there) and seal (the unit seals the running root with the coreos
// seal, which installs the site's reconfiguration unit, and powers off). Then the seed the
// build wrote boots at the test's site with every check of checkSeedSite. The install's first boot made a machine-id and host keys (what the install
// stage logged of install-complete), the seal cleared them (checkSeedSite), and the site's
// boot made new ones. It is the default run's site test on this OS: the seed a depot builds,
// not one sealed offline.
func TestSystemdDemoSeedAtSite(t *testing.T) {
	live := systemdLive(t, "installs, validates and seals the systemd OS in VMs, then boots its seed", false)
	ctx := t.Context()
	reg := registry.StartT(t, registry.Options{})
	image := reg.Ref("demo/hello:1.0")
	if _, err := registry.PushRandom(ctx, image); err != nil {
		t.Fatal(err)
	}
	// systemd, NetworkManager and podman need more than the busybox OS's 512 MiB, and TCG
	// boots them slowly.
	bp, err := testbin.CopyDemo(t.TempDir(), map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + live.ISO,
		"memory: 512MiB": "memory: 1024MiB", "boot: 5m": "boot: 20m", "install: 10m": "install: 30m"})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testbin.Binary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "build", bp, "--until", "seal", "--cache-dir", t.TempDir(), "--output-dir", out, "--progress", "plain")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("snofactory build of the demo on the systemd OS: %v\n%s\n%s", err, tail(b), consoles(out))
	}
	b, err = os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := pipeline.ReadRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != pipeline.StatusSucceeded {
		t.Errorf("build status %q, want %q", rec.Status, pipeline.StatusSucceeded)
	}
	ran := map[string]string{}
	for _, s := range rec.Stages {
		ran[s.Name] = s.Cache
	}
	for _, s := range []string{"install", "validate", "seal"} {
		if ran[s] != "miss" {
			t.Errorf("stage %s did not run (cache %q): %v", s, ran[s], ran)
		}
	}
	installed := installReport(t, filepath.Join(out, "logs", "install.log"))
	t.Run("install-first-boot", func(t *testing.T) { checkFirstBoot(t, installed) })
	t.Run("site", func(t *testing.T) {
		site := checkSeedSite(t, filepath.Join(out, "seal", "seed"))
		for _, k := range []string{"machine_id", "ssh_host_keys"} {
			if site[k] == "" || site[k] == installed[k] {
				t.Errorf("the site's first boot has %s %q, the install's first boot had %q: want a new one", k, site[k], installed[k])
			}
		}
	})
}

// installReport is what the installed node reported at install-complete, as the install
// stage logged it (details.KEY=VALUE fields of its "the installed node reported" line).
func installReport(t *testing.T, log string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`details\.([A-Za-z0-9_]+)=("(?:[^"\\]|\\.)*"|\S*)`)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="the installed node reported"`) {
			continue
		}
		d := map[string]string{}
		for _, m := range field.FindAllStringSubmatch(line, -1) {
			v := m[2]
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			d[m[1]] = v
		}
		return d
	}
	t.Fatalf("%s has no line of what the installed node reported:\n%s", log, tail(b))
	return nil
}

// consoles is every VM console log the build kept.
func consoles(out string) string {
	logs, _ := filepath.Glob(filepath.Join(out, "logs", "*console*"))
	var s strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		s.WriteString("--- " + filepath.Base(l) + " ---\n" + string(tail(b)) + "\n")
	}
	return s.String()
}

func tail(b []byte) []byte {
	if len(b) > 6000 {
		return b[len(b)-6000:]
	}
	return b
}
