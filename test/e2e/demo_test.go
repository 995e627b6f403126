package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// demoBlueprint copies the demo blueprint, points it at the conformance ISO and at an
// extra image pushed to a fresh local registry, and returns its path.
func demoBlueprint(t *testing.T) string {
	t.Helper()
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.StartT(t, registry.Options{})
	image := reg.Ref("demo/hello:1.0")
	pushRandom(t, image)
	bp, err := testbin.CopyDemo(t.TempDir(), map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + iso})
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

// TestDemoBuildsThroughPrecache runs the demo's pipeline up to precache for real and checks
// the products: the install ISO carries exactly the rendered config, the precache layout
// holds the extra image, and a second build is all cache hits.
func TestDemoBuildsThroughPrecache(t *testing.T) {
	bp := demoBlueprint(t)
	cache, out := t.TempDir(), t.TempDir()
	r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out, "--progress", "json")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	// --progress json is an RFC 7464 sequence: every record starts with RS.
	for _, rec := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(rec, "\x1e{") {
			t.Fatalf("not a JSON text sequence record: %q", rec)
		}
	}
	rec := loadRecord(t, out)
	want := []string{"resolve", "render", "live-iso", "precache"}
	if len(rec.Stages) != len(want) {
		t.Fatalf("stages: %+v", rec.Stages)
	}
	for i, s := range rec.Stages {
		if s.Name != want[i] || s.Cache != "miss" || len(s.Artifacts) == 0 {
			t.Errorf("stage %d: %+v", i, s)
		}
	}

	shown := runCLI(t, "iso", "show", filepath.Join(out, "live-iso", "live.iso"))
	rendered, err := os.ReadFile(filepath.Join(out, "render", "ignition", "config.ign"))
	if err != nil || shown.code != 0 || !bytes.Equal(bytes.TrimSpace([]byte(shown.stdout)), bytes.TrimSpace(rendered)) {
		t.Fatalf("the install ISO does not carry the rendered config (exit %d, %v)", shown.code, err)
	}
	if _, err := os.Stat(filepath.Join(out, "precache", "layout", "index.json")); err != nil {
		entries, _ := os.ReadDir(filepath.Join(out, "precache"))
		t.Fatalf("precache layout missing: %v (outputs: %v)", err, entries)
	}

	// The node side: the agent imports the data disk into containers-storage, and skopeo,
	// an independent client, finds the image there with the digest resolve pinned.
	storage := t.TempDir()
	graph, run := filepath.Join(storage, "graph"), filepath.Join(storage, "run")
	imp := runCLI(t, "agent", "import-images", "--disk", filepath.Join(out, "precache", "precache.tar"),
		"--scratch-dir", t.TempDir(), "--graph-root", graph, "--run-root", run, "--driver", "vfs")
	if imp.code != 0 {
		t.Fatalf("agent import-images: exit %d\n%s", imp.code, imp.stderr)
	}
	var report struct {
		Images []struct{ Ref, Digest string }
	}
	if err := json.Unmarshal([]byte(imp.stdout), &report); err != nil || len(report.Images) != 1 {
		t.Fatalf("import output %q: %v", imp.stdout, err)
	}
	imported := report.Images
	skopeo, err := exec.Command("skopeo", "inspect", "--format", "{{.Digest}}",
		"containers-storage:[vfs@"+graph+"+"+run+"]"+imported[0].Ref).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo inspect (install the Debian package skopeo): %v\n%s", err, skopeo)
	}
	lock, _ := os.ReadFile(filepath.Join(out, "resolve", "lock.json"))
	if d := strings.TrimSpace(string(skopeo)); d != imported[0].Digest || !strings.Contains(string(lock), d) {
		t.Fatalf("containers-storage holds %s, import said %s; lock: %s", d, imported[0].Digest, lock)
	}

	out2 := t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out2); r.code != 0 {
		t.Fatalf("second build: %s", r.stderr)
	}
	for _, s := range loadRecord(t, out2).Stages {
		if s.Cache != "hit" {
			t.Errorf("second build: %s was %s", s.Name, s.Cache)
		}
	}
}

// TestDemoPipelineISOBoots is the live-ISO acceptance test on the real pipeline: the demo
// blueprint, with a fragment writing a file whose content the test chose at random and a
// kernel argument it added under spec.liveISO, is built to the live-iso stage; the install
// ISO boots under qemu and the guest reports over virtio-serial that Ignition wrote that
// file with that content and that the argument is on its command line. The demo's own
// files must be there too.
func TestDemoPipelineISOBoots(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	ctx, cancel := testContext(t)
	defer cancel()
	bp := demoBlueprint(t)
	token := conformance.File{Path: "/etc/snofactory/token-" + testbin.RandomHex(t, 4), Content: []byte(testbin.RandomHex(t, 16))}
	frag := "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: " + token.Path +
		"\n      mode: 0644\n      contents:\n        inline: " + string(token.Content) + "\n"
	if err := os.WriteFile(firstFragmentFile(t, bp), []byte(frag), 0o644); err != nil {
		t.Fatal(err)
	}
	karg := "snofactory.e2e=" + testbin.RandomHex(t, 6)
	f, err := os.OpenFile(bp, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "  liveISO:\n    kernelArguments:\n      append: [%s]\n", karg)
	f.Close()

	out := t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "live-iso", "--cache-dir", t.TempDir(), "--output-dir", out); r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	// Booted as install boots it, without a target disk: the live system reports and stays.
	var msgs []wire.Message
	console := filepath.Join(t.TempDir(), "console.log")
	if _, err := stages.Probe(ctx, stages.ProbeBoot{Name: "demo-live", ISO: filepath.Join(out, "live-iso", "live.iso"), NoReboot: true,
		MemoryMiB: 768, ConsoleLog: console}, func(m wire.Message) bool {
		msgs = append(msgs, m)
		return m.Phase == wire.PhaseBootComplete && m.Final()
	}); err != nil {
		b, _ := os.ReadFile(console)
		t.Fatalf("%v\n%s", err, b)
	}
	conformance.CheckReports(t, msgs, "ignition-applied", karg, token,
		conformance.File{Path: "/etc/snofactory/demo-site", Content: []byte("factory=demo\n")})
}
