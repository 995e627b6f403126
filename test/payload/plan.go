package payload

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// componentPlan is what one component image is made of, before any bytes
// exist. Keys name layers; the same key is the same blob everywhere.
type componentPlan struct {
	Name      string
	Layers    []string // layer keys, bottom first
	OCI       bool
	MultiArch bool     // also an arm64 image, under an index
	ARMLayers []string // the arm64 image's layer keys
}

// plan decides layer sharing the way real payloads look: every image sits
// on the OS base layer, most on the OpenShift base above it, many on a
// runtime layer; groups of about eight share a mid layer (a common
// operator framework or tool set); each has its own top layer and some a
// second one.
func plan(o *Options) []componentPlan {
	r := rngFor(o.Seed, "plan")
	n := o.Components
	groups := max(3, n/8)
	names := componentNames[:n]

	// Mid-layer groups: a shuffled round-robin over 85% of the
	// components, so every group has several members.
	mid := map[string]int{}
	perm := r.Perm(n)
	withMid := n * 85 / 100
	for i, p := range perm {
		if i < withMid {
			mid[names[p]] = i % groups
		}
	}

	var out []componentPlan
	for i, name := range names {
		c := componentPlan{Name: name, Layers: []string{"base/0"}}
		// Stages find these by name and the release image is built on
		// the CVO, so their shape is fixed.
		fixed := name == NameCVO || name == NameInstaller || name == NameMachineOSImages || name == NamePod
		if fixed || r.Float64() < 0.9 {
			c.Layers = append(c.Layers, "base/1")
			if !fixed && r.Float64() < 0.75 {
				c.Layers = append(c.Layers, "base/2")
			}
		}
		if g, ok := mid[name]; ok && name != NameMachineOSImages {
			c.Layers = append(c.Layers, fmt.Sprintf("mid/%d", g))
		}
		c.Layers = append(c.Layers, "top/"+name)
		if !fixed && r.IntN(3) == 0 {
			c.Layers = append(c.Layers, "extra/"+name)
		}
		switch o.Format {
		case OCI:
			c.OCI = true
		case Mixed:
			c.OCI = i%3 == 2
		}
		if o.MultiArch && name == NamePod {
			c.MultiArch = true
			c.ARMLayers = []string{"arm64/base/0", "arm64/top/" + name}
		}
		out = append(out, c)
	}
	return out
}

// layerFiles makes the files of the layer with this key.
func layerFiles(o *Options, key string, sizes layerSizes, iso *isoContent) ([]file, error) {
	r := rngFor(o.Seed, "layer/"+key)
	kind, rest, _ := strings.Cut(key, "/")
	switch kind {
	case "base":
		var i int
		fmt.Sscanf(rest, "%d", &i)
		files := filler(r, []string{"usr/lib64", "usr/share/openshift/lib", "usr/lib/runtime"}[i], fmt.Sprintf("libbase%d", i), sizes.Base[i], sizes.File)
		if i == 0 {
			files = append(files, file{Name: "etc/os-release", Mode: 0o644, Data: []byte(
				"NAME=\"Synthetic Base OS\"\nID=synthetic\nVERSION_ID=\"9.4\"\nPRETTY_NAME=\"Synthetic Base OS 9.4 (snofactory test payload)\"\n")})
		}
		return files, nil
	case "mid":
		return filler(r, "usr/lib64/group-"+rest, "libgroup", sizes.Mid, sizes.File), nil
	case "extra":
		return filler(r, "usr/share/"+rest, "data", sizes.Extra, sizes.File), nil
	case "arm64":
		// arm64 images have their own base and top, never shared with amd64.
		if strings.HasPrefix(rest, "base/") {
			return filler(r, "usr/lib64", "libbase-aarch64", sizes.Base[0]/4, sizes.File), nil
		}
		name := strings.TrimPrefix(rest, "top/")
		return []file{{Name: "usr/bin/" + name, Mode: 0o755, Data: fill(r, sizes.Top)}}, nil
	case "top":
		return topFiles(o, rest, sizes, iso), nil
	}
	return nil, fmt.Errorf("payload: unknown layer key %q", key)
}

func topFiles(o *Options, name string, sizes layerSizes, iso *isoContent) []file {
	rr := rngFor(o.Seed, "top-bytes/"+name)
	switch name {
	case NameInstaller:
		// The real installer is one of the largest images.
		files := filler(rr, "usr/share/openshift-install", "data", 4*sizes.Top, sizes.File)
		script := o.InstallerScript
		if script == nil {
			script = installerScript(o.Version)
		}
		return append(files, file{Name: "usr/bin/openshift-install", Mode: 0o755, Data: script})
	case NameMachineOSImages:
		sum := o.ISO.ChecksumFile
		if sum == nil {
			sum = []byte(iso.sha256 + "  coreos-x86_64.iso\n")
		}
		files := []file{
			{Name: "coreos/coreos-stream.json", Mode: 0o644, Data: iso.streamJSON},
			{Name: "coreos/coreos-x86_64.iso.sha256", Mode: 0o644, Data: sum},
		}
		if iso.data != nil {
			files = append(files, file{Name: "coreos/coreos-x86_64.iso", Mode: 0o644, Data: iso.data})
		}
		return files
	}
	// Component sizes vary a lot in real payloads; spread them around Top.
	top := sizes.Top * int64(1+rngFor(o.Seed, "top-size/"+name).IntN(7)) / 4
	files := filler(rr, "usr/lib/"+name, "lib"+name, top/2, sizes.File)
	files = append(files, file{Name: "usr/bin/" + name, Mode: 0o755, Data: fill(rr, top-top/2)})
	if strings.HasSuffix(name, "-operator") || name == NameCVO {
		files = append(files, file{
			Name: fmt.Sprintf("manifests/0000_50_%s_00_namespace.yaml", name), Mode: 0o644,
			Data: []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-%s\n  annotations:\n    include.release.openshift.io/single-node-developer: \"true\"\n", strings.TrimSuffix(name, "-operator"))),
		})
	}
	return files
}

func manifestTypes(oci bool) (manifest, config, layer types.MediaType) {
	if oci {
		return types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer
	}
	return types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer
}
