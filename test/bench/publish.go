package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/zeebo/blake3"
	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// packChild is the argument that makes the bench binary pack a disk as the seal stage does
// (diskpack.PackFiles, then the seed manifest) in a process of its own, so that its peak
// memory is measured alone: bench packChild RAW SEEDDIR.
const packChild = "pack-child"

// runPackChild packs raw into a seed directory dir.
func runPackChild(ctx context.Context, raw, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fi, err := os.Stat(raw)
	if err != nil {
		return err
	}
	// The sizes seal picks for a disk of this size.
	sums, err := diskpack.PackFiles(ctx, raw, filepath.Join(dir, "disk.pack"), filepath.Join(dir, "disk.index"), diskpack.ParamsFor(fi.Size()))
	if err != nil {
		return err
	}
	d, err := seed.DescribeChunked(dir, "disk.pack", "disk.index", sums)
	if err != nil {
		return err
	}
	m := &seed.Manifest{
		SchemaVersion: seed.SchemaVersion, Name: "bench", Target: oskind.CoreOS, Firmware: seed.FirmwareBIOS,
		BlueprintDigest: d.RawDigest, LockDigest: d.RawDigest, ReconfigurationAPIVersion: "snofactory.io/v1alpha1",
		Created: time.Unix(0, 0).UTC(), Tools: map[string]string{"bench": "1"}, Images: []seed.Image{}, Disks: []seed.Disk{d},
	}
	return seed.WriteManifest(dir, m)
}

// packGroups is the number of chunk-group blobs of the seed in dir (a blob per chunk in an
// index before version 3) and the mean group length it was cut for, 0 if it cannot be read.
func packGroups(dir string) (blobs, mean int) {
	m, err := seed.Check(dir)
	if err != nil {
		return 0, 0
	}
	x, err := seed.ReadIndex(dir, m.Disks[0])
	if err != nil {
		return 0, 0
	}
	return len(x.Groups()), x.GroupChunks
}

// blobGroupingTradeoff describes groupingTradeoff of the seeds in directories a and b.
func blobGroupingTradeoff(a, b string, ks []int) (string, error) {
	var idx [2]*diskpack.Index
	for i, dir := range []string{a, b} {
		m, err := seed.Check(dir)
		if err != nil {
			return "", err
		}
		if idx[i], err = seed.ReadIndex(dir, m.Disks[0]); err != nil {
			return "", err
		}
	}
	var parts []string
	for _, g := range groupingTradeoff(idx[0], idx[1], ks) {
		parts = append(parts, fmt.Sprintf("%d chunks a group: %d blobs, z-stream sends %.2f", g.k, g.blobs, g.sent))
	}
	return "other mean group lengths (simulated from the two indexes): " + strings.Join(parts, "; ") + " (target 0.6)", nil
}

// grouping is what pushing k chunks a blob would do.
type grouping struct {
	k, blobs int     // the blobs of the first disk
	sent     float64 // the share of the second disk's bytes a push after the first sends
}

// groupingTradeoff says, for each mean group length k, how many blobs disk a would push
// if its pack's consecutive chunks were grouped as diskpack groups them
// (diskpack.GroupCutter: a group ends where a chunk's ID says, so that unchanged runs
// group alike), and what share of b's bytes a push after a would then send: every group
// holding any chunk a lacks.
func groupingTradeoff(a, b *diskpack.Index, ks []int) []grouping {
	groups := func(x *diskpack.Index, k int) map[string]int64 {
		blobs, _ := x.Blobs()
		cut := diskpack.NewGroupCutter(k)
		out := map[string]int64{}
		var key strings.Builder
		var size int64
		for i, bl := range blobs {
			key.WriteString(string(bl.Digest))
			size += bl.Size
			if cut.Ends(bl.ID, bl.Size) || i == len(blobs)-1 {
				out[key.String()] = size
				key.Reset()
				size = 0
			}
		}
		return out
	}
	var out []grouping
	for _, k := range ks {
		ga, gb := groups(a, k), groups(b, k)
		var total, sent int64
		for key, size := range gb {
			total += size
			if _, ok := ga[key]; !ok {
				sent += size
			}
		}
		out = append(out, grouping{k: k, blobs: len(ga), sent: float64(sent) / float64(max(total, 1))})
	}
	return out
}

