package payload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/test/registry"
)

// TestGenerateCatalog checks the catalog image with skopeo and the catalog files against
// the file-based catalog rules: every object has a schema, channels belong to a declared
// package and name bundles the catalog holds, bundles point at pushed images.
func TestGenerateCatalog(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	ctx := context.Background()
	cat, err := GenerateCatalog(ctx, reg.Addr(), CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := GenerateCatalog(ctx, reg.Addr(), CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != cat.Digest {
		t.Errorf("same options gave catalog digests %s and %s", cat.Digest, again.Digest)
	}

	var info struct {
		Digest string
		Labels map[string]string
	}
	if err := json.Unmarshal(skopeo(t, "inspect", "--tls-verify=false", "docker://"+cat.Ref), &info); err != nil {
		t.Fatal(err)
	}
	if info.Digest != cat.Digest || info.Labels[CatalogConfigsLabel] != "/configs" {
		t.Errorf("skopeo sees digest %s labels %v; generator says %s", info.Digest, info.Labels, cat.Digest)
	}
	// The last layer is the last package's catalog, byte for byte.
	last := lastLayerFiles(t, cat.PullSpec)
	if f := last["configs/broken-operator/catalog.json"]; f == nil || !bytes.Equal(f.data, cat.Files["broken-operator/catalog.json"]) {
		t.Errorf("catalog layer lacks configs/broken-operator/catalog.json as generated")
	}

	type object struct {
		Schema, Name, Package, Image string
		Entries                      []struct{ Name, Replaces string }
		RelatedImages                []struct{ Name, Image string }
	}
	var objs []object
	for n, b := range cat.Files {
		if n == ".indexignore" || strings.HasSuffix(n, ".md") {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
			dec := json.NewDecoder(bytes.NewReader(b))
			for {
				var o object
				if err := dec.Decode(&o); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("%s: %v", n, err)
				}
				objs = append(objs, o)
			}
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var v map[string]any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			j, _ := json.Marshal(v)
			var o object
			if err := json.Unmarshal(j, &o); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			objs = append(objs, o)
		}
	}
	pkgs, bundles := map[string]bool{}, map[string]bool{}
	counts := map[string]int{}
	for _, o := range objs {
		counts[o.Schema]++
		switch o.Schema {
		case "olm.package":
			pkgs[o.Name] = true
		case "olm.bundle":
			bundles[o.Name] = true
			b, ok := cat.Bundles[o.Name]
			if !ok || o.Image != b.Image || len(o.RelatedImages) != 1+len(b.Related) || o.RelatedImages[0].Image != b.Image {
				t.Errorf("bundle object %+v does not match %+v", o, b)
			}
		case "olm.channel":
		default:
			t.Errorf("object %+v has schema %q", o, o.Schema)
		}
	}
	for _, o := range objs {
		if o.Schema != "olm.channel" {
			continue
		}
		if !pkgs[o.Package] {
			t.Errorf("channel %s names undeclared package %s", o.Name, o.Package)
		}
		for _, e := range o.Entries {
			if !bundles[e.Name] {
				t.Errorf("channel %s/%s names bundle %s the catalog lacks", o.Package, o.Name, e.Name)
			}
		}
	}
	if counts["olm.package"] != 4 || counts["olm.channel"] != 6 || counts["olm.bundle"] != len(cat.Bundles) || len(cat.Bundles) != 13 {
		t.Errorf("catalog has %v objects and %d bundles", counts, len(cat.Bundles))
	}

	// Related images are real: the operand tag resolves to the digest recorded.
	b := cat.Bundles["ptp-operator.v4.16.3"]
	var op struct{ Digest string }
	if err := json.Unmarshal(skopeo(t, "inspect", "--tls-verify=false", "docker://"+b.Related[1].Image), &op); err != nil {
		t.Fatal(err)
	}
	if op.Digest != b.Related[1].Digest {
		t.Errorf("operand %s is %s, generator says %s", b.Related[1].Image, op.Digest, b.Related[1].Digest)
	}
	csv := lastLayerFiles(t, b.Image)["manifests/ptp-operator.clusterserviceversion.yaml"]
	if csv == nil || !strings.Contains(string(csv.data), b.Related[1].Image) {
		t.Errorf("bundle %s has no ClusterServiceVersion relating %s", b.Image, b.Related[1].Image)
	}
}

func TestCatalogOptionsRejected(t *testing.T) {
	for _, o := range []CatalogOptions{
		{Packages: []CatalogPackage{{Name: "x", Layout: "toml"}}},
		{NoLabel: true, ConfigsDir: "/elsewhere"},
	} {
		if _, err := GenerateCatalog(context.Background(), "127.0.0.1:1", o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}
