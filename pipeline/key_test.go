package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The memo serves an unchanged file's digest without reading it, and notices any change:
// new content of the same size with the modification time put back, a replaced file, a
// truncation.
func TestMemoDigest(t *testing.T) {
	ctx := context.Background()
	c := &Cache{Dir: t.TempDir()}
	p := filepath.Join(t.TempDir(), "live.iso")
	os.WriteFile(p, []byte("aaaa"), 0o644)
	want, _ := digestPath(ctx, p)
	if got, err := c.memoDigest(ctx, p); err != nil || got != want {
		t.Fatalf("first: %s %v", got, err)
	}
	memos, _ := filepath.Glob(filepath.Join(c.Dir, "digests", "*.json"))
	if len(memos) != 1 {
		t.Fatalf("memo files: %v", memos)
	}
	// Make the memo lie: if it is used, we get the lie back, proving the file was not read.
	b, _ := os.ReadFile(memos[0])
	os.WriteFile(memos[0], []byte(string(b[:len(b)-2])+"x\"}"), 0o644)
	lie := want + "x"
	if got, _ := c.memoDigest(ctx, p); got != lie {
		t.Fatalf("memo not used: %s", got)
	}

	// Same size, mtime restored: the change time still differs, so it is re-hashed.
	info, _ := os.Stat(p)
	// The change time cannot be set and the kernel stamps it from a coarse clock: rewrite
	// until it has moved on (the event the memo must notice), not for a guessed while.
	before := info.Sys().(*syscall.Stat_t).Ctim
	for {
		os.WriteFile(p, []byte("bbbb"), 0o644)
		os.Chtimes(p, info.ModTime(), info.ModTime())
		if now, err := os.Stat(p); err != nil || now.Sys().(*syscall.Stat_t).Ctim != before {
			break
		}
	}
	want2, _ := digestPath(ctx, p)
	if got, _ := c.memoDigest(ctx, p); got != want2 || want2 == want {
		t.Fatalf("changed content not noticed: %s", got)
	}
	// Replaced by another file (new inode).
	q := p + ".new"
	os.WriteFile(q, []byte("cccc"), 0o644)
	os.Rename(q, p)
	want3, _ := digestPath(ctx, p)
	if got, _ := c.memoDigest(ctx, p); got != want3 {
		t.Fatalf("replaced file not noticed: %s", got)
	}
	// Directories are always hashed.
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "a.yaml"), []byte("1"), 0o644)
	d1, _ := c.memoDigest(ctx, d)
	os.WriteFile(filepath.Join(d, "a.yaml"), []byte("2"), 0o644)
	if d2, _ := c.memoDigest(ctx, d); d1 == d2 {
		t.Fatal("directory change not noticed")
	}
}

// A recipe is the stage's own inputs and its upstream recipes: secrets count by name only
// (their keyed digests differ from cache to cache), upstream output digests not at all.
func TestRecipe(t *testing.T) {
	base := KeyInputs{Stage: "seal", Version: "1", Options: []byte(`{"a":1}`),
		Deps: map[string]string{"install": "k1/out1"}, Files: map[string]string{"f": "d1"}, Secrets: map[string]string{"pull": "hmac1"}}
	up := map[string]string{"install": "r-install"}
	want := base.Recipe(up)
	for _, tc := range []struct {
		name   string
		change func(*KeyInputs, map[string]string)
		same   bool
	}{
		{"upstream bytes", func(k *KeyInputs, _ map[string]string) { k.Deps = map[string]string{"install": "k2/out2"} }, true},
		{"secret's keyed digest", func(k *KeyInputs, _ map[string]string) { k.Secrets = map[string]string{"pull": "hmac2"} }, true},
		{"secret's name", func(k *KeyInputs, _ map[string]string) { k.Secrets = map[string]string{"other": "hmac1"} }, false},
		{"upstream recipe", func(_ *KeyInputs, u map[string]string) { u["install"] = "r-other" }, false},
		{"option", func(k *KeyInputs, _ map[string]string) { k.Options = []byte(`{"a":2}`) }, false},
		{"file", func(k *KeyInputs, _ map[string]string) { k.Files = map[string]string{"f": "d2"} }, false},
		{"version", func(k *KeyInputs, _ map[string]string) { k.Version = "2" }, false},
	} {
		k := base
		u := map[string]string{"install": up["install"]}
		tc.change(&k, u)
		if got := k.Recipe(u); (got == want) != tc.same {
			t.Errorf("%s: recipe %s, before %s; want same=%v", tc.name, got, want, tc.same)
		}
	}
}