// blobCost uploads n small blobs to reg, ociseed.DefaultJobs at a time, as a push does,
// and returns the wall time per blob: what the registry spends on a blob whatever its size.
func blobCost(ctx context.Context, reg *registry.Registry, n int) (time.Duration, error) {
	repo, err := name.NewRepository(reg.Ref("probe/blobs"), name.Insecure)
	if err != nil {
		return 0, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ociseed.DefaultJobs)
	start := time.Now()
	for range n {
		b := make([]byte, 1024)
		rand.Read(b)
		g.Go(func() error {
			return remote.WriteLayer(repo, static.NewLayer(b, types.OCILayer), remote.WithContext(gctx))
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("probing the registry's cost per blob: %w", err)
	}
	return time.Since(start) / time.Duration(n), nil
}

// hashSeconds is how long one core here takes to hash n bytes with h.
func hashSeconds(h hash.Hash, n int64) float64 {
	b := make([]byte, 64<<20)
	start := time.Now()
	h.Write(b)
	h.Sum(nil)
	return time.Since(start).Seconds() * float64(n) / float64(len(b))
}

// registryCPU is the CPU time reg's process has used, or 0 if /proc cannot say.
func registryCPU(reg *registry.Registry) time.Duration {
	d, err := reg.CPU()
	if err != nil {
		return 0
	}
	return d
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// skopeoLayout makes an OCI layout whose one layer is the pack itself (hard-linked), so
// skopeo moves the very bytes our push does, as one blob.
func skopeoLayout(dir, pack string) error {
	_, d, err := seed.FileDigest(context.Background(), pack)
	if err != nil {
		return err
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	if err := os.Link(pack, filepath.Join(blobs, d.Encoded())); err != nil {
		return err
	}
	config := []byte("{}")
	man, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: "application/vnd.snofactory.bench.v1",
		Config:       ocispec.Descriptor{MediaType: ocispec.MediaTypeEmptyJSON, Digest: digest.FromBytes(config), Size: 2},
		Layers:       []ocispec.Descriptor{{MediaType: "application/octet-stream", Digest: d, Size: fileSize(pack)}}})
	for _, b := range [][]byte{config, man} {
		if err := os.WriteFile(filepath.Join(blobs, digest.FromBytes(b).Encoded()), b, 0o644); err != nil {
			return err
		}
	}
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man)),
			Annotations: map[string]string{ocispec.AnnotationRefName: "1"}}}})
	if err := os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// benchPublish measures the seed commands on the bench disk (16 GiB, or -disk-gib), each
// against a tool nobody here wrote doing the same job on the same bytes in the same run:
// packaging vs
// qemu-img's compressed qcow2 (and zstd's size), push and pull vs skopeo copy, write vs dd;
// then a re-push of the unchanged seed, and a z-stream update moved as a delta. Every
// seed command runs as its own process, and its peak memory is reported.
func benchPublish(ctx context.Context, dir string, gib int64, jobs int) ([]Result, error) {
	p, err := newPublishBench(ctx, dir, gib)
	if err != nil {
		return nil, err
	}
	p.jobs = jobs
	defer p.stop()
	// In this order: each phase uses what the ones before it left (seeds, registries,
	// the written disk, the first push's figures).
	phases := []func(context.Context) error{
		p.packaging, p.push, p.repush, p.pull, p.write, p.verify, p.zstream,
	}
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	return append(p.results, p.rssResults()...), nil
}

