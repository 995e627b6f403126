package seed_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// chunked is valid() with a chunked disk as its first, so that index fields are there to
// compare.
func chunked() *seed.Manifest {
	m := valid()
	d := digest.FromString("index")
	m.Disks = append([]seed.Disk{{Format: seed.FormatChunked, File: "disk.pack", Compression: seed.CompressionZstd,
		Index: &seed.DiskIndex{File: "disk.index", Size: 3, Digest: d}, Size: 10, Digest: d, VirtualSize: 100, RawDigest: d}}, m.Disks...)
	return m
}

func marshal(t *testing.T, m *seed.Manifest) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withField adds a top-level field the Go types do not have.
func withField(t *testing.T, b []byte, k string, v any) []byte {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	o[k] = v
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDiffManifests(t *testing.T) {
	other := digest.FromString("another build")
	for _, tc := range []struct {
		name   string
		change func(*seed.Manifest)
		raw    func(t *testing.T, b []byte) []byte // edits the second manifest's bytes
		want   []string
	}{
		{name: "the same manifest", change: func(*seed.Manifest) {}},
		{name: "every per-build field differs", change: func(m *seed.Manifest) {
			for i := range m.Disks {
				d := &m.Disks[i]
				d.Size, d.Digest, d.RawDigest = d.Size+7, other, other
				if d.Index != nil {
					d.Index.Size, d.Index.Digest = d.Index.Size+1, other
				}
			}
			m.SBOM.Size, m.SBOM.Digest = 8, other
			m.Credentials.Size, m.Credentials.Digest = 9, other
		}},
		{name: "created", change: func(m *seed.Manifest) { m.Created = m.Created.Add(24 * time.Hour) }, want: []string{"created"}},
		{name: "an image digest", change: func(m *seed.Manifest) { m.Images[0].Digest = other }, want: []string{"images[0].digest"}},
		{name: "one more image", change: func(m *seed.Manifest) { m.Images = append(m.Images, m.Images[0]) }, want: []string{"images"}},
		{name: "a tool version", change: func(m *seed.Manifest) { m.Tools["qemu-img"] = "9.2.1" }, want: []string{"tools.qemu-img"}},
		{name: "a tool only one has", change: func(m *seed.Manifest) { m.Tools["cosign"] = "v2" }, want: []string{"tools.cosign"}},
		{name: "the disk's virtual size is not per build", change: func(m *seed.Manifest) { m.Disks[1].VirtualSize++ },
			want: []string{"disks[1].virtualSize"}},
		{name: "the index file's name is not per build", change: func(m *seed.Manifest) { m.Disks[0].Index.File = "other.index" },
			want: []string{"disks[0].index.file"}},
		{name: "the lock", change: func(m *seed.Manifest) { m.LockDigest = other }, want: []string{"lockDigest"}},
		{name: "the validation counts", change: func(m *seed.Manifest) { m.Validation.Passed++; m.Validation.Warnings = 0 },
			want: []string{"validation.passed", "validation.warnings"}},
		{name: "no SBOM", change: func(m *seed.Manifest) { m.SBOM = nil }, want: []string{"sbom"}},
		{name: "the credentials' recipients", change: func(m *seed.Manifest) { m.Credentials.Recipients = []string{"age1other"} },
			want: []string{"credentials.recipients[0]"}},
		{name: "a field the types do not know", change: func(*seed.Manifest) {},
			raw: func(t *testing.T, b []byte) []byte { return withField(t, b, "x-built-on", "depot-7") }, want: []string{"x-built-on"}},
		{name: "a number written differently", change: func(*seed.Manifest) {},
			raw: func(t *testing.T, b []byte) []byte {
				return []byte(strings.Replace(string(b), `"schemaVersion": 2`, `"schemaVersion": 2.0`, 1))
			}, want: []string{"schemaVersion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := marshal(t, chunked())
			m := chunked()
			tc.change(m)
			b := marshal(t, m)
			if tc.raw != nil {
				b = tc.raw(t, b)
			}
			got, err := seed.DiffManifests(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("differences %q, want %q", got, tc.want)
			}
			// The comparison is symmetric.
			back, err := seed.DiffManifests(b, a)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back, tc.want) {
				t.Errorf("the other way round: differences %q, want %q", back, tc.want)
			}
		})
	}
}

func TestDiffManifestsRefuses(t *testing.T) {
	good := marshal(t, chunked())
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"not JSON", []byte(`{"name": `), "the second document"},
		{"not an object", []byte(`[1, 2]`), "not a JSON object"},
		{"two objects", append(marshal(t, chunked()), `{}`...), "data after the JSON document"},
		{"too big", []byte(`{"name": "` + strings.Repeat("x", 2<<20) + `"}`), "more than a seed manifest's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := seed.DiffManifests(good, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// The schema declares PerBuildFields under PerBuildKeyword, and each names a field the
// schema has: a path that matches nothing would silently widen no comparison.
func TestSchemaDeclaresPerBuildFields(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(seed.Schema(), &s); err != nil {
		t.Fatal(err)
	}
	raw, _ := s[seed.PerBuildKeyword].([]any)
	var declared []string
	for _, r := range raw {
		declared = append(declared, r.(string))
	}
	if !slices.Equal(declared, seed.PerBuildFields()) {
		t.Fatalf("schema %s = %q, want %q", seed.PerBuildKeyword, declared, seed.PerBuildFields())
	}
	defs := s["$defs"].(map[string]any)
	for _, p := range declared {
		node := s
		for _, part := range strings.Split(p, ".") {
			name, array := strings.CutSuffix(part, "[]")
			props, _ := node["properties"].(map[string]any)
			next, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s: the schema has no %q here", p, name)
				break
			}
			if array {
				if next, ok = next["items"].(map[string]any); !ok {
					t.Errorf("%s: %s is not an array", p, name)
					break
				}
			}
			if ref, ok := next["$ref"].(string); ok {
				next = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			}
			node = next
		}
	}
}

func TestParseSourceDateEpoch(t *testing.T) {
	for _, tc := range []struct {
		env    string
		ok     bool
		unix   int64
		errors bool
	}{
		{env: "", ok: false},
		{env: "1700000000", ok: true, unix: 1700000000},
		{env: "yesterday", errors: true},
	} {
		got, ok, err := seed.ParseSourceDateEpoch(tc.env)
		if (err != nil) != tc.errors || ok != tc.ok || (ok && (got.Unix() != tc.unix || got.Location() != time.UTC)) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %v, %v, %v", tc.env, got, ok, err)
		}
	}
}
