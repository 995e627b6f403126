package resolve

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/test/check"

	"github.com/snofactory/snofactory/test/faultproxy"
	pl "github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

// checkOperator asserts the lock pins exactly the bundle and its related images, by digest,
// under operator:<package>.
func checkOperator(t *testing.T, lock *lockfile.Lock, cat *pl.Catalog, pkg, bundle string) {
	t.Helper()
	b, ok := cat.Bundles[bundle]
	if !ok {
		t.Fatalf("the fixture has no bundle %s", bundle)
	}
	want := map[string]string{"bundle": b.Digest} // name -> digest
	for _, r := range b.Related {
		want[r.Name] = r.Digest
	}
	got := map[string]lockfile.LockedImage{}
	for _, im := range lock.Images {
		if im.Source == lockfile.SourceOperator+":"+pkg {
			got[im.Name] = im
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: lock has %d images %v, want %d (%v)", pkg, len(got), got, len(want), want)
	}
	for n, dg := range want {
		im, ok := got[n]
		switch {
		case !ok:
			t.Errorf("%s: no %s image in the lock", pkg, n)
		case im.Digest != dg:
			t.Errorf("%s: %s digest %s, want %s (bundle %s)", pkg, n, im.Digest, dg, bundle)
		case !strings.HasSuffix(im.Ref, "@"+dg) || strings.Contains(im.Ref[strings.LastIndex(im.Ref, "/"):], ":v"):
			t.Errorf("%s: %s ref %s is not pinned to %s", pkg, n, im.Ref, dg)
		}
	}
	if got["bundle"].Ref != b.Image {
		t.Errorf("%s: bundle ref %s, want %s", pkg, got["bundle"].Ref, b.Image)
	}
}

func TestResolveCatalog(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	ctx := context.Background()
	cat, err := pl.GenerateCatalog(ctx, reg.Addr(), pl.CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	regOpts := registries.Config{Insecure: []string{reg.Addr()}}
	tests := []struct {
		name    string
		op      CatalogOperator
		bundle  string   // the head the lock must pin
		errHave []string // or the error's fragments
	}{
		{name: "default channel, head past replaces and skips", op: CatalogOperator{Package: "ptp-operator"}, bundle: "ptp-operator.v4.16.3"},
		{name: "explicit channel", op: CatalogOperator{Package: "ptp-operator", Channel: "4.15"}, bundle: "ptp-operator.v4.15.1"},
		{name: "catalog by digest", op: CatalogOperator{Package: "ptp-operator", Catalog: cat.PullSpec}, bundle: "ptp-operator.v4.16.3"},
		{name: "YAML catalog file, skipRange only", op: CatalogOperator{Package: "sriov-network-operator"}, bundle: "sriov-network-operator.v4.16.5"},
		{name: "multi-file package, default channel", op: CatalogOperator{Package: "lvms-operator"}, bundle: "lvms-operator.v4.16.1"},
		{name: "multi-file package, skips", op: CatalogOperator{Package: "lvms-operator", Channel: "stable-4.15"}, bundle: "lvms-operator.v4.15.3"},
		{name: "missing package", op: CatalogOperator{Package: "ptp-operatr"},
			errHave: []string{`no package "ptp-operatr"`, `did you mean "ptp-operator"?`, "broken-operator, lvms-operator, ptp-operator, sriov-network-operator", cat.Ref}},
		{name: "missing channel", op: CatalogOperator{Package: "ptp-operator", Channel: "stabel"},
			errHave: []string{`no channel "stabel"`, `did you mean "stable"?`, "its channels: 4.15, stable", "package ptp-operator", cat.Ref}},
		{name: "unknown channel, no suggestion", op: CatalogOperator{Package: "lvms-operator", Channel: "fast"},
			errHave: []string{`no channel "fast"; its channels: stable-4.15, stable-4.16`}},
		{name: "two heads", op: CatalogOperator{Package: "broken-operator"},
			errHave: []string{"channel alpha of package broken-operator", "2 heads (broken-operator.v0.1.0, broken-operator.v0.2.0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := tt.op
			if op.Catalog == "" {
				op.Catalog = cat.Ref
			}
			lock, err := Resolve(ctx, Options{Catalogs: []CatalogOperator{op}, Registry: regOpts}, Runtime{})
			if tt.errHave != nil {
				if err == nil {
					t.Fatalf("resolved %+v, want an error", lock.Images)
				}
				for _, s := range tt.errHave {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkOperator(t, lock, cat, op.Package, tt.bundle)
			if len(lock.Images) != 1+len(cat.Bundles[tt.bundle].Related) {
				t.Errorf("lock has %d images, want only the operator's: %+v", len(lock.Images), lock.Images)
			}
		})
	}
}

// TestResolveCatalogs resolves several operators from several catalogs at once, among them
// catalogs keeping their files elsewhere than /configs or carrying no configs label, next
// to a bundle named directly.
func TestResolveCatalogs(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	ctx := context.Background()
	primary, err := pl.GenerateCatalog(ctx, reg.Addr(), pl.CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := pl.DefaultCatalogPackages()
	moved, err := pl.GenerateCatalog(ctx, reg.Addr(), pl.CatalogOptions{Repo: "community/catalog", Tag: "latest",
		ConfigsDir: "/srv/catalog", ImagePrefix: "community", Packages: pkgs[1:2]})
	if err != nil {
		t.Fatal(err)
	}
	unlabelled, err := pl.GenerateCatalog(ctx, reg.Addr(), pl.CatalogOptions{Repo: "old/catalog", NoLabel: true,
		ImagePrefix: "old", Packages: pkgs[2:3]})
	if err != nil {
		t.Fatal(err)
	}
	direct := primary.Bundles["ptp-operator.v4.15.0"]
	opts := Options{
		Catalogs: []CatalogOperator{
			{Package: "ptp-operator", Channel: "stable", Catalog: primary.Ref},
			{Package: "lvms-operator", Channel: "stable-4.15", Catalog: primary.Ref},
			{Package: "sriov-network-operator", Catalog: moved.Ref},
		},
		Operators: []string{direct.Image},
		Registry:  registries.Config{Insecure: []string{reg.Addr()}},
	}
	lock, err := Resolve(ctx, opts, Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	checkOperator(t, lock, primary, "ptp-operator", "ptp-operator.v4.16.3")
	checkOperator(t, lock, primary, "lvms-operator", "lvms-operator.v4.15.3")
	checkOperator(t, lock, moved, "sriov-network-operator", "sriov-network-operator.v4.16.5")
	if _, err := Resolve(ctx, Options{Catalogs: []CatalogOperator{{Package: "lvms-operator", Catalog: unlabelled.Ref}}, Registry: opts.Registry}, Runtime{}); err != nil {
		t.Errorf("catalog without configs label: %v", err)
	}
	// The package another catalog holds is not found in this one.
	_, err = Resolve(ctx, Options{Catalogs: []CatalogOperator{{Package: "ptp-operator", Catalog: moved.Ref}}, Registry: opts.Registry}, Runtime{})
	if err == nil || !strings.Contains(err.Error(), "it has sriov-network-operator") {
		t.Errorf("ptp-operator from %s: %v, want the packages listed", moved.Ref, err)
	}

	// The same inputs give the same lock, and images are sorted by source.
	again, err := Resolve(ctx, opts, Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	if d := lockfile.Verify(lock, again); len(d) > 0 {
		t.Errorf("second resolution differs: %v", d)
	}
	for i := 1; i < len(lock.Images); i++ {
		if lock.Images[i-1].Source > lock.Images[i].Source {
			t.Errorf("lock images not sorted: %s before %s", lock.Images[i-1].Source, lock.Images[i].Source)
		}
	}
}

func TestParseCatalog(t *testing.T) {
	pkg := func(n, def string) string {
		return `{"schema":"olm.package","name":"` + n + `","defaultChannel":"` + def + `"}`
	}
	tests := []struct {
		name      string
		files     map[string]string
		packages  []string
		channels  map[string]int // package -> channel count
		bundles   map[string]int
		errHave   string
		checkHead map[string]string // "pkg/channel" -> head
	}{
		{
			name: "JSON stream without separators, unknown schemas skipped",
			files: map[string]string{"a/catalog.json": pkg("a", "s") +
				`{"schema":"olm.channel","package":"a","name":"s","entries":[{"name":"a.v1"},{"name":"a.v2","replaces":"a.v1"}]}` +
				"\n\n" + `{"schema":"olm.bundle","package":"a","name":"a.v2","image":"x/a@sha256:00","properties":[{"type":"olm.maxOpenShiftVersion","value":4.17}]}` +
				`{"schema":"olm.deprecations","package":"a","entries":[]}`},
			packages: []string{"a"}, channels: map[string]int{"a": 1}, bundles: map[string]int{"a": 1},
			checkHead: map[string]string{"a/s": "a.v2"},
		},
		{
			name:     "YAML documents with empty ones, any file name",
			files:    map[string]string{"b/index": "---\nschema: olm.package\nname: b\ndefaultChannel: fast\n---\n---\nschema: olm.channel\npackage: b\nname: fast\nentries:\n  - name: b.v1\n  - name: b.v3\n    replaces: b.v1\n    skips: [b.v2]\n  - name: b.v2\n    replaces: b.v1\n"},
			packages: []string{"b"}, channels: map[string]int{"b": 1}, bundles: map[string]int{"b": 0},
			checkHead: map[string]string{"b/fast": "b.v3"},
		},
		{
			name: "objects spread over files and directories",
			files: map[string]string{
				"c/package.yaml":       "schema: olm.package\nname: c\n",
				"c/channels/one.json":  `{"schema":"olm.channel","package":"c","name":"one","entries":[{"name":"c.v1"}]}`,
				"c/channels/two.yaml":  "schema: olm.channel\npackage: c\nname: two\nentries: [{name: c.v1}]\n",
				"c/bundles/c.v1.json":  `{"schema":"olm.bundle","package":"c","name":"c.v1","image":"x/c:1"}`,
				"d.json":               pkg("d", ""),
				".wh.removed.json":     "not read",
				"c/bundles/.wh.c.v0.y": "not read",
			},
			packages: []string{"c", "d"}, channels: map[string]int{"c": 2, "d": 0}, bundles: map[string]int{"c": 1},
		},
		{
			name: ".indexignore patterns",
			files: map[string]string{
				".indexignore":        "# comment\n*.md\ndocs/\n/c/extra.json\n!keep.md\n",
				"README.md":           "# not yaml: [",
				"docs/x.json":         "{broken",
				"c/extra.json":        "{broken",
				"c/deep/extra.json":   pkg("e", "s"),
				"c/.indexignore":      "local/\n",
				"c/local/thing.yaml":  ": not valid",
				"local/kept.json":     pkg("f", "s"),
				"c/catalog.json":      pkg("c", "s"),
				"c/docs-not-dir.json": pkg("g", "s"),
			},
			packages: []string{"c", "e", "f", "g"},
		},
		{name: "no schema", files: map[string]string{"x.json": `{"name":"x"}`}, errHave: "x.json: object 1 has no schema field"},
		{name: "not an object", files: map[string]string{"x.yaml": "- a\n- b\n"}, errHave: "x.yaml: document 1 is a []interface {}"},
		{name: "broken JSON", files: map[string]string{"x.json": pkg("x", "s") + `{"schema":`}, errHave: "x.json: object 2"},
		{name: "package twice", files: map[string]string{"a.json": pkg("a", "s"), "b.json": pkg("a", "s")}, errHave: "b.json: package a is declared twice (also in a.json)"},
		{name: "channel of unknown package", files: map[string]string{"a.json": `{"schema":"olm.channel","package":"zz","name":"s","entries":[]}`}, errHave: `olm.channel s belongs to package "zz", which has no olm.package`},
		{name: "channel twice", files: map[string]string{"a.json": pkg("a", "s") + `{"schema":"olm.channel","package":"a","name":"s"}{"schema":"olm.channel","package":"a","name":"s"}`}, errHave: "channel s of package a is declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for n, s := range tt.files {
				files[n] = []byte(s)
			}
			cat, err := parseCatalog(files)
			if check.Error(t, err, tt.errHave) {
				return
			}
			if got := strings.Join(slices.Sorted(maps.Keys(cat.packages)), ","); got != strings.Join(tt.packages, ",") {
				t.Errorf("packages %s, want %s", got, strings.Join(tt.packages, ","))
			}
			for p, n := range tt.channels {
				if got := len(cat.packages[p].channels); got != n {
					t.Errorf("package %s has %d channels, want %d", p, got, n)
				}
			}
			for p, n := range tt.bundles {
				if got := len(cat.packages[p].bundles); got != n {
					t.Errorf("package %s has %d bundles, want %d", p, got, n)
				}
			}
			for pc, want := range tt.checkHead {
				p, c, _ := strings.Cut(pc, "/")
				got, err := cat.packages[p].channels[c].head()
				if err != nil || got != want {
					t.Errorf("head of %s = %q, %v; want %s", pc, got, err, want)
				}
			}
		})
	}
}

func TestChannelHead(t *testing.T) {
	e := func(name, replaces string, skips ...string) fbcEntry {
		return fbcEntry{Name: name, Replaces: replaces, Skips: skips}
	}
	tests := []struct {
		name    string
		entries []fbcEntry
		head    string
		errHave string
	}{
		{name: "single", entries: []fbcEntry{e("a.v1", "")}, head: "a.v1"},
		{name: "replaces chain in any order", entries: []fbcEntry{e("a.v3", "a.v2"), e("a.v1", ""), e("a.v2", "a.v1")}, head: "a.v3"},
		{name: "skips prune a branch", entries: []fbcEntry{e("a.v1", ""), e("a.v2", "a.v1"), e("a.v3", "a.v1", "a.v2")}, head: "a.v3"},
		{name: "skipRange does not prune", entries: []fbcEntry{e("a.v1", ""), {Name: "a.v2", SkipRange: "<a.v2"}}, errHave: "2 heads (a.v1, a.v2)"},
		{name: "replaces a bundle outside the channel", entries: []fbcEntry{e("a.v5", "a.v4")}, head: "a.v5"},
		{name: "cycle", entries: []fbcEntry{e("a.v1", "a.v2"), e("a.v2", "a.v1")}, errHave: "no head"},
		{name: "empty", errHave: "no entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&fbcChannel{Entries: tt.entries}).head()
			if tt.errHave != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHave) {
					t.Fatalf("head = %q, %v; want an error containing %q", got, err, tt.errHave)
				}
				return
			}
			if err != nil || got != tt.head {
				t.Errorf("head = %q, %v; want %s", got, err, tt.head)
			}
		})
	}
}

func TestDidYouMean(t *testing.T) {
	names := []string{"lvms-operator", "ptp-operator", "sriov-network-operator"}
	for word, want := range map[string]string{
		"ptp-operatr":   `"ptp-operator"`,
		"ptp":           "",
		"sriov-network": `"sriov-network-operator"`,
		"metallb":       "",
	} {
		got := didYouMean(word, names)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("didYouMean(%q) = %q, want %s", word, got, want)
		}
	}
}

// TestResolveCatalogLayers reads a catalog whose upper layer rewrites a package file and
// adds the .indexignore that hides a broken file of the lower layer: what the container
// sees is what counts.
func TestResolveCatalogLayers(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	old := push(t, reg.Ref("ops/a-bundle:v1"), layer(t, map[string]string{"manifests/a.clusterserviceversion.yaml": "kind: ClusterServiceVersion\n"}))
	cur := push(t, reg.Ref("ops/a-bundle:v2"), layer(t, map[string]string{"manifests/a.clusterserviceversion.yaml": "kind: ClusterServiceVersion\nspec: {}\n"}))
	operand := push(t, reg.Ref("ops/a-operand:v2"), layer(t, map[string]string{"usr/bin/a": "a"}))
	pkg := `{"schema":"olm.package","name":"a","defaultChannel":"stable"}`
	bundle := func(name, image string, related ...string) string {
		rel := ""
		for i, r := range related {
			if i > 0 {
				rel += ","
			}
			rel += `{"name":"operand","image":"` + r + `"}`
		}
		return `{"schema":"olm.bundle","package":"a","name":"` + name + `","image":"` + image + `","relatedImages":[` + rel + `]}`
	}
	push(t, reg.Ref("ops/catalog:v1"),
		layer(t, map[string]string{
			"configs/a/catalog.json": pkg + `{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1"}]}` + bundle("a.v1", old),
			"configs/NOTES.txt":      "not: [a catalog",
			"configs/b/catalog.json": `{"schema":"olm.package","name":"b"}`,
			"configs/c/old.json":     "{broken",
			"configs/d/catalog.json": `{"schema":"olm.package","name":"d"}`,
		}),
		layer(t, map[string]string{
			"configs/a/catalog.json": pkg + `{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1"},{"name":"a.v2","replaces":"a.v1"}]}` +
				bundle("a.v1", old) + bundle("a.v2", cur, reg.Ref("ops/a-operand:v2")),
			"configs/.indexignore":       "*.txt\n",
			"configs/b/.wh.catalog.json": "",
			"configs/c/.wh..wh..opq":     "",
			"configs/c/new.json":         `{"schema":"olm.package","name":"c"}`,
			"configs/.wh.d":              "",
		}))
	lock, err := Resolve(context.Background(), Options{Catalogs: []CatalogOperator{{Package: "a", Catalog: reg.Ref("ops/catalog:v1")}},
		Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bundle": cur, "operand": operand}
	if len(lock.Images) != len(want) {
		t.Fatalf("lock images %+v, want %v", lock.Images, want)
	}
	for _, im := range lock.Images {
		if im.Source != "operator:a" || want[im.Name] != im.Ref {
			t.Errorf("locked %+v, want %s under operator:a", im, want[im.Name])
		}
	}
	// b and d were deleted by whiteouts, c's old file by an opaque whiteout.
	_, err = Resolve(context.Background(), Options{Catalogs: []CatalogOperator{{Package: "d", Catalog: reg.Ref("ops/catalog:v1")}},
		Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{})
	if err == nil || !strings.Contains(err.Error(), "it has a, c") {
		t.Errorf("package d removed by a whiteout: %v, want the remaining packages a, c", err)
	}
}

// TestResolveCatalogThroughFaults reads a catalog through a proxy that fails requests and
// truncates layers: a layer read again must not declare its packages twice.
func TestResolveCatalogThroughFaults(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	ctx := context.Background()
	cat, err := pl.GenerateCatalog(ctx, reg.Addr(), pl.CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(ctx, reg.Addr(), faultproxy.Options{Seed: 5, Rate: 0.3, MaxFaultsPerPath: 2,
		RetryAfter: time.Second, Kinds: []faultproxy.Kind{faultproxy.Reset, faultproxy.Error503, faultproxy.Truncate}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	ref := strings.Replace(cat.Ref, reg.Addr(), proxy.Addr(), 1)
	lock, err := Resolve(ctx, Options{Catalogs: []CatalogOperator{{Package: "ptp-operator", Catalog: ref}, {Package: "lvms-operator", Catalog: ref}},
		Registry: registries.Config{Insecure: []string{reg.Addr(), proxy.Addr()}}}, Runtime{})
	if err != nil {
		t.Fatalf("resolve through faults (%+v): %v", proxy.Stats(), err)
	}
	if proxy.Stats().Total() == 0 {
		t.Fatalf("the proxy injected no faults")
	}
	checkOperator(t, lock, cat, "ptp-operator", "ptp-operator.v4.16.3")
	checkOperator(t, lock, cat, "lvms-operator", "lvms-operator.v4.16.1")
	t.Logf("faults injected: %v", proxy.Stats().Faults)
}

func TestResolveCatalogRejects(t *testing.T) {
	for _, tt := range []struct {
		ops     []CatalogOperator
		errHave string
	}{
		{[]CatalogOperator{{Package: "a", Catalog: "x/c:1"}, {Package: "a", Channel: "b", Catalog: "y/c:1"}}, "operator a is named twice (catalogs x/c:1 and y/c:1)"},
		{[]CatalogOperator{{Package: "a"}}, "package and catalog are both required"},
	} {
		_, err := Resolve(context.Background(), Options{Catalogs: tt.ops}, Runtime{})
		if err == nil || !strings.Contains(err.Error(), tt.errHave) {
			t.Errorf("%+v: %v, want %q", tt.ops, err, tt.errHave)
		}
	}
}

// BenchmarkDecodeCatalog decodes a JSON catalog file of 200 bundles carrying inline
// objects, keeping one package, as readCatalog does for every file of a real index.
func BenchmarkDecodeCatalog(b *testing.B) {
	var buf strings.Builder
	blob := strings.Repeat("QUJDREVGR0g=", 4096) // ~48 KiB of base64, like an inline CSV
	for i := range 200 {
		pkg := "other"
		if i%10 == 0 {
			pkg = "wanted"
		}
		fmt.Fprintf(&buf, `{"schema":"olm.bundle","package":%q,"name":"%s.v%d","image":"r/b@sha256:%064d","properties":[{"type":"olm.bundle.object","value":{"data":%q}}],"relatedImages":[{"name":"op","image":"r/o@sha256:%064d"}]}`+"\n",
			pkg, pkg, i, i, blob, i)
	}
	data := []byte(buf.String())
	b.SetBytes(int64(len(data)))
	want := func(p string) bool { return p == "wanted" }
	for b.Loop() {
		objs, err := decodeObjects("catalog.json", bytes.NewReader(data), want)
		if err != nil || len(objs) != 20 {
			b.Fatalf("%d objects, %v", len(objs), err)
		}
	}
}
