package diskpack

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/folbricht/desync"
)

// Every index names desync's chunker as its Algorithm, and chunk IDs of signed seeds
// depend on where it cuts: the package's own chunker must cut exactly where desync's does,
// whatever the data, the sizes, and however long the extent.
func TestChunkerCutsAsDesync(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Text-like: few distinct bytes, repeated runs, as in the bench's disks.
	text := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh \n"[rng.IntN(10)]
		}
		return b
	}
	mixed := slices.Concat(random(3<<20), make([]byte, 2<<20), text(3<<20), random(100))
	for _, tc := range []struct {
		name string
		p    Params
		data []byte
	}{
		{"random, default sizes", DefaultParams(), random(12 << 20)},
		{"text, default sizes", DefaultParams(), text(6 << 20)},
		{"zeros: every chunk max", DefaultParams(), make([]byte, 5<<20+17)},
		{"mixed, 16 GiB disk sizes", ParamsFor(16 << 30), mixed},
		{"mixed, smallest sizes", Params{Min: minChunkSize, Avg: minChunkSize, Max: 2 * minChunkSize}, mixed[:1<<20]},
		{"shorter than min", DefaultParams(), random(1000)},
		{"exactly min", DefaultParams(), random(64 << 10)},
		{"between min and max", DefaultParams(), random(300 << 10)},
		{"exactly max", DefaultParams(), random(1 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := desyncCuts(t, tc.data, tc.p)
			got := ourCuts(t, tc.data, tc.p)
			if !slices.Equal(got, want) {
				t.Fatalf("cut at %v, desync cuts at %v", got, want)
			}
			if len(want) < 2 && len(tc.data) > int(tc.p.Max) {
				t.Fatalf("%d bytes made %d chunks: the case tests nothing", len(tc.data), len(want))
			}
		})
	}
}

// desyncCuts is where desync's Chunker ends each chunk of data.
func desyncCuts(t *testing.T, data []byte, p Params) []int64 {
	t.Helper()
	ch, err := desync.NewChunker(bytes.NewReader(data), uint64(p.Min), uint64(p.Avg), uint64(p.Max))
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int64
	for {
		start, b, err := ch.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return cuts
		}
		cuts = append(cuts, int64(start)+int64(len(b)))
	}
}

// ourCuts is where cutExtent ends each chunk of data, written to a file at an offset.
func ourCuts(t *testing.T, data []byte, p Params) []int64 {
	t.Helper()
	const at = 12345
	name := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(name, append(make([]byte, at), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cuts []int64
	var next int64 = at
	each := func(off int64, b []byte) error {
		if off != next || !bytes.Equal(b, data[off-at:off-at+int64(len(b))]) {
			t.Fatalf("chunk at %d (%d bytes) is not the data's bytes there, or not where the last ended (%d)", off, len(b), next)
		}
		next = off + int64(len(b))
		cuts = append(cuts, next-at)
		return nil
	}
	z := newBuzhash(p)
	if err := z.cutExtent(context.Background(), f, extent{at, int64(len(data))}, make([]byte, 4*p.Max), each); err != nil {
		t.Fatal(err)
	}
	return cuts
}
