// Package siteboot boots a seed as a site does, for the tests that end with one: the demo
// blueprint's site medium made by `snofactory site-config create`, then `snofactory seed
// boot --site-config` with it, and the checks that the seed reconfigured itself as the
// medium says (its report, and its answer on the new address through a forwarded port).
package siteboot

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

// Boot is one boot of a seed at a site.
type Boot struct {
	Bin       string   // the snofactory binary
	Seed      string   // the seed: a directory or a reference seed boot opens
	Overlay   string   // the VM's disk, kept across power cycles; "": a temporary one
	MemoryMiB int      // 0: seed boot's default
	Env       []string // more of the command's environment (a registry's auth file)
	Medium    string   // the site-config medium; "": the demo's, unsigned (SiteMedium)
	Args      []string // more seed boot flags (--machine-serial for a bound medium)
}

// Result is what a boot that reconfigured the seed printed, and how long it took.
type Result struct {
	Report string        // seed boot's standard output up to the line saying it holds the VM
	Stderr string        // its standard error, whole
	Took   time.Duration // from power-on to reconfigured
}

// SiteMedium makes the demo blueprint's site-config medium with bin and returns its path.
func SiteMedium(t *testing.T, bin string) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "site.iso")
	cmd := exec.CommandContext(t.Context(), bin, "site-config", "create", filepath.Join(root, "blueprints", "demo", "site.yaml"), "-o", iso)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("site-config create: %v\n%s", err, out)
	}
	return iso
}

// Reconfigured boots the seed with the demo's site medium and checks it reports each step
// applied and, from outside, answers on the forwarded port at its new address with the new
// hostname and DNS server. It ends the boot with Ctrl-C, as a user would, and checks no qemu
// outlives it. It returns how long the seed took from power-on to reconfigured.
func Reconfigured(t *testing.T, b Boot) time.Duration {
	t.Helper()
	return ReconfiguredWith(t, b).Took
}

// ReconfiguredWith is Reconfigured for a medium of the demo's site made another way (b.Medium:
// signed, bound, its secrets sealed); it returns what seed boot printed, for the checks the
// medium calls for.
func ReconfiguredWith(t *testing.T, b Boot) Result {
	t.Helper()
	if b.Overlay == "" {
		b.Overlay = filepath.Join(t.TempDir(), "site-disk.qcow2")
	}
	if b.Medium == "" {
		b.Medium = SiteMedium(t, b.Bin)
	}
	port := freePort(t)
	args := append([]string{"seed", "boot", b.Seed, "--overlay", b.Overlay, "--site-config", b.Medium,
		"--forward", fmt.Sprintf("%d:10.0.2.50:8080", port), "--hold", "5m"}, b.Args...)
	if b.MemoryMiB > 0 {
		args = append(args, "--memory", fmt.Sprint(b.MemoryMiB))
	}
	cmd := exec.CommandContext(t.Context(), b.Bin, args...)
	cmd.Env = append(os.Environ(), b.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	report := untilHolding(stdout)
	took := time.Since(start)
	if !strings.Contains(report, "Seed reconfigured and booted") {
		t.Fatalf("seed boot did not reconfigure:\n%s\n%s", report, stderr.String())
	}
	for _, want := range []string{"hostname=edge-01", "address.eth0=10.0.2.50/24", "dns.servers=10.0.2.3"} {
		if !strings.Contains(report, want) {
			t.Errorf("the seed did not report %s:\n%s", want, report)
		}
	}
	checkAnswer(t, port)
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("seed boot after Ctrl-C: %v\n%s", err, stderr.String())
	}
	if out, err := exec.Command("pgrep", "-f", b.Overlay).Output(); err == nil {
		t.Errorf("qemu outlived seed boot: %s", out)
	}
	return Result{Report: report, Stderr: stderr.String(), Took: took}
}

// untilHolding reads seed boot's report up to the line saying it holds the VM.
func untilHolding(r io.Reader) string {
	var log strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Holding the VM") {
			break
		}
	}
	return log.String()
}

// checkAnswer asks the reconfigured seed's web page, through the forwarded port, what it
// became.
func checkAnswer(t *testing.T, port int) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/site.txt", port))
	if err != nil {
		t.Fatalf("the forwarded port to 10.0.2.50:8080 does not answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"hostname=edge-01", "address=eth0 10.0.2.50/24", "dns=10.0.2.3"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the reconfigured seed says %q, want %s", body, want)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
