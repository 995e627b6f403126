package registries

import (
	"slices"
	"testing"
)

func TestLoopbackRegistriesAreInsecure(t *testing.T) {
	for ref, want := range map[string]bool{
		"127.0.0.1:5000/a:1":  true,
		"127.0.0.2/a:1":       true,
		"localhost/a:1":       true,
		"localhost:5000/a:1":  true,
		"[::1]:5000/a:1":      true,
		"quay.io/a:1":         false,
		"10.0.0.1:5000/a:1":   false,
		"busybox:latest":      false,
		"library/busybox:1.0": false,
	} {
		got := ForImages([]string{ref}, nil).Insecure
		if (len(got) == 1) != want {
			t.Errorf("%s: insecure %v, want loopback=%v", ref, got, want)
		}
	}
}

func TestForImagesCoversMirrorsOnceSorted(t *testing.T) {
	mirrors := []Mirror{{Source: "quay.io/ocp/release", Mirrors: []string{"localhost:5001/ocp", "127.0.0.1:5000/ocp"}}}
	c := ForImages([]string{"127.0.0.1:5000/x:1", "quay.io/y:2"}, mirrors)
	if want := []string{"127.0.0.1:5000", "localhost:5001"}; !slices.Equal(c.Insecure, want) {
		t.Fatalf("insecure %v, want %v", c.Insecure, want)
	}
	if len(c.Mirrors) != 1 || c.Mirrors[0].Source != "quay.io/ocp/release" {
		t.Fatalf("mirrors %+v", c.Mirrors)
	}
}
