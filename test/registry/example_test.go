package registry_test

import (
	"context"
	"fmt"

	"github.com/snofactory/snofactory/test/registry"
)

// In tests use registry.StartT(t, registry.Options{}), which stops the
// registry in t.Cleanup.
func ExampleStart() {
	ctx := context.Background()
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Stop()

	// ... push and pull reg.Ref("repo/image:tag") ...

	reg.Reset() // count only what happens from here on
	// ... a cached pull ...
	if s := reg.Stats(); s.BlobGetBytes != 0 {
		fmt.Println("cache miss:", s.BlobGets, "blob GETs")
	}
}
