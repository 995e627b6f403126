package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"apiVersion", "kind", "metadata", "spec", "releaseImage", "pullSecretFile", "memory", "cpus"}
	tests := []struct{ in, want string }{
		{"tpye", ""},
		{"knid", "kind"},
		{"specs", "spec"},
		{"apiversion", "apiVersion"},
		{"api_version", "apiVersion"},
		{"release-image", "releaseImage"},
		{"releaseImg", "releaseImage"},
		{"pullSecret", "pullSecretFile"},
		{"memroy", "memory"},
		{"cpu", "cpus"},
		{"frobnicate", ""},
		{"", ""},
		{"x", ""},
	}
	for _, tc := range tests {
		if got := Closest(tc.in, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"type", "tpye", 1}, {"héllo", "hello", 1},
	}
	for _, tc := range tests {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
