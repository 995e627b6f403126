package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/node/imageimport"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/stages/resolve"
	"github.com/snofactory/snofactory/test/faultproxy"
	"github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// containers/storage may re-execute the test binary (seeds/node/imageimport); answer that before
// the tests run.
func init() {
	if reexec.Init() {
		os.Exit(0)
	}
}

// refRegistry is the registry host the payload's image-references name. It does not
// resolve, so every pull goes through the mirrors each test configures, as on a depot
// that mirrors quay.io.
const refRegistry = "registry.invalid"

func pushPayload(t *testing.T, reg *registry.Registry, opts payload.Options) *payload.Release {
	t.Helper()
	if opts.ReferenceRegistry == "" {
		opts.ReferenceRegistry = refRegistry
	}
	rel, err := payload.Generate(context.Background(), reg.Addr(), opts)
	if err != nil {
		t.Fatalf("generating payload: %v", err)
	}
	return rel
}

// mirror is one ICSP/IDMS entry of the registry settings resolve and precache take.
type mirror struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// mirrorTo sends pulls of the payload's reference registry to addr.
func mirrorTo(addr string, rel *payload.Release) []mirror {
	return []mirror{{Source: rel.ReferenceRegistry, Mirrors: []string{addr}}}
}

// setRegistry fills a stage's registry settings (dst points at its Options.Registry). Their
// Go type is internal to the stages, so the test writes them in their JSON form, as a
// depot's tooling would.
func setRegistry(t *testing.T, dst any, insecure []string, mirrors []mirror) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"insecure": insecure, "mirrors": mirrors})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		t.Fatal(err)
	}
}

type buildResult struct {
	out    string
	lock   *lockFile
	report precache.StageReport
	rec    *pipeline.Record
	// last progress event of the precache stage, by what it counts
	progress map[string]pipeline.Event
}