// publishBench is what the phases of benchPublish share.
type publishBench struct {
	dir        string
	bin, self  string // the snofactory binary, and this bench binary for packChild
	m          *measurer
	rawA, rawB string // the bench disk and its z-stream update
	seedA      string
	written    string // the disk seed write writes, and seed write --from updates

	reg  *registry.Registry // ours: the seed is pushed to and pulled from it
	base *registry.Registry // skopeo's

	firstPush        measured // the first push, against which the re-push is measured
	blobs            int      // the chunk-group blobs of seed A
	groupMean        int      // the mean group length seed A was cut for
	packMiB          int64
	packHash, packB3 float64 // seconds one core takes to hash the pack with sha256, BLAKE3

	jobs    int                // blobs in flight in a push or pull (--jobs); 0: the default
	rss     map[string]float64 // peak RSS of each seed command, by its name
	results []Result
}

// newPublishBench checks the baseline tools are installed and finds the binaries and the
// bench disks of gib GiB.
func newPublishBench(ctx context.Context, dir string, gib int64) (*publishBench, error) {
	for _, tool := range []string{"skopeo", "qemu-img", "zstd", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing: make deps installs it", tool)
		}
	}
	bin, err := testbin.Binary(dir)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	m, err := newMeasurer(dir)
	if err != nil {
		return nil, err
	}
	rawA, rawB, err := bigSeedDisks(ctx, gib)
	if err != nil {
		return nil, err
	}
	return &publishBench{
		dir: dir, bin: bin, self: self, m: m, rawA: rawA, rawB: rawB,
		seedA: filepath.Join(dir, "seed-a"), written: filepath.Join(dir, "written.raw"),
		rss: map[string]float64{},
	}, nil
}

// stop stops the registries that were started, skopeo's first.
func (p *publishBench) stop() {
	if p.base != nil {
		p.base.Stop()
	}
	if p.reg != nil {
		p.reg.Stop()
	}
}

// packaging measures sparsify + chunk + compress, against a compressed qcow2 of the same
// disk, and the seed's size against the smaller of that qcow2 and zstd -3.
func (p *publishBench) packaging(ctx context.Context) error {
	pack, err := p.m.run(ctx, p.self, packChild, p.rawA, p.seedA)
	if err != nil {
		return err
	}
	p.rss["seal packaging"] = pack.rssMiB
	qcow := filepath.Join(p.dir, "node.qcow2")
	qc, err := p.m.run(ctx, "qemu-img", "convert", "-c", "-O", "qcow2", p.rawA, qcow)
	if err != nil {
		return err
	}
	qcowSize := fileSize(qcow)
	os.Remove(qcow)
	zst := filepath.Join(p.dir, "node.raw.zst")
	if _, err := p.m.run(ctx, "zstd", "-q", "-T0", "-3", p.rawA, "-o", zst); err != nil {
		return err
	}
	zstSize := fileSize(zst)
	os.Remove(zst)
	packSize := fileSize(filepath.Join(p.seedA, "disk.pack")) + fileSize(filepath.Join(p.seedA, "disk.index"))
	p.results = append(p.results,
		Result{Name: "seal-packaging-vs-qemu-img-convert-c", Unit: "s", Ours: pack.wall.Seconds(), Baseline: qc.wall.Seconds(), Target: "ratio <= 1.0",
			// On a loaded machine the CPU each spends, not its parallelism, sets the wall time.
			Note: fmt.Sprintf("CPU s ours %.1f, qemu-img %.1f", pack.cpu.Seconds(), qc.cpu.Seconds())},
		Result{Name: "seed-size-vs-best-of-qcow2c-and-zstd-3", Unit: "MiB", Ours: float64(packSize) / (1 << 20),
			Baseline: float64(min(qcowSize, zstSize)) / (1 << 20), Target: "ratio <= 1.05",
			Note: fmt.Sprintf("qcow2 -c %d MiB, zstd -T0 -3 %d MiB", qcowSize>>20, zstSize>>20)})
	return nil
}

