package registries

import "testing"

func TestRegistriesDropIn(t *testing.T) {
	got := registriesDropIn(Config{Insecure: []string{"127.0.0.1:5000"}, Mirrors: []Mirror{{Source: "quay.io/ocp", Mirrors: []string{"127.0.0.1:5000/ocp"}}}})
	want := `[[registry]]
prefix = "quay.io/ocp"
location = "quay.io/ocp"
insecure = false
mirror-by-digest-only = true
[[registry.mirror]]
location = "127.0.0.1:5000/ocp"
insecure = true

[[registry]]
location = "127.0.0.1:5000"
insecure = true

`
	if got != want {
		t.Errorf("drop-in:\n%s\nwant:\n%s", got, want)
	}
}
