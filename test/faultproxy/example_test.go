package faultproxy_test

import (
	"context"
	"fmt"

	"github.com/snofactory/snofactory/test/faultproxy"
)

// A client pointed at p.Addr() sees about 15% of its blob downloads fail,
// the same ones on every run with the same seed.
func ExampleStart() {
	registryAddr := "127.0.0.1:5000" // e.g. registry.StartT(t, ...).Addr()
	p, err := faultproxy.Start(context.Background(), registryAddr, faultproxy.Options{
		Seed:             42,
		Rate:             0.15,
		Eligible:         faultproxy.BlobGets,
		Kinds:            []faultproxy.Kind{faultproxy.Reset, faultproxy.Error503RetryAfter, faultproxy.Truncate},
		MaxFaultsPerPath: 2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	// ... pull p.Addr() + "/repo/image:tag" ...
	fmt.Println(p.Stats().Faults)
}