// push measures a push to an empty registry, against skopeo copying the same bytes as one
// layer to a registry of its own, and notes where the push's time goes. Each side pushes
// twice, in the order ours, skopeo, skopeo, ours: on a busy machine the load drifts
// within a round, and this way each side meets as much of it as the other.
func (p *publishBench) push(ctx context.Context) error {
	o1, err := p.oursPush(ctx)
	if err != nil {
		return err
	}
	s1, err := p.skopeoPush(ctx)
	if err != nil {
		return err
	}
	s2, err := p.skopeoPush(ctx)
	if err != nil {
		return err
	}
	o2, err := p.oursPush(ctx)
	if err != nil {
		return err
	}
	push, sk := o1.mean(o2), s1.mean(s2)
	p.firstPush = push.measured
	p.rss["seed push"] = push.rssMiB
	perBlob, err := blobCost(ctx, p.base, 200)
	if err != nil {
		return err
	}
	p.blobs = sentBlobs(p.reg.Requests())
	_, p.groupMean = packGroups(p.seedA)
	p.packMiB = fileSize(filepath.Join(p.seedA, "disk.pack")) >> 20
	p.packHash, p.packB3 = hashSeconds(sha256.New(), p.packMiB<<20), hashSeconds(blake3.New(), p.packMiB<<20)
	p.results = append(p.results, Result{Name: "seed-push-vs-skopeo-copy", Unit: "s", Ours: push.wall.Seconds(), Baseline: sk.wall.Seconds(), Target: "ratio <= 0.8",
		Beside: []string{fmt.Sprintf("blobs_per_seed=%d", p.blobs), fmt.Sprintf("registry_ms_per_blob=%.1f", perBlob.Seconds()*1000)},
		Note: fmt.Sprintf("two pushes a side, ours, skopeo, skopeo, ours; means: %d blobs sent (chunks cut in groups of %d on average) against skopeo's one; the registry takes %.1f ms per blob uploaded, whatever its size (probe: 200 1-KiB blobs, %d at a time), about %.0f s of this push; CPU s of the registry process: %.0f serving ours, %.0f serving skopeo's; of the clients: ours %.0f, skopeo %.0f",
			p.blobs, p.groupMean, perBlob.Seconds()*1000, ociseed.DefaultJobs, perBlob.Seconds()*float64(p.blobs), push.regCPU.Seconds(), sk.regCPU.Seconds(), push.cpu.Seconds(), sk.cpu.Seconds())})
	return nil
}

// pushRun is one push to an empty registry: the client's measure and the CPU time the
// registry spent serving it.
type pushRun struct {
	measured
	regCPU time.Duration
}

// mean is the mean of two pushes, with the larger peak memory.
func (r pushRun) mean(o pushRun) pushRun {
	return pushRun{
		measured: measured{wall: (r.wall + o.wall) / 2, cpu: (r.cpu + o.cpu) / 2, rssMiB: max(r.rssMiB, o.rssMiB)},
		regCPU:   (r.regCPU + o.regCPU) / 2,
	}
}

// oursPush pushes seed A to a registry of its own, which replaces p.reg.
func (p *publishBench) oursPush(ctx context.Context) (pushRun, error) {
	return p.pushFresh(ctx, &p.reg, p.bin, func(ref string) []string { return p.seedArgs("push", p.seedA, ref) })
}

// skopeoPush copies seed A's pack as one layer to a registry of its own, which replaces
// p.base.
func (p *publishBench) skopeoPush(ctx context.Context) (pushRun, error) {
	layout := filepath.Join(p.dir, "layout")
	if err := skopeoLayout(layout, filepath.Join(p.seedA, "disk.pack")); err != nil {
		return pushRun{}, err
	}
	defer os.RemoveAll(layout)
	return p.pushFresh(ctx, &p.base, "skopeo", func(ref string) []string {
		return []string{"copy", "--quiet", "--dest-tls-verify=false", "oci:" + layout + ":1", "docker://" + ref}
	})
}

// pushFresh starts a registry, stops the one in *slot and puts the new one there, then
// runs name with args for the ref seeds/bench:a on it, measuring the client and the
// registry's CPU serving it.
func (p *publishBench) pushFresh(ctx context.Context, slot **registry.Registry, name string, args func(ref string) []string) (pushRun, error) {
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return pushRun{}, err
	}
	if *slot != nil {
		(*slot).Stop()
	}
	*slot = reg
	cpu := registryCPU(reg)
	m, err := p.m.run(ctx, name, args(reg.Ref("seeds/bench:a"))...)
	if err != nil {
		return pushRun{}, err
	}
	return pushRun{measured: m, regCPU: registryCPU(reg) - cpu}, nil
}

