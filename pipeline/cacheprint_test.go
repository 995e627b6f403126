package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestShortKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"sha256:" + strings.Repeat("ab", 32), "sha256:abababababab"},
		{strings.Repeat("0123456789", 3), "012345678901"},
		{"short", "short"},
		{"sha256:abc", "sha256:abc"},
		{"", ""},
	} {
		if got := shortKey(tc.key); got != tc.want {
			t.Errorf("shortKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestCacheItemDescribe(t *testing.T) {
	used := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		it   CacheItem
		want string
	}{
		{CacheItem{Store: StoreEntries, Stage: "install", Key: "k" + strings.Repeat("1", 20), Size: 2048, LastUsed: used},
			"stage install entry k11111111111 (2KiB, last used 2026-03-04T05:06:07Z)"},
		{CacheItem{Store: "shared/blobs", Key: "sha256:" + strings.Repeat("f", 64), Size: 3 << 20, LastUsed: used},
			"shared/blobs sha256:ffffffffffff (3MiB, last used 2026-03-04T05:06:07Z)"},
		// Stage names and keys are read back from the cache's files: escaped.
		{CacheItem{Store: StoreEntries, Stage: "x\x1b[31m", Key: "k\r", Size: 1, LastUsed: used},
			`stage "x\x1b[31m" entry "k\r" (1B, last used 2026-03-04T05:06:07Z)`},
	} {
		if got := tc.it.Describe(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestWriteItems(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.Local)
	var b bytes.Buffer
	err := WriteItems(&b, []CacheItem{
		{Store: StoreEntries, Stage: "resolve", Key: "abc", Size: 1024, LastUsed: now.Add(-90 * time.Minute), InUse: true},
		{Store: "shared/iso", Key: "sha256:" + strings.Repeat("e", 64), Size: 10, LastUsed: now.Add(-time.Hour)},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := "STORE       STAGE    KEY                  SIZE  LAST USED                       IN USE\n" +
		"entries     resolve  abc                  1KiB  2026-03-04 10:30 (1h30m0s ago)  yes\n" +
		"shared/iso  -        sha256:eeeeeeeeeeee  10B   2026-03-04 11:00 (1h0m0s ago)   no\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A stage name and a key read back from the cache's files are printed escaped: an escape
// sequence cannot clear the screen, a newline cannot forge a row.
func TestWriteItemsEscapesRecords(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.Local)
	var b bytes.Buffer
	if err := WriteItems(&b, []CacheItem{{Store: "shared\a", Stage: "\x1b[2J", Key: "a\nb", LastUsed: now}}, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{`"shared\a"`, `"\x1b[2J"`, `"a\nb"`} {
		if !strings.Contains(out, s) {
			t.Errorf("output does not hold %s:\n%s", s, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\a") || strings.Count(out, "\n") != 2 {
		t.Errorf("a control character from a record reached the output:\n%q", out)
	}
}

func TestUsageWriteText(t *testing.T) {
	var b bytes.Buffer
	u := Usage{Stores: []StoreUsage{{Store: StoreEntries, Items: 2, Bytes: 2 << 20}, {Store: "shared/blobs", Items: 1, Bytes: 1 << 20}}, Total: 2 << 20}
	if err := u.WriteText(&b, 3); err != nil {
		t.Fatal(err)
	}
	want := "STORE         ITEMS  SIZE\n" +
		"entries       2      2MiB\n" +
		"shared/blobs  1      1MiB\n" +
		"total         3      2MiB (2097152 bytes)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestPruneResultWriteText(t *testing.T) {
	used := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	item := CacheItem{Store: StoreEntries, Stage: "s", Key: "k", Size: 1024, LastUsed: used}
	for _, tc := range []struct {
		name string
		res  PruneResult
		want string
	}{
		{"removed", PruneResult{Removed: []CacheItem{item}, Freed: 1024, After: 0},
			"removed stage s entry k (1KiB, last used 2026-03-04T05:06:07Z)\nfreed 1KiB (1024 bytes) in 1 items; the cache uses 0B\n"},
		{"dry run with a skip", PruneResult{Skipped: []CacheItem{item}, DryRun: true, After: 2048},
			"skipped stage s entry k (1KiB, last used 2026-03-04T05:06:07Z): a build started using it\nwould free 0B (0 bytes) in 0 items; the cache would use 2KiB\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.res.WriteText(&b)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestWritePlan(t *testing.T) {
	var b bytes.Buffer
	err := WritePlan(&b, []PlannedStage{
		{Name: "resolve", Key: strings.Repeat("a", 64), Action: "cached"},
		{Name: "install", Action: "run", Session: "vm", Reasons: []string{"forced", "input changed"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "STAGE    KEY           ACTION  SESSION  WHY\n" +
		"resolve  aaaaaaaaaaaa  cached  -        \n" +
		"install  -             run     vm       forced; input changed\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// A reason quotes what changed (a file's name from the blueprint, a record's key): its
// control characters are escaped, its own quotes kept.
func TestWritePlanEscapesReasons(t *testing.T) {
	var b bytes.Buffer
	err := WritePlan(&b, []PlannedStage{{Name: "render", Key: "k\x1b", Action: "run", Reasons: []string{`input "a\x1b[2J" changed`, "x\ny"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{`"k\x1b"`, `input "a\x1b[2J" changed; x\ny`} {
		if !strings.Contains(out, s) {
			t.Errorf("output does not hold %s:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Count(out, "\n") != 2 {
		t.Errorf("a control character reached the output:\n%q", out)
	}
}
