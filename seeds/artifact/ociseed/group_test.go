package ociseed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/test/registry"
)

// rangeProxy stands in front of reg and passes each Range header through rewrite (an
// empty result drops it), counting the requests it rewrote.
func rangeProxy(t *testing.T, reg *registry.Registry, rewrite func(string) string) (host string, rewrote *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	rewrote = &atomic.Int64{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rg := r.Header.Get("Range"); rg != "" {
			r.Header.Del("Range")
			if next := rewrite(rg); next != "" {
				r.Header.Set("Range", next)
			}
			rewrote.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), rewrote
}

// rangeIgnorer stands in front of reg as a registry that ignores Range requests: RFC 9110
// §14.2 lets a server ignore the header and answer 200 with the whole content, and the OCI
// distribution spec (spec.md, "Pulling blobs") leaves Range support to the registry. It
// counts the 200s it gave to a GET that asked for a range.
func rangeIgnorer(t *testing.T, reg *registry.Registry) (host string, ignored *atomic.Int64) {
	return rangeProxy(t, reg, func(string) string { return "" })
}

// rangeShifter stands in front of reg as a registry that answers a range with another one
// (206 with its own Content-Range, RFC 9110 §14.4): one byte further on.
func rangeShifter(t *testing.T, reg *registry.Registry) string {
	host, _ := rangeProxy(t, reg, func(rg string) string {
		var from, to int64
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &from, &to); err != nil {
			return rg
		}
		return fmt.Sprintf("bytes=%d-%d", from+1, to+1)
	})
	return host
}

// missingBytes is the stored bytes of the chunks of x that old has no chunk for.
func missingBytes(x, old *diskpack.Index) int64 {
	have := map[digest.Digest]bool{}
	for _, c := range old.Chunks {
		have[c.ID] = true
	}
	blobs, _ := x.Blobs()
	var n int64
	for _, b := range blobs {
		if !have[b.ID] {
			n += b.Size
		}
	}
	return n
}

// groupBytesServed is the body bytes of the GETs of x's groups among reqs.
func groupBytesServed(reqs []registry.Request, x *diskpack.Index) int64 {
	groups := map[string]bool{}
	for _, g := range x.Groups() {
		groups[g.Digest.String()] = true
	}
	var n int64
	for _, q := range reqs {
		if q.Method == http.MethodGet && q.Kind() == "blob" && groups[q.Path[strings.LastIndexByte(q.Path, '/')+1:]] {
			n += q.Bytes
		}
	}
	return n
}

// A chunked seed goes to the registry as chunk groups, fewer blobs than chunks, and the
// registry holds the groups, not the chunks. A pull --from the earlier build fetches only
// the chunks it lacks, by range requests on their groups: the registry serves exactly
// their bytes. A registry that ignores Range serves whole groups, of which the pull keeps
// the chunks it asked for; and a ranged chunk whose bytes are wrong is refused.
func TestDeltaGroupsAndRanges(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, b, ma, mb := deltaSeeds(t)
	ctx := context.Background()
	xa := firstDiskIndex(t, a, ma)
	xb := firstDiskIndex(t, b, mb)
	blobs, _ := xa.Blobs()
	groups := xa.Groups()
	if len(groups) > len(blobs)*3/4 {
		t.Fatalf("%d groups of %d chunks", len(groups), len(blobs))
	}
	for _, ref := range []string{"seeds/demo:a", "seeds/demo:b"} {
		dir := map[string]string{"seeds/demo:a": a, "seeds/demo:b": b}[ref]
		if _, err := ociseed.Push(ctx, dir, r.Ref(ref), opts()...); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(d digest.Digest) bool {
		_, err := os.Stat(filepath.Join(r.StorageDir(), "docker/registry/v2/blobs/sha256", d.Encoded()[:2], d.Encoded(), "data"))
		return err == nil
	}
	for _, g := range groups {
		if !stored(g.Digest) {
			t.Errorf("group %s is not in the registry", g.Digest)
		}
		for _, c := range g.Blobs {
			if len(g.Blobs) > 1 && stored(c.Digest) {
				t.Errorf("chunk %s of a group of %d is a blob of its own", c.Digest, len(g.Blobs))
			}
		}
	}
	want := missingBytes(xb, xa)
	rawA := filepath.Join(t.TempDir(), "a.raw")
	if _, err := seed.WriteDevice(ctx, a, rawA); err != nil {
		t.Fatal(err)
	}
	ignoring, ignored := rangeIgnorer(t, r)
	for _, tc := range []struct {
		name, host string
		from       string
	}{
		{"ranges from the earlier seed", r.Addr(), a},
		{"ranges from the raw disk", r.Addr(), rawA},
		{"a registry that ignores ranges", ignoring, a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.Reset()
			ignored.Store(0)
			var st ociseed.PullStats
			dst := filepath.Join(t.TempDir(), "b")
			if _, err := ociseed.Pull(ctx, tc.host+"/seeds/demo:b", dst, opts(ociseed.WithFrom(tc.from), ociseed.WithPullStats(&st))...); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, b, dst, mb)
			if st.FetchedBytes != want || st.Ranges == 0 || st.Requests > st.Fetched {
				t.Errorf("fetched %+v, want %d bytes of chunks by ranges", st, want)
			}
			served := groupBytesServed(r.Requests(), xb)
			if tc.host == ignoring {
				if ignored.Load() != st.Ranges || served <= want {
					t.Errorf("the registry ignored %d of %d ranges and served %d bytes for %d", ignored.Load(), st.Ranges, served, want)
				}
			} else if served != want {
				t.Errorf("the registry served %d chunk bytes, want the %d missing", served, want)
			}
		})
	}

	// A registry that answers a range with other bytes than asked is refused by its
	// Content-Range, before any byte lands.
	_, err := ociseed.Pull(ctx, rangeShifter(t, r)+"/seeds/demo:b", filepath.Join(t.TempDir(), "shifted"), opts(ociseed.WithFrom(a))...)
	if err == nil || !strings.Contains(err.Error(), "answered with Content-Range") {
		t.Fatalf("Pull from a registry that shifts ranges = %v, want the Content-Range named", err)
	}

	// Damage a chunk that a pull --from fetches by range: the range's check refuses it.
	var target diskpack.Group
	var off int64
	have := map[digest.Digest]bool{}
	for _, c := range xa.Chunks {
		have[c.ID] = true
	}
	for _, g := range xb.Groups() {
		for _, c := range g.Blobs {
			if !have[c.ID] && len(g.Blobs) > 1 {
				target, off = g, c.At+c.Size/2
			}
		}
	}
	if target.Digest == "" {
		t.Fatal("no changed chunk shares a group with unchanged ones")
	}
	editBlob(t, r, target.Digest, func(b []byte) []byte { b[off] ^= 0xff; return b })
	_, err = ociseed.Pull(ctx, r.Ref("seeds/demo:b"), filepath.Join(t.TempDir(), "bad"), opts(ociseed.WithFrom(a))...)
	var ce *diskpack.ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), target.Digest.String()+" (bytes ") || !strings.Contains(err.Error(), "blake3 check mismatch") {
		t.Fatalf("Pull of a damaged ranged chunk = %v, want a chunk error naming group %s and the range", err, target.Digest)
	}
}