// repush measures pushing the unchanged seed again: one manifest check, nothing read or
// sent.
func (p *publishBench) repush(ctx context.Context) error {
	p.reg.Reset()
	again, err := p.m.run(ctx, p.bin, p.seedArgs("push", p.seedA, p.reg.Ref("seeds/bench:a"))...)
	if err != nil {
		return err
	}
	uploads := 0
	for _, q := range p.reg.Requests() {
		if q.Method == "POST" && q.Kind() == "upload" && q.Status == 202 { // 201 is a mount: nothing sent
			uploads++
		}
	}
	p.results = append(p.results, Result{Name: "seed-repush-unchanged-vs-first-push", Unit: "s", Ours: again.wall.Seconds(), Baseline: p.firstPush.wall.Seconds(),
		Target: "ratio <= 0.1", Note: fmt.Sprintf("%d uploads", uploads)})
	return nil
}

// seedArgs are the arguments of `seed cmd args...`, with the bench's --jobs if it sets one.
func (p *publishBench) seedArgs(cmd string, args ...string) []string {
	out := []string{"seed", cmd}
	if p.jobs > 0 {
		out = append(out, "--jobs", strconv.Itoa(p.jobs))
	}
	return append(out, args...)
}

// pull measures a pull, against skopeo copying the one-layer artifact back into a layout;
// skopeo's registry is stopped after it.
func (p *publishBench) pull(ctx context.Context) error {
	pulled := filepath.Join(p.dir, "pulled")
	p.reg.Reset()
	pull, err := p.m.run(ctx, p.bin, p.seedArgs("pull", p.reg.Ref("seeds/bench:a"), pulled)...)
	if err != nil {
		return err
	}
	p.rss["seed pull"] = pull.rssMiB
	os.RemoveAll(pulled)
	gets := p.reg.Stats().BlobGets
	skBack := filepath.Join(p.dir, "skopeo-pulled")
	skp, err := p.m.run(ctx, "skopeo", "copy", "--quiet", "--src-tls-verify=false", "docker://"+p.base.Ref("seeds/bench:a"), "oci:"+skBack+":1")
	if err != nil {
		return err
	}
	os.RemoveAll(skBack)
	p.base.Stop()
	p.results = append(p.results, Result{Name: "seed-pull-vs-skopeo-copy", Unit: "s", Ours: pull.wall.Seconds(), Baseline: skp.wall.Seconds(), Target: "ratio <= 0.8",
		Note: fmt.Sprintf("CPU s ours %.0f, skopeo %.0f; both check the %d MiB they fetch: skopeo with sha256 (%.0f s on one core here), ours each chunk with BLAKE3 (%.0f s); %d blob GETs of ours against skopeo's one",
			pull.cpu.Seconds(), skp.cpu.Seconds(), p.packMiB, p.packHash, p.packB3, gets)})
	return nil
}

// write measures writing seed A to a file, against dd of the uncompressed disk. The
// written file stays for the z-stream's write --from.
func (p *publishBench) write(ctx context.Context) error {
	wr, err := p.m.run(ctx, p.bin, "seed", "write", "--image", p.seedA, "--device", p.written)
	if err != nil {
		return err
	}
	p.rss["seed write"] = wr.rssMiB
	ddOut := filepath.Join(p.dir, "dd.raw")
	// Both copies are durable when they finish: seed write syncs the file before it
	// renames it into place, so dd syncs too (conv=fsync); without it, dd would leave the
	// 6 GiB in the page cache for the kernel to write after the clock stops.
	dd, err := p.m.run(ctx, "dd", "if="+p.rawA, "of="+ddOut, "bs=4M", "conv=sparse,fsync", "status=none")
	if err != nil {
		return err
	}
	os.Remove(ddOut)
	p.results = append(p.results, Result{Name: "seed-write-vs-dd-fsync", Unit: "s", Ours: wr.wall.Seconds(), Baseline: dd.wall.Seconds(), Target: "ratio <= 1.2",
		Note: fmt.Sprintf("CPU s ours %.0f, dd %.0f: ours checks every chunk as it writes (BLAKE3 of the %d MiB pack: %.0f s on one core here; sha256 would take %.0f) and decompresses it; dd copies unchecked; both sync the file before they finish",
			wr.cpu.Seconds(), dd.cpu.Seconds(), p.packMiB, p.packB3, p.packHash)})
	return nil
}

