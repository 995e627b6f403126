package blobstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/waittest"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPut(t *testing.T) {
	manifest := []byte(`{"schemaVersion":2}`)
	d := digest.FromBytes(manifest)
	tests := []struct {
		name    string
		d       digest.Digest
		data    []byte
		times   int
		wantErr error
	}{
		{"stored read-only", d, manifest, 1, nil},
		{"stored twice", d, manifest, 2, nil},
		{"content does not match its digest", d, []byte(`{"schemaVersion":1}`), 1, &DigestError{}},
		{"not sha256", digest.Digest("sha512:" + strings.Repeat("ab", 64)), manifest, 1, ErrUnsupported},
		{"path in the digest", digest.Digest("sha256:../../etc"), manifest, 1, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			var err error
			for range tc.times {
				err = s.Put(tc.d, tc.data)
			}
			var de *DigestError
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case errors.As(tc.wantErr, &de) && !errors.As(err, &de):
				t.Fatalf("err = %v, want a digest error", err)
			case errors.Is(tc.wantErr, ErrUnsupported) && !errors.Is(err, ErrUnsupported):
				t.Fatalf("err = %v, want %v", err, ErrUnsupported)
			}
			if left := dirNames(t, filepath.Join(s.Dir(), partialDir)); len(left) != 0 {
				t.Errorf("partial files left: %v", left)
			}
			blobs := dirNames(t, filepath.Join(s.Dir(), blobDir))
			if tc.wantErr != nil {
				if len(blobs) != 0 {
					t.Errorf("rejected content left %v in the store", blobs)
				}
				return
			}
			if len(blobs) != 1 || blobs[0] != d.Encoded() {
				t.Fatalf("store holds %v, want only %s", blobs, d.Encoded())
			}
			fi, _ := os.Stat(s.Path(d))
			if fi.Mode().Perm() != 0o444 {
				t.Errorf("stored blob mode %v, want 0444", fi.Mode().Perm())
			}
			if b, err := s.Read(d); err != nil || string(b) != string(manifest) {
				t.Errorf("read %q, %v", b, err)
			}
		})
	}
}

// A writer killed mid-download leaves a partial file; the next one resumes at its offset,
// and corrupt content is discarded rather than stored.
func TestWriterResumesAndVerifies(t *testing.T) {
	data := []byte(strings.Repeat("layer bytes ", 1000))
	d := digest.FromBytes(data)
	tests := []struct {
		name       string
		first      []byte // what the interrupted writer wrote
		rest       []byte // what the resuming writer appends
		wantOffset int64
		wantStored bool
	}{
		{"nothing left behind", nil, data, 0, true},
		{"resumes at the offset", data[:5000], data[5000:], 5000, true},
		{"corrupt tail never enters", data[:5000], []byte("garbage"), 5000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if tc.first != nil {
				w, _, err := s.Acquire(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				w.Write(tc.first)
				w.Release()
			}
			w, stored, err := s.Acquire(ctx, d)
			if err != nil || stored {
				t.Fatalf("acquire: stored=%v err=%v", stored, err)
			}
			defer w.Release()
			if w.Offset() != tc.wantOffset {
				t.Fatalf("offset %d, want %d", w.Offset(), tc.wantOffset)
			}
			w.Write(tc.rest)
			err = w.Commit()
			var de *DigestError
			if tc.wantStored != (err == nil) || (!tc.wantStored && !errors.As(err, &de)) {
				t.Fatalf("commit: %v", err)
			}
			if s.Has(d, int64(len(data))) != tc.wantStored {
				t.Fatalf("stored = %v, want %v", !tc.wantStored, tc.wantStored)
			}
			if !tc.wantStored && w.Offset() != 0 {
				t.Errorf("corrupt content kept for a resume: offset %d", w.Offset())
			}
		})
	}
}

// Two writers of one blob: one writes, the other waits for it and then finds the blob stored.
func TestConcurrentWritersOfOneBlob(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	data := []byte("one blob, two builds")
	d := digest.FromBytes(data)
	w, stored, err := s.Acquire(ctx, d)
	if err != nil || stored {
		t.Fatalf("first: stored=%v err=%v", stored, err)
	}
	type result struct {
		w      *Writer
		stored bool
		err    error
	}
	second := make(chan result, 1)
	waitCtx, waiting := waittest.SignalOnWait()
	go func() {
		w, stored, err := s.Acquire(waitCtx, d)
		second <- result{w, stored, err}
	}()
	select {
	case r := <-second:
		t.Fatalf("second writer did not wait: %+v", r)
	case <-waiting:
	}
	w.Write(data)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.Release()
	r := <-second
	if r.err != nil || !r.stored || r.w != nil {
		t.Fatalf("second writer: %+v, want it to find the blob stored", r)
	}
	// A waiter gives up with its context.
	w2, _, err := s.Acquire(ctx, digest.FromString("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Release()
	if _, _, err := s.Acquire(waittest.CancelOnWait(), digest.FromString("other")); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a cancelled context: %v", err)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	linked, unlinked := []byte("linked"), []byte("unlinked")
	tests := []struct {
		name         string
		opts         PruneOptions
		wantBlobs    []string
		wantPartials int
	}{
		{"partials only", PruneOptions{PartialAge: time.Hour}, []string{"linked", "unlinked"}, 1},
		{"unlinked blobs too", PruneOptions{PartialAge: time.Hour, Unlinked: true}, []string{"linked"}, 1},
		{"every unheld partial", PruneOptions{}, []string{"linked", "unlinked"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			for _, b := range [][]byte{linked, unlinked} {
				if err := s.Put(digest.FromBytes(b), b); err != nil {
					t.Fatal(err)
				}
			}
			layout := filepath.Join(t.TempDir(), "blob")
			if err := os.Link(s.Path(digest.FromBytes(linked)), layout); err != nil {
				t.Fatal(err)
			}
			old, fresh, held := digest.FromString("old"), digest.FromString("fresh"), digest.FromString("held")
			for _, d := range []digest.Digest{old, fresh, held} {
				os.WriteFile(s.partialPath(d), []byte("part"), 0o644)
			}
			long := time.Now().Add(-2 * time.Hour)
			os.Chtimes(s.partialPath(old), long, long)
			os.Chtimes(s.partialPath(held), long, long)
			w, _, err := s.Acquire(ctx, held)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()

			st, err := s.Prune(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range [][]byte{linked, unlinked} {
				want := false
				for _, n := range tc.wantBlobs {
					want = want || n == string(b)
				}
				if s.Has(digest.FromBytes(b), -1) != want {
					t.Errorf("blob %q stored = %v, want %v", b, !want, want)
				}
			}
			if st.Blobs != 2-len(tc.wantBlobs) || st.Partials != tc.wantPartials {
				t.Errorf("stats %+v", st)
			}
			if _, err := os.Stat(s.partialPath(held)); err != nil {
				t.Errorf("pruned a partial file its writer holds: %v", err)
			}
		})
	}
}
