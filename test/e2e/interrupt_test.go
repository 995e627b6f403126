package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/faultproxy"
	"github.com/snofactory/snofactory/test/registry"
)

// TestInterruptDuringPrecacheThenResume sends SIGINT while precache is pulling over a slow
// link: the build stops promptly with exit 130 and an "interrupted" record, leaves no cache
// entry for precache, and the next run resumes with every earlier stage a cache hit.
func TestInterruptDuringPrecacheThenResume(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	ctx, cancel := testContext(t)
	defer cancel()
	reg := registry.StartT(t, registry.Options{})
	// 8 MiB over a 1 MiB/s link: precache takes seconds, time enough to interrupt it.
	proxy, err := faultproxy.Start(ctx, "http://"+reg.Addr(), faultproxy.Options{Bandwidth: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	img, err := random.Image(4<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	pushed, _ := name.ParseReference(reg.Ref("demo/big:1.0"), name.Insecure)
	if err := remote.Write(pushed, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}

	bp := demoBlueprint(t)
	b, _ := os.ReadFile(bp)
	s := string(b)
	i := strings.Index(s, "  extraImages:\n    - ")
	j := strings.Index(s[i+len("  extraImages:\n    - "):], "\n")
	s = s[:i] + "  extraImages:\n    - " + proxy.Addr() + "/demo/big:1.0" + s[i+len("  extraImages:\n    - ")+j:]
	os.WriteFile(bp, []byte(s), 0o644)

	cache, out := t.TempDir(), t.TempDir()
	cmd := exec.CommandContext(ctx, snofactoryBin, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out, "--progress", "json")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once precache has moved some bytes.
	var tailBuf bytes.Buffer
	sc := bufio.NewScanner(stderr)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) { // RFC 7464 records
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, bytes.TrimPrefix(data[:i], []byte{0x1e}), nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	interrupted := false
	for sc.Scan() {
		tailBuf.Write(append(sc.Bytes(), '\n'))
		var e pipeline.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case !interrupted && e.Stage == "precache" && e.Kind == pipeline.EventProgress && e.Unit == "bytes" && e.Done > 0 && e.Done < e.Total:
			cmd.Process.Signal(syscall.SIGINT)
			interrupted = true
		case interrupted && e.Kind == pipeline.EventStageStart:
			// Stopping promptly means no later stage begins.
			t.Errorf("after SIGINT the build started stage %s", e.Stage)
		}
	}
	err = cmd.Wait()
	if !interrupted {
		t.Fatalf("precache finished before it could be interrupted (err %v):\n%s", err, tailBuf.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit after SIGINT: %v, want 130", err)
	}
	if rec := loadRecord(t, out); rec.Status != "interrupted" {
		t.Fatalf("run.json status %q", rec.Status)
	}
	if e, _ := filepath.Glob(filepath.Join(cache, "entries", "precache", "*")); len(e) != 0 {
		t.Fatalf("an interrupted precache left a cache entry: %v", e)
	}

	out2 := t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out2); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	for _, st := range loadRecord(t, out2).Stages {
		want := "hit"
		if st.Name == "precache" {
			want = "miss"
		}
		if st.Cache != want {
			t.Errorf("resume: %s was %s, want %s", st.Name, st.Cache, want)
		}
	}
}