// buildPrecache runs resolve and precache through the pipeline engine with a shared cache.
func buildPrecache(t *testing.T, cacheDir, blueprint string, ro resolve.Options, po precache.Options) buildResult {
	t.Helper()
	g := &pipeline.Graph{Blueprint: blueprint, Stages: []pipeline.Stage{resolve.New(ro), precache.New(po)}}
	out := filepath.Join(t.TempDir(), "out")
	var mu sync.Mutex
	progress := map[string]pipeline.Event{}
	sink := pipeline.SinkFunc(func(e pipeline.Event) {
		if e.Kind == pipeline.EventProgress && e.Stage == precache.Name {
			mu.Lock()
			progress[e.Message] = e
			mu.Unlock()
		}
	})
	rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: &pipeline.Cache{Dir: cacheDir}, OutputDir: out, Sink: sink})
	if err != nil {
		logs, _ := os.ReadFile(filepath.Join(out, "logs", "precache.log"))
		t.Fatalf("build %s: %v\n%s", blueprint, err, logs)
	}
	var lock lockFile
	if b, err := os.ReadFile(filepath.Join(out, resolve.Name, "lock.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	var rep precache.StageReport
	b, err := os.ReadFile(filepath.Join(out, precache.Name, precache.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return buildResult{out: out, lock: &lock, report: rep, rec: rec, progress: progress}
}

// TestPrecachePayload resolves and precaches the default synthetic payload (OCI media types,
// so Debian's skopeo 1.9 can read the layout; a multi-arch component included), checks every
// image of the layout with skopeo, then builds a second blueprint of the same release and
// checks, from the report and from the registry's access log, that no blob is fetched again.
func TestPrecachePayload(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	testbin.Require(t, "skopeo", "skopeo")
	reg := registry.StartT(t, registry.Options{})
	rel := pushPayload(t, reg, payload.Options{Format: payload.OCI, MultiArch: true})
	cache := t.TempDir()
	mirrors := mirrorTo(reg.Addr(), rel)
	ro := resolve.Options{Release: rel.Tag}
	setRegistry(t, &ro.Registry, []string{reg.Addr()}, mirrors)
	var po precache.Options
	setRegistry(t, &po.Registry, []string{reg.Addr()}, mirrors)
	reg.Reset()
	first := buildPrecache(t, cache, "site-a", ro, po)

	lock := first.lock
	if lock.Release.Digest != rel.Digest || lock.Release.Version != rel.Version {
		t.Errorf("lock release = %+v, want digest %s version %s", lock.Release, rel.Digest, rel.Version)
	}
	if len(lock.Images) != len(rel.Components)+1 {
		t.Errorf("lock has %d images, want %d components + the release", len(lock.Images), len(rel.Components))
	}
	if lock.ISO == nil || lock.ISO.URL != rel.ISOLocation || lock.ISO.SHA256 != rel.ISOSHA256 {
		t.Errorf("lock iso = %+v, want %s %s", lock.ISO, rel.ISOLocation, rel.ISOSHA256)
	}
	inst, _ := rel.Component("installer")
	if lock.Installer == nil || lock.Installer.Digest != inst.Digest {
		t.Errorf("lock installer = %+v, want %s", lock.Installer, inst.Digest)
	} else if _, err := os.Stat(filepath.Join(first.out, resolve.Name, lock.Installer.Path)); err != nil {
		t.Errorf("openshift-install not extracted: %v", err)
	}

	rep := first.report
	t.Logf("cold: %d images, %d blobs, %d bytes fetched, %d retries, %.1fs", rep.Images, rep.Blobs, rep.BytesFetched, rep.Retries, rep.Seconds)
	if rep.Images != len(lock.Images) || rep.BytesReused != 0 || rep.BytesFetched != rep.BytesTotal {
		t.Errorf("cold report = %+v", rep.Report)
	}
	// Per image, the report counts the linux/amd64 instance's config and layers, as the
	// payload does (its unique totals also count the arm64 instance, which precache skips).
	byRef := map[string]payload.Component{}
	for _, c := range rel.Components {
		byRef[c.Reference] = c
	}
	for _, ir := range rep.List {
		if c, ok := byRef[ir.Ref]; ok && ir.Bytes != c.Bytes {
			t.Errorf("%s: report counts %d blob bytes, the payload pushed %d", c.Name, ir.Bytes, c.Bytes)
		}
	}
	if p := first.progress["bytes"]; p.Done != rep.BytesTotal || p.Total != rep.BytesTotal || p.Unit != "bytes" {
		t.Errorf("last bytes progress = %d/%d %s, want %d", p.Done, p.Total, p.Unit, rep.BytesTotal)
	}
	if p := first.progress["images"]; p.Done != int64(rep.Images) || p.Total != int64(rep.Images) {
		t.Errorf("last images progress = %d/%d, want %d", p.Done, p.Total, rep.Images)
	}
	if rep.Layout.BytesCopied != 0 || rep.Layout.Linked != rep.Layout.Blobs {
		t.Errorf("layout copied bytes: %+v", rep.Layout)
	}
	// Server side: precache's blob bytes plus what resolve read (release and installer
	// layers, which precache then fetched again into the store) is what the registry sent.
	if s := reg.Stats(); s.BlobGetBytes < rep.BytesFetched {
		t.Errorf("registry sent %d blob bytes, the report claims %d fetched", s.BlobGetBytes, rep.BytesFetched)
	}

	// Every image in the layout, through an independent client.
	layoutDir := filepath.Join(first.out, precache.Name, precache.LayoutDir)
	want := map[string]string{}
	for _, c := range rel.Components {
		want[c.Reference] = c.Digest
	}
	want[rel.PullSpec] = rel.Digest
	for _, im := range lock.Images {
		out, err := exec.Command("skopeo", "inspect", "oci:"+layoutDir+":"+im.Ref).CombinedOutput()
		if err != nil {
			t.Errorf("skopeo inspect %s: %v\n%s", im.Ref, err, out)
			continue
		}
		var got struct{ Digest string }
		json.Unmarshal(out, &got)
		if got.Digest != im.Digest || (want[im.Ref] != "" && want[im.Ref] != got.Digest) {
			t.Errorf("%s: skopeo sees %s; lock %s, registry %s", im.Ref, got.Digest, im.Digest, want[im.Ref])
		}
	}

	// A second blueprint of the same release (plus an extra image the release already has):
	// its own cache entries, no blob bytes.
	reg.Reset()
	etcd, _ := rel.Component("etcd")
	ro2 := ro
	ro2.Images = []string{etcd.Reference}
	second := buildPrecache(t, cache, "site-b", ro2, po)
	r2 := second.report
	if r2.BytesFetched != 0 || r2.BlobsFetched != 0 || r2.BytesReused != r2.BytesTotal || r2.ManifestsGot != 0 {
		t.Errorf("second build fetched: %+v", r2.Report)
	}
	if second.rec.Stages[1].Cache != "miss" {
		t.Errorf("second build's precache did not run (cache %s); the test proves nothing", second.rec.Stages[1].Cache)
	}
	// The registry served only what resolve reads (release and installer layers).
	releaseRepo := strings.TrimPrefix(strings.Split(rel.PullSpec, "@")[0], rel.Registry+"/")
	resolveReads := map[string]bool{}
	for _, c := range rel.Components {
		if c.Name == "installer" {
			for _, l := range c.Layers {
				resolveReads[l] = true
			}
		}
	}
	for _, q := range reg.Requests() {
		if q.Kind() != "blob" || q.Method != "GET" {
			continue
		}
		d := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if !resolveReads[d] && !strings.HasPrefix(q.Path, "/v2/"+releaseRepo+"/") {
			t.Errorf("second build fetched blob %s (%d bytes) from the registry", q.Path, q.Bytes)
		}
	}
}

// TestPrecacheThroughFaults precaches through a proxy that fails 20% of requests (resets,
// 5xx, 429, truncated bodies, slow bodies) and checks every blob landed verified.
func TestPrecacheThroughFaults(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	rel := pushPayload(t, reg, payload.Options{Size: payload.Tiny, Format: payload.Mixed})
	proxy, err := faultproxy.Start(context.Background(), reg.Addr(), faultproxy.Options{Seed: 7, Rate: 0.2, RetryAfter: time.Second, TruncateFraction: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cache := t.TempDir()
	// resolve reads through the registry; precache only through the faulty proxy.
	ro := resolve.Options{Release: rel.Tag}
	setRegistry(t, &ro.Registry, []string{reg.Addr()}, mirrorTo(reg.Addr(), rel))
	po := precache.Options{RetryBase: 20 * time.Millisecond, Attempts: 10}
	setRegistry(t, &po.Registry, []string{proxy.Addr()}, mirrorTo(proxy.Addr(), rel))
	res := buildPrecache(t, cache, "faulty", ro, po)
	st := proxy.Stats()
	rep := res.report
	t.Logf("proxy: %d requests, %d faults %v; precache: %d retries, %d bytes fetched of %d", st.Requests, st.Total(), st.Faults, rep.Retries, rep.BytesFetched, rep.BytesTotal)
	// Slow bodies delay but do not fail; count the rest.
	failed := st.Total() - st.Faults[faultproxy.Slow]
	if st.Requests == 0 || float64(failed) < 0.10*float64(st.Requests) {
		t.Fatalf("proxy failed %d of %d requests, want >= 10%%", failed, st.Requests)
	}
	if rep.Retries == 0 || rep.BlobsFetched != rep.Blobs {
		t.Errorf("report = %+v", rep.Report)
	}
	// Every blob in the layout matches its name.
	verifyLayout(t, filepath.Join(res.out, precache.Name, precache.LayoutDir))
}

// verifyLayout re-hashes every blob of an OCI layout.
func verifyLayout(t *testing.T, dir string) {
	t.Helper()
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	if len(blobs) == 0 {
		t.Fatal("layout has no blobs")
	}
	for _, b := range blobs {
		out, err := exec.Command("sha256sum", b).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(out))[0]; got != filepath.Base(b) {
			t.Errorf("blob %s has sha256 %s", filepath.Base(b), got)
		}
	}
}

// TestPrecacheKill9Resume SIGKILLs a precache process mid-transfer, then runs it again: the
// re-run fetches less than the whole payload and never re-fetches a blob that was finished.
func TestPrecacheKill9Resume(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	rel := pushPayload(t, reg, payload.Options{Size: payload.Tiny})
	// A slow link, so the kill lands mid-transfer.
	proxy, err := faultproxy.Start(context.Background(), reg.Addr(), faultproxy.Options{Bandwidth: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	out := buildResolveOnly(t, reg, rel)
	lockPath := filepath.Join(out, resolve.Name, "lock.json")
	bin := buildProc(t)
	store := filepath.Join(t.TempDir(), "blobs")
	slowConf := registriesD(t, proxy.Addr(), rel)

	cmd := exec.Command(bin, "-store", store, "-lock", lockPath, "-registries-d", slowConf, "-jobs", "3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) }
	t.Cleanup(kill)
	// Kill once 40% of the bytes are in and a blob is half-written, so the re-run has both
	// finished blobs to skip and a partial one to resume.
	var done, total atomic.Int64
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "progress" {
				d, _ := strconv.ParseInt(f[1], 10, 64)
				n, _ := strconv.ParseInt(f[2], 10, 64)
				done.Store(d)
				total.Store(n)
			}
		}
	}()
	killed := false
	deadline := time.Now().Add(time.Minute)
	for !killed && time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("precache finished before it could be killed; stderr:\n%s", stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if total.Load() == 0 || done.Load() < total.Load()*2/5 {
			continue
		}
		parts, _ := filepath.Glob(filepath.Join(store, "partial", "*"))
		for _, p := range parts {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
				kill()
				killed = true
				break
			}
		}
	}
	cmd.Wait()
	<-exited
	if !killed {
		t.Fatal("no blob was mid-transfer within a minute")
	}
	finished := map[string]bool{}
	fin, _ := filepath.Glob(filepath.Join(store, "sha256", "*"))
	for _, f := range fin {
		finished["sha256:"+filepath.Base(f)] = true
	}
	partials, _ := filepath.Glob(filepath.Join(store, "partial", "*"))
	var partialBytes int64
	for _, p := range partials {
		if fi, err := os.Stat(p); err == nil {
			partialBytes += fi.Size()
		}
	}
	t.Logf("after kill -9: %d finished blobs and manifests, %d partial files (%d bytes)", len(finished), len(partials), partialBytes)
	if partialBytes == 0 {
		t.Fatal("the kill left no partial data; the test cannot check resumption")
	}
	if len(finished) == 0 {
		t.Fatal("no blob finished before the kill")
	}

	// Re-run at full speed straight from the registry.
	reg.Reset()
	rerun := exec.Command(bin, "-store", store, "-lock", lockPath, "-registries-d", registriesD(t, reg.Addr(), rel), "-jobs", "3")
	b, err := rerun.Output()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, b)
	}
	var rep precache.Report
	for _, line := range strings.Split(string(b), "\n") {
		if s, ok := strings.CutPrefix(line, "report "); ok {
			json.Unmarshal([]byte(s), &rep)
		}
	}
	t.Logf("re-run: fetched %d of %d bytes, %d blobs reused", rep.BytesFetched, rep.BytesTotal, rep.BlobsReused)
	if rep.BytesTotal == 0 || rep.BytesFetched >= rep.BytesTotal || rep.BlobsReused == 0 {
		t.Errorf("re-run report = %+v", rep)
	}
	// Partial files resume where they stopped: the re-run fetches exactly what is missing.
	if rep.Retries == 0 && rep.BytesFetched != rep.BytesTotal-rep.BytesReused-partialBytes {
		t.Errorf("re-run fetched %d bytes; %d total - %d finished - %d partial = %d were missing",
			rep.BytesFetched, rep.BytesTotal, rep.BytesReused, partialBytes, rep.BytesTotal-rep.BytesReused-partialBytes)
	}
	for _, q := range reg.Requests() {
		if q.Kind() == "blob" && q.Method == "GET" && finished[q.Path[strings.LastIndex(q.Path, "/")+1:]] {
			t.Errorf("re-run fetched finished blob %s again", q.Path)
		}
	}
	// And every stored blob is intact.
	for _, f := range fin {
		out, _ := exec.Command("sha256sum", f).Output()
		if got := strings.Fields(string(out))[0]; got != filepath.Base(f) {
			t.Errorf("stored blob %s has sha256 %s", filepath.Base(f), got)
		}
	}
}

// buildResolveOnly runs the resolve stage for rel and returns the build output directory.
func buildResolveOnly(t *testing.T, reg *registry.Registry, rel *payload.Release) string {
	t.Helper()
	ro := resolve.Options{Release: rel.Tag}
	setRegistry(t, &ro.Registry, []string{reg.Addr()}, mirrorTo(reg.Addr(), rel))
	g := &pipeline.Graph{Blueprint: "lock", Stages: []pipeline.Stage{resolve.New(ro)}}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// registriesD writes a registries.conf.d mirroring the payload's reference registry to addr.
func registriesD(t *testing.T, addr string, rel *payload.Release) string {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf("[[registry]]\nprefix = %q\nlocation = %q\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n\n[[registry]]\nlocation = %q\ninsecure = true\n",
		rel.ReferenceRegistry, rel.ReferenceRegistry, addr, addr)
	if err := os.WriteFile(filepath.Join(dir, "50-test.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildProc builds testdata/precacheproc.
func buildProc(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "precacheproc")
	cmd := exec.Command("go", "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs", "-o", bin, "./test/e2e/testdata/precacheproc")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building precacheproc: %v\n%s", err, b)
	}
	return bin
}

// TestPrecacheImportOnNode packages a mixed Docker/OCI payload on the data disk, imports the
// disk into containers-storage as the node agent does (vfs driver, temporary root), and
// checks every image there with skopeo.
func TestPrecacheImportOnNode(t *testing.T) {
	testbin.Require(t, "skopeo", "skopeo")
	reg := registry.StartT(t, registry.Options{})
	rel := pushPayload(t, reg, payload.Options{Size: payload.Tiny, Components: 12, Format: payload.Mixed})
	mirrors := mirrorTo(reg.Addr(), rel)
	ro := resolve.Options{Release: rel.Tag}
	setRegistry(t, &ro.Registry, []string{reg.Addr()}, mirrors)
	var po precache.Options
	setRegistry(t, &po.Registry, []string{reg.Addr()}, mirrors)
	res := buildPrecache(t, t.TempDir(), "node", ro, po)
	root := t.TempDir()
	opts := imageimport.Options{GraphRoot: filepath.Join(root, "graph"), RunRoot: filepath.Join(root, "run"), Driver: "vfs", ScratchDir: t.TempDir()}
	rep, err := imageimport.ImportDisk(context.Background(), filepath.Join(res.out, precache.Name, precache.DiskFile), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != len(res.lock.Images) {
		t.Errorf("imported %d images, the lock has %d", len(rep.Images), len(res.lock.Images))
	}
	for _, im := range res.lock.Images {
		ref := "containers-storage:[vfs@" + opts.GraphRoot + "+" + opts.RunRoot + "]" + im.Ref
		out, err := exec.Command("skopeo", "inspect", ref).CombinedOutput()
		if err != nil {
			t.Errorf("skopeo inspect %s: %v\n%s", ref, err, out)
			continue
		}
		var s struct{ Digest string }
		json.Unmarshal(out, &s)
		if s.Digest != im.Digest {
			t.Errorf("%s: containers-storage has %s, want %s", im.Name, s.Digest, im.Digest)
		}
	}
}

// TestReleaseInfoCLI runs `snofactory release info` against a generated payload.
func TestReleaseInfoCLI(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	rel := pushPayload(t, reg, payload.Options{Size: payload.Tiny, Components: 10, ReferenceRegistry: reg.Addr()})
	r := runCLI(t, "release", "info", "--insecure-registry", reg.Addr(), "-o", "json", rel.Tag)
	if r.code != 0 {
		t.Fatalf("release info: exit %d\n%s", r.code, r.stderr)
	}
	var info resolve.Info
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("release info -o json: %v\n%s", err, r.stdout)
	}
	if info.Version != rel.Version || info.Components != len(rel.Components) || info.Digest != rel.Digest ||
		info.UniqueBlobBytes != rel.UniqueBlobBytes || info.UniqueBlobs != rel.UniqueBlobs {
		t.Errorf("info = %+v; payload: version %s, %d components, %d unique blobs, %d bytes",
			info, rel.Version, len(rel.Components), rel.UniqueBlobs, rel.UniqueBlobBytes)
	}
	text := runCLI(t, "release", "info", "--insecure-registry", reg.Addr(), rel.Tag)
	for _, want := range []string{rel.Version, fmt.Sprintf(" %d\n", len(rel.Components)), fmt.Sprintf("(%d bytes)", rel.UniqueBlobBytes)} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, text.stdout)
		}
	}
	if bad := runCLI(t, "release", "info", "-o", "yaml", rel.Tag); bad.code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", bad.code)
	}
	if missing := runCLI(t, "release", "info", "--insecure-registry", reg.Addr(), reg.Ref("nothing/here:1")); missing.code != 1 || !strings.Contains(missing.stderr, "nothing/here") {
		t.Errorf("missing release: exit %d, stderr %q", missing.code, missing.stderr)
	}
}
