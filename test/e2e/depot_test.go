package e2e

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/depot"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// depotOf writes three demo-derived blueprints and a depot file naming them: two share
// their image, the third has its own and fails in the guest on purpose. Three builds that
// need a VM are one more than the depot's two slots, so one waits for a slot.
func depotOf(t *testing.T, reg *registry.Registry) string {
	t.Helper()
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	shared, own := reg.Ref("depot/shared:1.0"), reg.Ref("depot/own:1.0")
	pushRandom(t, shared)
	pushRandom(t, own)
	dir := t.TempDir()
	var paths []string
	for _, b := range []struct{ name, image string }{{"site-a", shared}, {"site-b", shared}, {"site-broken", own}} {
		bp, err := testbin.CopyDemo(filepath.Join(dir, b.name), map[string]string{testbin.DemoImage: b.image, testbin.DemoISOLine: "path: " + iso,
			"name: demo\n": "name: " + b.name + "\n"})
		if err != nil {
			t.Fatal(err)
		}
		if b.name == "site-broken" {
			withFragment(t, bp, "variant: fcos\nversion: 1.4.0\nsystemd:\n  units:\n    - name: broken.service\n      enabled: true\n      contents: |\n        [Service]\n        Type=oneshot\n        ExecStart=/bin/false\n        [Install]\n        WantedBy=multi-user.target")
		}
		paths = append(paths, bp)
	}
	file := filepath.Join(dir, "depot.yaml")
	doc := "apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: e2e\nspec:\n  slots:\n    vms: 2\n  blueprints:\n"
	for _, p := range paths {
		doc += "    - " + p + "\n"
	}
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestDepot runs a depot of three demo blueprints with 2 VM slots through seal, kills it
// with SIGKILL mid-run (no qemu may survive), runs it again to the end: the shared image
// was fetched once, the broken build is reported with its stage, the others have seeds,
// stages finished before the kill were not redone, and the HTML report draws its
// timeline in headless Chromium.
func TestDepot(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	reg := registry.StartT(t, registry.Options{})
	file := depotOf(t, reg)
	cache, out := t.TempDir(), t.TempDir()
	args := []string{"depot", "run", file, "--cache-dir", cache, "--output-dir", out, "--until", "seal"}

	// First run, killed once two VMs are running.
	cmd := exec.Command(snofactoryBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := testContext(t)
	defer cancel()
	// Two VMs at once is an event the depot reaches or not: wait for it, for the depot to
	// end early, or for the test's own deadline, never for a guess at how long it takes.
	if !waitUntil(ctx, func() bool { return countQemu(t, cache) >= 2 }, exited) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the depot never ran two factory VMs at once")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	// qemu dies with its parent (Pdeathsig); it may take a moment to be reaped.
	if !waitUntil(ctx, func() bool { return countQemu(t, cache) == 0 }, nil) {
		t.Fatalf("%d qemu processes outlived the killed depot", countQemu(t, cache))
	}
	killed, err := depot.ReadStatus(out)
	if err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, args...)
	if r.code != 1 {
		t.Fatalf("depot run: exit %d, want 1 (one build fails)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sum, err := depot.ReadStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	checkDepotBuilds(t, sum, killed, out)
	checkSharedFetchedOnce(t, reg)
	checkReportDrawn(t, filepath.Join(out, depot.HTMLFile), len(sum.Builds))
}

// waitUntil polls cond until it holds (true), ctx ends or done delivers (false).
func waitUntil(ctx context.Context, cond func() bool, done <-chan error) bool {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// countQemu counts the qemu processes whose command line names a file under dir (a
// depot's VMs use disks in its cache).
func countQemu(t *testing.T, dir string) int {
	out, _ := exec.Command("pgrep", "-f", "qemu-system-x86_64.*"+dir).Output()
	return len(strings.Fields(string(out)))
}

func checkDepotBuilds(t *testing.T, sum, killed *depot.Summary, out string) {
	t.Helper()
	done := map[string]bool{} // stage keys finished before the kill
	for _, b := range killed.Builds {
		for _, s := range b.Stages {
			if s.Error == "" {
				done[s.Key] = true
			}
		}
	}
	for _, b := range sum.Builds {
		switch b.Name {
		case "site-broken":
			if b.Status != depot.StatusFailed || b.FailedStage != "install" || !strings.Contains(b.Error, "broken.service") {
				t.Errorf("the broken build: %s at %q: %s", b.Status, b.FailedStage, b.Error)
			}
		default:
			if b.Status != depot.StatusSucceeded {
				t.Errorf("build %s: %s: %s", b.Name, b.Status, b.Error)
			}
			if _, err := os.Stat(filepath.Join(out, "builds", b.Name, "seal", "seed", "seed.json")); err != nil {
				t.Errorf("build %s has no seed: %v", b.Name, err)
			}
		}
		for _, s := range b.Stages {
			if done[s.Key] && s.Cache != "hit" {
				t.Errorf("build %s redid stage %s, finished before the kill", b.Name, s.Name)
			}
		}
	}
}

// checkSharedFetchedOnce: the image site-a and site-b share was precached once.
func checkSharedFetchedOnce(t *testing.T, reg *registry.Registry) {
	t.Helper()
	blobGets := map[string]int{}
	for _, q := range reg.Requests() {
		if q.Method == "GET" && strings.HasPrefix(q.Path, "/v2/depot/shared/blobs/") {
			blobGets[q.Path]++
		}
	}
	if len(blobGets) == 0 {
		t.Fatal("the shared image's blobs were never fetched")
	}
	for p, n := range blobGets {
		if n != 1 {
			t.Errorf("%s fetched %d times, want once for both builds", p, n)
		}
	}
}

// checkReportDrawn renders the report in headless Chromium and checks the timeline's bars
// are on the screenshot: pixels of the colour of stages that ran.
func checkReportDrawn(t *testing.T, report string, builds int) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is missing: install the Debian package chromium (make deps)")
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	ctx, cancel := testContext(t)
	defer cancel()
	b, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size=1200,900", "--screenshot="+shot, "file://"+report).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, b)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The "ran" bars are #1f6feb; the legend's swatch is 12x12.
	blue := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == 0x1f && g>>8 == 0x6f && bl>>8 == 0xeb {
				blue++
			}
		}
	}
	if min := 12*12 + builds*20; blue < min {
		t.Errorf("the report's timeline is not drawn: %d pixels of the bars' colour, want at least %d", blue, min)
	}
	t.Log(fmt.Sprintf("timeline: %d bar pixels", blue))
}
