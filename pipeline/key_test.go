package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(p, []byte("bbbb"), 0o644)
	os.Chtimes(p, info.ModTime(), info.ModTime())
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
