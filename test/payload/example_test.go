package payload_test

import (
	"context"
	"fmt"

	"github.com/snofactory/snofactory/test/payload"
)

func ExampleGenerate() {
	registryAddr := "127.0.0.1:5000" // e.g. registry.StartT(t, ...).Addr()
	rel, err := payload.Generate(context.Background(), registryAddr, payload.Options{
		Size: payload.Tiny, // 40 components, ~1 MB
		Seed: 1,
		ISO:  payload.ISO{Path: "build/conformance/conformance.iso"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	inst, _ := rel.Component(payload.NameInstaller)
	fmt.Println(rel.PullSpec, inst.PullSpec, rel.UniqueBlobBytes)
}