// verify runs seed verify on seed A, for its peak memory only.
func (p *publishBench) verify(ctx context.Context) error {
	ver, err := p.m.run(ctx, p.bin, "seed", "verify", p.seedA)
	if err != nil {
		return err
	}
	p.rss["seed verify"] = ver.rssMiB
	return nil
}

// zstream measures the z-stream: half the image files replaced. Its push sends only the
// new chunks, and a write --from the disk holding the old seed fetches only those.
func (p *publishBench) zstream(ctx context.Context) error {
	seedB := filepath.Join(p.dir, "seed-b")
	if _, err := p.m.run(ctx, p.self, packChild, p.rawB, seedB); err != nil {
		return err
	}
	res, err := ociseed.Push(ctx, seedB, p.reg.Ref("seeds/bench:b"))
	if err != nil {
		return err
	}
	p.results = append(p.results, Result{Name: "zstream-push-bytes-vs-full-seed", Unit: "MiB", Ours: float64(res.Sent) / (1 << 20),
		Baseline: float64(res.Bytes) / (1 << 20), Target: "ratio <= 0.6"})
	p.noteGrouping(seedB)
	p.reg.Reset()
	wf, err := p.m.run(ctx, p.bin, "seed", "write", "--image", p.reg.Ref("seeds/bench:b"), "--device", p.written, "--from", p.written)
	if err != nil {
		return err
	}
	p.rss["seed write --from"] = wf.rssMiB
	p.results = append(p.results, Result{Name: "zstream-write-from-old-disk-registry-bytes-vs-full-seed", Unit: "MiB",
		Ours: float64(p.reg.Stats().BlobGetBytes) / (1 << 20), Baseline: float64(res.Bytes) / (1 << 20), Target: "ratio <= 0.6"})
	os.Remove(p.written)
	return nil
}

// noteGrouping adds to the push's note what other mean group lengths would give (one
// chunk a blob is the format before groups): fewer, larger blobs spare the registry its
// per-blob cost, at the price of the z-stream's bytes. The note is left as it is if the indexes cannot be read.
func (p *publishBench) noteGrouping(seedB string) {
	ks := []int{1}
	for _, k := range []int{p.groupMean / 2, p.groupMean * 2} {
		if k > 1 {
			ks = append(ks, k)
		}
	}
	tradeoff, err := blobGroupingTradeoff(p.seedA, seedB, ks)
	if err != nil {
		return
	}
	for i := range p.results {
		if p.results[i].Name == "seed-push-vs-skopeo-copy" {
			p.results[i].Note += "; " + tradeoff
		}
	}
}

// rssResults is one line for each seed command's peak memory, against the 256 MiB bound.
func (p *publishBench) rssResults() []Result {
	var results []Result
	for _, name := range []string{"seal packaging", "seed push", "seed pull", "seed write", "seed verify", "seed write --from"} {
		results = append(results, Result{Name: "peak-rss-" + strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), "--", ""), Unit: "MiB",
			Ours: p.rss[name], Baseline: 256, Target: "ours <= 256 MiB (baseline is the bound)"})
	}
	return results
}

// sentBlobs counts the blob uploads among reqs that sent bytes: a PUT that closed an
// upload (a POST answered 201 mounted the blob, and sent nothing).
func sentBlobs(reqs []registry.Request) int {
	n := 0
	for _, q := range reqs {
		if q.Method == "PUT" && q.Kind() == "upload" && q.Status == 201 {
			n++
		}
	}
	return n
}
