package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/flock"
)

// Cache is a content-addressed store of stage outputs, safe to share between concurrent builds
// (one directory per depot). Layout:
//
//	entries/<stage>/<key>/          committed outputs (never modified after the rename)
//	entries/<stage>/<key>.json      entry record: key inputs and artifact digests
//	staging/                        in-progress outputs, renamed into entries/ on success
//	locks/<key>.lock                per-entry flock, so two builds never make one entry twice
//	locks/<key>.use                 per-entry pin (shared flock) of the builds that used it
//	locks/shared-<name>.use         per-store pin of the builds that used a shared store
//	trash/                          what prune is deleting (see prune.go)
//	shared/<name>/                  depot-wide stores owned by stages (blob stores)
//	index/<blueprint>/<stage>.json  key inputs of the last build, for "why does this run?"
type Cache struct {
	Dir string
	// Clock measures an entry's age (nil: the wall clock).
	Clock clock.Clock

	// pins are the shared flocks this value holds on what its builds used (see pin), own
	// the lease of pins taken outside a build.
	mu   sync.Mutex
	pins map[string]*pinRef
	own  *lease
}

// DefaultCacheDir is $XDG_CACHE_HOME/snofactory, falling back to ~/.cache/snofactory.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory (set XDG_CACHE_HOME or --cache-dir): %w", err)
	}
	return filepath.Join(d, "snofactory"), nil
}

// Entry is a committed cache entry.
type Entry struct {
	Stage     string            `json:"stage"`
	Key       string            `json:"key"`
	Inputs    KeyInputs         `json:"inputs"`
	Artifacts []Artifact        `json:"artifacts"`
	Tools     map[string]string `json:"tools,omitempty"`
	// Stamps are the artifacts' modification times (ns) at commit: a hit whose files no
	// longer match (someone edited a file through an output directory's link) is rebuilt.
	Stamps map[string]int64 `json:"stamps,omitempty"`
	// Summary is what the stage chose to show in run.json (Env.Summarize), kept so a cache
	// hit shows it too.
	Summary json.RawMessage `json:"summary,omitempty"`
	// Committed is when the outputs were made; a stage with a MaxAge judges them by it.
	Committed time.Time `json:"committed,omitzero"`
	// Dir is where the outputs live; not stored.
	Dir string `json:"-"`
}

