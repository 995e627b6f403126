package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/pipeline/flock"
)

// item makes a synthetic entry (stage != "") or blob with one file per inode number.
func item(stage, key string, age time.Duration, inUse bool, files ...fileRef) CacheItem {
	it := CacheItem{Store: StoreEntries, Stage: stage, Key: key, LastUsed: testNow.Add(-age), InUse: inUse, files: files}
	if stage == "" {
		it.Store = "shared/blobs"
	}
	for _, f := range files {
		it.Size += f.bytes
	}
	return it
}

var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// file is a link to inode ino of size bytes, with nlink links in all.
func file(ino uint64, bytes int64, nlink uint64) fileRef {
	return fileRef{id: inodeID{1, ino}, nlink: nlink, bytes: bytes}
}

func TestSelectPrune(t *testing.T) {
	const h = time.Hour
	// A precache entry (p) whose layout hardlinks blob b1 of the store; b2 is linked by no one.
	chain := []CacheItem{
		item("", "b1", 5*h, false, file(10, 100, 2)),
		item("", "b2", 4*h, false, file(11, 50, 1)),
		item("precache", "p", 3*h, false, file(10, 100, 2), file(12, 10, 1)),
		item("render", "r", 1*h, false, file(13, 20, 1)),
	}
	tests := []struct {
		name  string
		items []CacheItem
		opts  PruneOptions
		want  []string
	}{
		{"no limits remove nothing", chain, PruneOptions{}, nil},
		{"max-size removes the least recently used until under", []CacheItem{
			item("a", "old", 3*h, false, file(1, 100, 1)),
			item("a", "mid", 2*h, false, file(2, 100, 1)),
			item("a", "new", 1*h, false, file(3, 100, 1)),
		}, PruneOptions{MaxSize: 150}, []string{"old", "mid"}},
		{"max-size already met", []CacheItem{
			item("a", "x", 3*h, false, file(1, 100, 1)),
		}, PruneOptions{MaxSize: 100}, nil},
		{"in-use items are never removed", []CacheItem{
			item("a", "old", 3*h, true, file(1, 100, 1)),
			item("a", "mid", 2*h, false, file(2, 100, 1)),
			item("a", "new", 1*h, false, file(3, 100, 1)),
		}, PruneOptions{MaxSize: 1}, []string{"mid", "new"}},
		{"older-than removes only what is older", []CacheItem{
			item("a", "old", 50*h, false, file(1, 100, 1)),
			item("a", "edge", 48*h, false, file(2, 100, 1)),
			item("a", "new", 1*h, false, file(3, 100, 1)),
		}, PruneOptions{OlderThan: 48 * h}, []string{"old"}},
		{"older-than spares items in use", []CacheItem{
			item("a", "old", 50*h, true, file(1, 100, 1)),
		}, PruneOptions{OlderThan: h}, nil},
		{"both limits: age first, then size", []CacheItem{
			item("a", "ancient", 100*h, false, file(1, 10, 1)),
			item("a", "old", 3*h, false, file(2, 100, 1)),
			item("a", "new", 1*h, false, file(3, 100, 1)),
		}, PruneOptions{OlderThan: 50 * h, MaxSize: 100}, []string{"ancient", "old"}},
		// b1 frees nothing while p links it, so the LRU passes it over, takes b2, then p;
		// p's removal leaves b1 the sole link, and b1 (the oldest) goes next.
		{"a blob goes once no entry links it", chain, PruneOptions{MaxSize: 30}, []string{"b2", "p", "b1"}},
		{"stops as soon as the total fits", chain, PruneOptions{MaxSize: 125}, []string{"b2", "p"}},
		{"the oldest blob stays while a newer entry links it", []CacheItem{
			item("", "b1", 5*h, false, file(10, 100, 2)),
			item("", "b2", 4*h, false, file(11, 50, 1)),
			item("render", "r", 3*h, false, file(13, 20, 1)),
			item("precache", "p", 1*h, false, file(10, 100, 2), file(12, 10, 1)),
		}, PruneOptions{MaxSize: 115}, []string{"b2", "r"}},
		{"a blob linked by an entry in use is kept", []CacheItem{
			item("", "b1", 5*h, false, file(10, 100, 2)),
			item("precache", "p", 3*h, true, file(10, 100, 2)),
		}, PruneOptions{MaxSize: 1, OlderThan: h}, nil},
		{"older-than takes a blob its old entry linked", chain, PruneOptions{OlderThan: 2 * h}, []string{"b2", "p", "b1"}},
		{"a link outside the cache keeps a blob", []CacheItem{
			item("", "b1", 5*h, false, file(10, 100, 2)),
		}, PruneOptions{MaxSize: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, i := range selectPrune(tt.items, tt.opts, testNow) {
				got = append(got, tt.items[i].Key)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("picked %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUsageCountsHardlinksOnce(t *testing.T) {
	items := []CacheItem{
		item("", "b1", 0, false, file(10, 100, 2)),
		item("precache", "p", 0, false, file(10, 100, 2), file(12, 10, 1)),
		item("render", "r", 0, false, file(13, 20, 1)),
	}
	u := UsageOf(items)
	want := []StoreUsage{{Store: "entries", Items: 2, Bytes: 130}, {Store: "shared/blobs", Items: 1, Bytes: 100}}
	if !slices.Equal(u.Stores, want) || u.Total != 130 {
		t.Fatalf("usage %+v, want stores %+v total 130", u, want)
	}
}

// putEntry commits an entry with one file and sets its last use.
func putEntry(t *testing.T, c *Cache, stage, content string, lastUsed time.Time) CacheItem {
	t.Helper()
	sum := sha256.Sum256([]byte(stage + content))
	key := hex.EncodeToString(sum[:])
	dir, err := c.stage(stage, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	arts, stamps, err := artifacts(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.commit(dir, Entry{Stage: stage, Key: key, Artifacts: arts, Stamps: stamps}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(c.entryDir(stage, key)+".json", lastUsed, lastUsed); err != nil {
		t.Fatal(err)
	}
	return CacheItem{Stage: stage, Key: key}
}

// putBlob stores content in shared/<store>/sha256 and returns its path.
func putBlob(t *testing.T, cacheDir, store, content string, stored time.Time) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	p := filepath.Join(cacheDir, "shared", store, "sha256", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, stored, stored); err != nil {
		t.Fatal(err)
	}
	return p
}

func holdLock(t *testing.T, path string, take func(*os.File) (bool, error)) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if ok, err := take(f); !ok || err != nil {
		t.Fatalf("locking %s: ok %v, %v", path, ok, err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// An entry whose lock (a build making or using it) or pin (a build that used it) is held is
// never pruned; the same prune removes its unlocked neighbours.
func TestPruneSkipsEntriesInUse(t *testing.T) {
	old := time.Now().Add(-48 * time.Hour)
	tests := []struct {
		name string
		lock string
		how  func(*os.File) (bool, error)
	}{
		{"entry lock held", ".lock", flock.TryLock},
		{"entry pinned", ".use", flock.TryShared},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cache{Dir: t.TempDir()}
			busy := putEntry(t, c, "render", "busy", old)
			idle := putEntry(t, c, "render", "idle", old)
			holdLock(t, c.lockPath(busy.Key+tt.lock), tt.how)
			items, err := c.Items(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if want := it.Key == busy.Key; it.InUse != want {
					t.Errorf("entry %s: in use %v, want %v", it.Key[:8], it.InUse, want)
				}
			}
			res, err := c.Prune(context.Background(), PruneOptions{MaxSize: 1, OlderThan: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Removed) != 1 || res.Removed[0].Key != idle.Key || res.Freed <= 0 {
				t.Fatalf("removed %+v, freed %d; want only the idle entry", res.Removed, res.Freed)
			}
			if _, hit, _ := c.Lookup("render", busy.Key); !hit {
				t.Fatal("the entry in use was pruned")
			}
			if exists(c.entryDir("render", idle.Key)) || exists(c.entryDir("render", idle.Key)+".json") {
				t.Fatal("the idle entry is still there")
			}
			if trash, _ := os.ReadDir(filepath.Join(c.Dir, "trash")); len(trash) != 0 {
				t.Fatalf("trash left behind: %v", trash)
			}
		})
	}
}

func TestPruneDryRunRemovesNothing(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	e := putEntry(t, c, "render", "x", time.Now().Add(-time.Hour))
	res, err := c.Prune(context.Background(), PruneOptions{MaxSize: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Freed <= 0 || res.After != res.Before-res.Freed {
		t.Fatalf("dry run reports %+v", res)
	}
	if _, hit, _ := c.Lookup("render", e.Key); !hit {
		t.Fatal("a dry run removed the entry")
	}
}

// Blobs: one only the store holds, one a precache layout hardlinks. A size-bound prune
// removes the unlinked blob; the linked one only once its entry goes; a pinned store (a build
// that may link any blob at any moment) keeps them all.
func TestPruneBlobs(t *testing.T) {
	old := time.Now().Add(-72 * time.Hour)
	setup := func(t *testing.T) (c *Cache, lone, linked string, layout CacheItem) {
		c = &Cache{Dir: t.TempDir()}
		lone = putBlob(t, c.Dir, "blobs", "lone blob", old)
		linked = putBlob(t, c.Dir, "blobs", "linked blob", old)
		layout = putEntry(t, c, "precache", "layout", time.Now())
		// The entry is committed read-only; link the blob in the way a layout does.
		dir := c.entryDir("precache", layout.Key)
		os.Chmod(dir, 0o755)
		if err := os.Link(linked, filepath.Join(dir, "blob")); err != nil {
			t.Fatal(err)
		}
		return c, lone, linked, layout
	}
	t.Run("unlinked blob goes, linked blob stays with its entry", func(t *testing.T) {
		c, lone, linked, layout := setup(t)
		holdLock(t, c.lockPath(layout.Key+".use"), flock.TryShared)
		if _, err := c.Prune(context.Background(), PruneOptions{MaxSize: 1}); err != nil {
			t.Fatal(err)
		}
		if exists(lone) || !exists(linked) {
			t.Fatalf("lone blob present %v (want false), linked blob present %v (want true)", exists(lone), exists(linked))
		}
	})
	t.Run("entry and its blob both go", func(t *testing.T) {
		c, lone, linked, _ := setup(t)
		res, err := c.Prune(context.Background(), PruneOptions{MaxSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if exists(lone) || exists(linked) || len(res.Removed) != 3 || res.After != 0 {
			t.Fatalf("after prune: lone %v linked %v, result %+v", exists(lone), exists(linked), res)
		}
	})
	t.Run("pinned store keeps its blobs", func(t *testing.T) {
		c, lone, _, _ := setup(t)
		holdLock(t, c.lockPath(storePin("blobs")), flock.TryShared)
		if _, err := c.Prune(context.Background(), PruneOptions{OlderThan: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if !exists(lone) {
			t.Fatal("a blob of a pinned store was pruned")
		}
	})
}

// A cache hit by a build records a use; a plan looking at the entry does not.
func TestHitRecordsLastUse(t *testing.T) {
	cache := t.TempDir()
	tg := newTestGraph()
	o := buildOpts(t, cache)
	if _, err := Build(context.Background(), tg.graph(), o); err != nil {
		t.Fatal(err)
	}
	o.Cache.Release()
	old := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	records, _ := filepath.Glob(filepath.Join(cache, "entries", "*", "*.json"))
	if len(records) != 3 {
		t.Fatalf("%d records, want 3", len(records))
	}
	for _, r := range records {
		os.Chtimes(r, old, old)
	}
	stamp := func() time.Time {
		fi, err := os.Stat(records[0])
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	if _, err := Plan(context.Background(), tg.graph(), &Cache{Dir: cache}, nil, Selection{}); err != nil {
		t.Fatal(err)
	}
	if !stamp().Equal(old) {
		t.Fatal("plan counted as a use")
	}
	o2 := buildOpts(t, cache)
	hitAt := old.Add(12 * time.Hour)
	o2.Cache.Clock = clocktest.New(hitAt)
	if _, err := Build(context.Background(), tg.graph(), o2); err != nil {
		t.Fatal(err)
	}
	o2.Cache.Release()
	if !stamp().Equal(hitAt) {
		t.Fatalf("a hit left the last use at %v, want %v", stamp(), hitAt)
	}
}

// Prune with the tightest limit, over and over while a build runs, never breaks it: each
// stage reads its upstream's outputs well after that stage's lock is released, and the
// precache-like stage links a blob it found in the shared store after a pause. Old entries
// of earlier builds are pruned meanwhile, so the prunes do real work.
func TestPruneDuringBuild(t *testing.T) {
	cache := t.TempDir()
	c := &Cache{Dir: cache}
	junk := putEntry(t, c, "render", "from an older build", time.Now().Add(-time.Hour))
	// pruned says a prune has ended to a pause waiting for it; a pause lasts two of them, so
	// at least one whole prune runs inside it.
	pruned := make(chan struct{})
	pause := func(ctx context.Context) error {
		for range 2 {
			select {
			case <-pruned:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	mk := func(name string, deps ...string) Stage {
		return Stage{Name: name, Version: "1", Deps: deps, Run: func(ctx context.Context, env *Env) error {
			if err := pause(ctx); err != nil {
				return err
			}
			in := ""
			for _, d := range deps {
				b, err := os.ReadFile(filepath.Join(env.Inputs[d], "out.txt"))
				if err != nil {
					return err
				}
				in += string(b)
			}
			if name == "precache" {
				store, err := env.Shared("blobs")
				if err != nil {
					return err
				}
				blob := putBlob(t, filepath.Dir(filepath.Dir(store)), "blobs", "layer", time.Now().Add(-time.Hour))
				if err := pause(ctx); err != nil {
					return err
				}
				if err := os.Link(blob, filepath.Join(env.Out, "layer")); err != nil {
					return err
				}
			}
			return os.WriteFile(filepath.Join(env.Out, "out.txt"), []byte(in+name+";"), 0o644)
		}}
	}
	g := &Graph{Blueprint: "prune", Stages: []Stage{mk("a"), mk("precache", "a"), mk("b", "precache"), mk("c", "b")}}
	o := buildOpts(t, cache)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prunes, removed atomic.Int32
	// A failed prune stops the build too, so its paused stages end and the test reports the
	// prune's error instead of hanging.
	buildCtx, stopBuild := context.WithCancel(context.Background())
	defer stopBuild()
	stopped := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			res, err := (&Cache{Dir: cache}).Prune(ctx, PruneOptions{MaxSize: 1})
			if err != nil && ctx.Err() == nil {
				stopped <- err
				stopBuild()
				return
			}
			prunes.Add(1)
			removed.Add(int32(len(res.Removed)))
			select {
			case pruned <- struct{}{}:
			default: // no stage is pausing: prune on
			}
		}
		stopped <- nil
	}()
	rec, err := Build(buildCtx, g, o)
	cancel()
	if perr := <-stopped; perr != nil {
		t.Fatalf("prune: %v", perr)
	}
	if err != nil {
		t.Fatalf("build broken by prune: %v", err)
	}
	if rec.Status != StatusSucceeded {
		t.Fatalf("build %s", rec.Status)
	}
	if b, err := os.ReadFile(filepath.Join(o.OutputDir, "c", "out.txt")); err != nil || string(b) != "a;precache;b;c;" {
		t.Fatalf("c's output: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(o.OutputDir, "precache", "layer")); err != nil || string(b) != "layer" {
		t.Fatalf("precache's layer: %q, %v", b, err)
	}
	if prunes.Load() < 5 || removed.Load() == 0 || exists(c.entryDir("render", junk.Key)) {
		t.Fatalf("%d prunes removed %d items; the old entry exists: %v", prunes.Load(), removed.Load(), exists(c.entryDir("render", junk.Key)))
	}
	// Once the build's pins are released, its entries are fair game.
	o.Cache.Release()
	res, err := c.Prune(context.Background(), PruneOptions{MaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range res.Removed {
		got = append(got, it.Stage)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != ",a,b,c,precache" || res.After != 0 {
		t.Fatalf("after the build, prune removed %v (after %d bytes)", got, res.After)
	}
}

// A build's pins last as long as the build: once it ends, prune may take what it used,
// while what a build still running on the same Cache (a depot's) used stays pinned.
func TestPinsEndWithTheBuild(t *testing.T) {
	cache := t.TempDir()
	c := &Cache{Dir: cache}
	write := func(name string) Stage {
		return Stage{Name: name, Version: "1", Run: func(ctx context.Context, env *Env) error {
			return os.WriteFile(filepath.Join(env.Out, "out.txt"), []byte(name), 0o644)
		}}
	}
	o := buildOpts(t, cache)
	o.Cache = c
	if _, err := Build(context.Background(), &Graph{Blueprint: "first", Stages: []Stage{write("a")}}, o); err != nil {
		t.Fatal(err)
	}
	inUse := func() map[string]bool {
		items, err := (&Cache{Dir: cache}).Items(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, it := range items {
			if it.Stage != "" {
				m[it.Stage] = it.InUse
			}
		}
		return m
	}
	if inUse()["a"] {
		t.Error("the finished build still pins its entry")
	}
	release := make(chan struct{})
	running := make(chan struct{})
	second := &Graph{Blueprint: "second", Stages: []Stage{write("b"), {Name: "wait", Version: "1", Deps: []string{"b"},
		Run: func(ctx context.Context, env *Env) error {
			close(running)
			<-release
			return nil
		}}}}
	o2 := buildOpts(t, cache)
	o2.Cache = c
	done := make(chan error)
	go func() { _, err := Build(context.Background(), second, o2); done <- err }()
	<-running
	got := inUse()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !got["b"] || got["a"] {
		t.Errorf("while the second build runs: in use %v, want b (its upstream) and not a (the first build's)", got)
	}
	if inUse()["b"] {
		t.Error("the second build's pins outlived it")
	}
}
