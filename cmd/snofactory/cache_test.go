package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

const (
	testEntryKey = "1111111111111111111111111111111111111111111111111111111111111111"
	testBlobHex  = "2222222222222222222222222222222222222222222222222222222222222222"
)

// testCache lays out a cache with one render entry used two days ago and one precache store
// blob stored an hour ago, as the engine and the store leave them.
func testCache(t *testing.T) (dir, entry, blob string) {
	t.Helper()
	dir = t.TempDir()
	entry = filepath.Join(dir, "entries", "render", testEntryKey)
	blob = filepath.Join(dir, "shared", "blobs", "sha256", testBlobHex)
	files := map[string]string{
		filepath.Join(entry, "out.ign"): strings.Repeat("x", 10000),
		entry + ".json":                 `{"stage":"render","key":"` + testEntryKey + `"}`,
		blob:                            "blob",
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	twoDays, hour := time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	for p, at := range map[string]time.Time{entry + ".json": twoDays, blob: hour} {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return dir, entry, blob
}

func TestCacheCommands(t *testing.T) {
	present := func(p string) bool { _, err := os.Stat(p); return err == nil }
	tests := []struct {
		name string
		args []string
		code int
		// out must appear in stdout (or stderr when code is not 0).
		out []string
		// entryKept and blobKept are whether the entry and the blob survive.
		entryKept, blobKept bool
	}{
		{"ls", []string{"ls"}, 0, []string{"entries", "render", testEntryKey[:12], "shared/blobs", "sha256:" + testBlobHex[:12], "no"}, true, true},
		{"du", []string{"du"}, 0, []string{"entries", "shared/blobs", "total"}, true, true},
		{"prune older-than", []string{"prune", "--older-than", "1d"}, 0, []string{"removed stage render entry " + testEntryKey[:12], "freed"}, false, true},
		{"prune dry run", []string{"prune", "--max-size", "1B", "--dry-run"}, 0, []string{"would remove stage render", "would remove shared/blobs", "would free"}, true, true},
		{"prune max-size", []string{"prune", "--max-size", "1B"}, 0, []string{"removed stage render", "removed shared/blobs", "the cache uses 0B"}, false, false},
		{"prune max-size already met", []string{"prune", "--max-size", "1GiB"}, 0, []string{"freed 0B"}, true, true},
		{"max-size banana", []string{"prune", "--max-size", "banana"}, 2, []string{`invalid size "banana"`}, true, true},
		{"older-than soon", []string{"prune", "--older-than", "soon"}, 2, []string{"--older-than"}, true, true},
		{"prune without a limit", []string{"prune", "--dry-run"}, 2, []string{"give --max-size, --older-than or both"}, true, true},
		{"unknown output", []string{"ls", "-o", "yaml"}, 2, []string{"want text or json"}, true, true},
		{"extra argument", []string{"du", "extra"}, 2, []string{"takes 0 argument"}, true, true},
		{"unknown flag", []string{"ls", "--frob"}, 2, []string{"unknown flag"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, entry, blob := testCache(t)
			code, stdout, stderr := runMain(t, append(append([]string{"cache"}, tt.args...), "--cache-dir", dir)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			got := stdout
			if tt.code != 0 {
				got = stderr
			}
			for _, want := range tt.out {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			if present(entry) != tt.entryKept || present(entry+".json") != tt.entryKept {
				t.Errorf("entry present %v, want %v", present(entry), tt.entryKept)
			}
			if present(blob) != tt.blobKept {
				t.Errorf("blob present %v, want %v", present(blob), tt.blobKept)
			}
		})
	}
}

func TestCacheJSON(t *testing.T) {
	dir, _, _ := testCache(t)
	decode := func(v any, args ...string) {
		t.Helper()
		code, stdout, stderr := runMain(t, append(append([]string{"cache"}, args...), "--cache-dir", dir, "-o", "json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), v); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
	}
	var items []pipeline.CacheItem
	decode(&items, "ls")
	if len(items) != 2 || items[0].Stage != "render" || items[0].Key != testEntryKey || items[1].Key != "sha256:"+testBlobHex || items[0].Size <= 0 {
		t.Fatalf("ls: %+v", items)
	}
	var u pipeline.Usage
	decode(&u, "du")
	if len(u.Stores) != 2 || u.Total != items[0].Size+items[1].Size {
		t.Fatalf("du: %+v, items %d+%d bytes", u, items[0].Size, items[1].Size)
	}
	var res pipeline.PruneResult
	decode(&res, "prune", "--older-than", "1d", "--dry-run")
	if !res.DryRun || len(res.Removed) != 1 || res.Removed[0].Key != testEntryKey || res.Freed != items[0].Size {
		t.Fatalf("prune: %+v", res)
	}
}
