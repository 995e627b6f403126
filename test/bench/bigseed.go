package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline/flock"
	"github.com/snofactory/snofactory/test/testbin"
)

// The bench seed is a 16 GiB sparse disk holding an ext4 filesystem with 6 GiB of files, as
// an installed node's disk is laid out: a third an OS (binaries and text), two thirds
// precached container images; half the bytes incompressible, half text-like; a few
// thousand files of sizes from 1 KiB to 32 MiB. mkfs.ext4 -d fills the image without
// mounting it, so offsets and fragmentation are a real filesystem's. A second disk is the
// same node after a z-stream update: half of the image files replaced by new ones of the
// same sizes. Both are generated once per machine, under build/bench/. A smaller disk
// (-disk-gib) scales the files' budgets with it: a quick run, same proportions.
const (
	bigDiskGiB    = 16
	bigOSBytes    = 2 << 30
	bigImageBytes = 4 << 30
	bigSeedDir    = "bigseed-v1" // bump when the generator changes
)

// benchFile is one file of the bench filesystem, its content made from seed.
type benchFile struct {
	path  string
	size  int64
	text  bool
	image bool
	seed  uint64
}

// bigSeedFiles lists the files of a disk of gib GiB, the same on every machine.
func bigSeedFiles(gib int64) []benchFile {
	r := rand.New(rand.NewPCG(16, 6))
	var files []benchFile
	var text, random int64
	add := func(prefix string, budget int64, image bool) {
		var n int64
		for i := 0; n < budget; i++ {
			// log-uniform between 1 KiB and 32 MiB
			size := min(int64(math.Exp(math.Log(1<<10)+r.Float64()*(math.Log(32<<20)-math.Log(1<<10)))), budget-n)
			isText := text <= random
			if isText {
				text += size
			} else {
				random += size
			}
			files = append(files, benchFile{path: fmt.Sprintf("%s/d%03d/f%05d", prefix, i/64, i), size: size,
				text: isText, image: image, seed: uint64(len(files)) + 1})
			n += size
		}
	}
	add("usr/lib", bigOSBytes*gib/bigDiskGiB, false)
	add("var/lib/containers/storage/overlay", bigImageBytes*gib/bigDiskGiB, true)
	return files
}

// zstream is the z-stream update: every other image file gets new content.
func zstream(files []benchFile) []benchFile {
	out := append([]benchFile{}, files...)
	k := 0
	for i := range out {
		if out[i].image {
			if k%2 == 1 {
				out[i].seed += 1 << 32
			}
			k++
		}
	}
	return out
}

// writeContent writes f's content: random bytes, or text-like lines of words and numbers.
func writeContent(path string, f benchFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	words := []string{"the", "node", "kubelet", "etcd", "container", "image", "layer", "config", "systemd", "unit",
		"service", "network", "route", "address", "interface", "certificate", "key", "secret", "manifest", "operator",
		"release", "version", "=", ":", "{", "}", "[", "]", "\"name\"", "\"value\"", "true", "false", "null", "0", "1",
		"/usr/lib", "/etc", "/var", "lib64", ".so", "ExecStart", "After", "Wants", "#", "include", "return", "func"}
	r := rand.New(rand.NewPCG(f.seed, f.seed^0x9e3779b97f4a7c15))
	var n int64
	buf := make([]byte, 0, 64<<10)
	for n < f.size {
		buf = buf[:0]
		if f.text {
			for len(buf) < cap(buf)-64 {
				switch k := r.IntN(16); {
				case k == 0:
					buf = append(buf, '\n')
				case k == 1:
					buf = fmt.Appendf(buf, "%d ", r.IntN(100000))
				default:
					buf = append(buf, words[r.IntN(len(words))]...)
					buf = append(buf, ' ')
				}
			}
		} else {
			for len(buf) < cap(buf) {
				v := r.Uint64()
				buf = append(buf, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
			}
		}
		k := min(int64(len(buf)), f.size-n)
		if _, err := w.Write(buf[:k]); err != nil {
			out.Close()
			return err
		}
		n += k
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// bigSeedDisks returns the two bench disks of gib GiB (the node, and the node after a
// z-stream), generating them on first use. Generation holds a lock beside them, so two
// benches started together on one machine generate once (the second waits and uses the
// first's disks), and writes a directory of its own that is renamed into place whole, so
// a killed generation leaves nothing that looks done; the next one removes what it left.
func bigSeedDisks(ctx context.Context, gib int64) (a, b string, err error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(root, "build", "bench", bigSeedDir)
	if gib != bigDiskGiB {
		dir += fmt.Sprintf("-%dgib", gib)
	}
	a, b = filepath.Join(dir, "node.raw"), filepath.Join(dir, "node-zstream.raw")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := flock.Lock(lock); err != nil {
		return "", "", fmt.Errorf("locking the bench disks: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return a, b, nil
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "", "", errors.New("mkfs.ext4 is missing: install the Debian package e2fsprogs (make deps)")
	}
	stale, _ := filepath.Glob(dir + ".partial-*")
	for _, p := range append(stale, dir) {
		if err := os.RemoveAll(p); err != nil {
			return "", "", err
		}
	}
	stage, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".partial-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(stage)
	if err := os.Chmod(stage, 0o755); err != nil { // MkdirTemp's 0700
		return "", "", err
	}
	if err := generateBigSeed(ctx, stage, gib); err != nil {
		return "", "", err
	}
	if err := os.Rename(stage, dir); err != nil {
		return "", "", fmt.Errorf("putting the bench disks in place: %w", err)
	}
	return a, b, nil
}

// generateBigSeed writes the two bench disks of gib GiB and their stamp into dir.
func generateBigSeed(ctx context.Context, dir string, gib int64) error {
	tree := filepath.Join(dir, "tree")
	files := bigSeedFiles(gib)
	fmt.Fprintf(os.Stderr, "bench: generating the %d GiB bench disks (%d files, %d MiB; once per machine) in %s\n",
		gib, len(files), (bigOSBytes+bigImageBytes)*gib/bigDiskGiB>>20, dir)
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeContent(filepath.Join(tree, f.path), f); err != nil {
			return err
		}
	}
	if err := mkfs(ctx, tree, filepath.Join(dir, "node.raw"), gib<<30); err != nil {
		return err
	}
	for i, f := range zstream(files) {
		if f.seed != files[i].seed {
			if err := writeContent(filepath.Join(tree, f.path), f); err != nil {
				return err
			}
		}
	}
	if err := mkfs(ctx, tree, filepath.Join(dir, "node-zstream.raw"), gib<<30); err != nil {
		return err
	}
	if err := os.RemoveAll(tree); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644)
}

func mkfs(ctx context.Context, tree, image string, size int64) error {
	f, err := os.Create(image)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", "-d", tree, image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 -d: %v: %s", err, out)
	}
	return nil
}