// OutputDigest is the sha256 of a stage's artifact list (paths, digests, sizes), without
// the reports (Stage.Reports): downstream keys chain on it.
func OutputDigest(arts []Artifact, reports ...string) string {
	sorted := slices.DeleteFunc(slices.Clone(arts), func(a Artifact) bool { return slices.Contains(reports, a.Path) })
	slices.SortFunc(sorted, func(a, b Artifact) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, a := range sorted {
		fmt.Fprintf(h, "%s\x00%s\x00%d\n", a.Path, a.SHA256, a.Size)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Artifact is one output file of a stage.
type Artifact struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func (c *Cache) entryDir(stage, key string) string {
	return filepath.Join(c.Dir, "entries", stage, key)
}

// Lookup returns the committed entry for stage and key, or ok=false. An entry without its
// record (a crash between the two renames) counts as absent and is rebuilt.
func (c *Cache) Lookup(stage, key string) (Entry, bool, error) {
	b, err := os.ReadFile(c.entryDir(stage, key) + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("reading cache entry %s/%s: %w", stage, key, err)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, false, nil // a torn or foreign record: rebuild rather than trust it
	}
	e.Dir = c.entryDir(stage, key)
	if _, err := os.Stat(e.Dir); err != nil || !e.intact() {
		return Entry{}, false, nil
	}
	c.markUsed(stage, key)
	return e, true, nil
}

func (c *Cache) now() time.Time { return clock.Or(c.Clock).Now() }

// Expired says why an entry of a stage whose outputs live at most maxAge (0: forever) can
// no longer be used: "" when it can. An entry without its commit time is expired.
func (c *Cache) Expired(e Entry, maxAge time.Duration) string {
	if maxAge <= 0 {
		return ""
	}
	if e.Committed.IsZero() {
		return fmt.Sprintf("the cached output has no creation time, and it lives %s at most", maxAge)
	}
	if age := c.now().Sub(e.Committed); age > maxAge {
		return fmt.Sprintf("the cached output is %s old, older than its %s life", age.Round(time.Minute), maxAge)
	}
	return ""
}

// intact checks, cheaply, that every artifact is still as committed: present, same size,
// same modification time.
func (e Entry) intact() bool {
	for _, a := range e.Artifacts {
		info, err := os.Stat(filepath.Join(e.Dir, filepath.FromSlash(a.Path)))
		if err != nil || info.Size() != a.Size {
			return false
		}
		if t, ok := e.Stamps[a.Path]; ok && info.ModTime().UnixNano() != t {
			return false
		}
	}
	return true
}

// stage creates a fresh staging directory for an entry.
func (c *Cache) stage(stage, key string) (string, error) {
	d := filepath.Join(c.Dir, "staging")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(d, stage+"-"+key[:12]+"-")
}

// commit moves a staged directory into the cache. The directory rename is the commit point of
// the outputs; the record is written after it, so a reader that sees the record sees the outputs.
func (c *Cache) commit(staged string, e Entry) (Entry, error) {
	final := c.entryDir(e.Stage, e.Key)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return Entry{}, err
	}
	// An entry already there is a forced re-run's predecessor, or outputs a crash left
	// without a record. Drop its record first (readers then see no entry rather than a record
	// describing other files), and move its files aside rather than deleting them in place,
	// so a concurrent build reading them is not cut off mid-file.
	if err := os.Remove(final + ".json"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("replacing cache entry %s: %w", final, err)
	}
	if _, err := os.Stat(final); err == nil {
		old, err := os.MkdirTemp(filepath.Join(c.Dir, "staging"), "replaced-")
		if err != nil {
			return Entry{}, err
		}
		if err := os.Rename(final, filepath.Join(old, "entry")); err != nil {
			return Entry{}, fmt.Errorf("replacing cache entry %s: %w", final, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(staged, final); err != nil {
		return Entry{}, fmt.Errorf("committing cache entry %s: %w", final, err)
	}
	e.Committed = c.now().UTC()
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return Entry{}, err
	}
	if err := WriteFileAtomic(final+".json", b, 0o644); err != nil {
		return Entry{}, fmt.Errorf("writing cache record for %s: %w", final, err)
	}
	e.Dir = final
	return e, nil
}

// lock takes the per-entry lock, waiting until it is free or ctx ends (Ctrl-C while another
// build makes the same entry). Locks are flocks, so a killed build releases them. waiting,
// if not nil, is called once when the lock is held elsewhere, so a build that waits says so
// instead of looking hung.
func (c *Cache) lock(ctx context.Context, key string, waiting func(lock string)) (unlock func(), err error) {
	d := filepath.Join(c.Dir, "locks")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(d, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if ok, err := flock.TryLock(f); !ok && err == nil && waiting != nil {
		waiting(f.Name())
	}
	if err := LockFile(ctx, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache entry %s: %w", key, err)
	}
	// The pin outlives the lock: downstream stages read the entry after it is released.
	if err := c.pin(ctx, key+".use"); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache entry %s: %w", key, err)
	}
	return func() { f.Close() }, nil
}

// shared returns (creating it) a depot-wide directory owned by a stage.
func (c *Cache) shared(ctx context.Context, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", fmt.Errorf("invalid shared store name %q", name)
	}
	d := filepath.Join(c.Dir, "shared", name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	// A stage may find a blob stored and link it much later: pin the store until then.
	if err := c.pin(ctx, storePin(name)); err != nil {
		return "", fmt.Errorf("shared store %s: %w", name, err)
	}
	return d, nil
}

// scratch creates a private scratch directory for one run of a stage, beside its staging
// directory: files holding secrets (auth files, installer working directories) go there, and
// a killed build's leftovers are removed by the next run's removeStale.
func (c *Cache) scratch(stage, key string) (string, error) {
	d := filepath.Join(c.Dir, "staging")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(d, stage+"-"+key[:12]+"-scratch-")
}

// removeStale deletes staging directories that killed builds left for this entry. The caller
// holds the entry lock, so no live build can own them.
func (c *Cache) removeStale(stage, key string) {
	old, _ := filepath.Glob(filepath.Join(c.Dir, "staging", stage+"-"+key[:12]+"-*"))
	for _, d := range old {
		os.RemoveAll(d)
	}
}

// artifacts lists every regular file below dir with its digest and size.
func artifacts(ctx context.Context, dir string) ([]Artifact, map[string]int64, error) {
	var out []Artifact
	stamps := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, ctxio.Reader(ctx, f))
		if err != nil {
			return err
		}
		info, err := f.Stat()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, Artifact{Path: filepath.ToSlash(rel), SHA256: hex.EncodeToString(h.Sum(nil)), Size: n})
		stamps[filepath.ToSlash(rel)] = info.ModTime().UnixNano()
		// Outputs are shared by every build that hits this entry: make accidental edits fail.
		return os.Chmod(p, info.Mode().Perm()&^0o222)
	})
	return out, stamps, err
}

// index records the key inputs of the last build of a blueprint's stage.
func (c *Cache) indexPath(blueprint, stage string) string {
	return filepath.Join(c.Dir, "index", blueprint, stage+".json")
}

func (c *Cache) lastInputs(blueprint, stage string) (KeyInputs, bool) {
	b, err := os.ReadFile(c.indexPath(blueprint, stage))
	if err != nil {
		return KeyInputs{}, false
	}
	var k KeyInputs
	if json.Unmarshal(b, &k) != nil {
		return KeyInputs{}, false
	}
	return k, true
}

func (c *Cache) recordInputs(blueprint, stage string, k KeyInputs) error {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(c.indexPath(blueprint, stage), b, 0o644)
}
