package payload

import (
	"context"
	"testing"

	"github.com/snofactory/snofactory/test/registry"
)

// BenchmarkGenerate measures building and pushing the default (Small, 60
// components) payload into a fresh registry.
func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		reg := registry.StartT(b, registry.Options{})
		b.StartTimer()
		rel, err := Generate(context.Background(), reg.Addr(), Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(rel.UniqueBlobBytes)
		b.StopTimer()
		if err := reg.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
