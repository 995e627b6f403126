package drift

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vincent-petithory/dataurl"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/test/testbin"
)

// owner is one MachineConfig's claim on a node path: what the machine-config daemon compares
// there (machine-config-operator pkg/daemon/on_disk_validation.go validateOnDiskState).
type owner struct {
	MachineConfig string
	Source        string // where the claim was read
	Kind          string // file, unit or dropin
	Unit          string // kind unit: the unit's name
	Enabled       *bool  // kind unit: what checkUnitEnabled wants, nil for nothing
}

// owners maps node paths to the MachineConfigs that own them.
type owners map[string][]owner

// mcdIgnoredFiles are the files checkV3Files skips: machine-config-operator
// pkg/daemon/on_disk_validation.go getFilesToIgnore (caBundleFilePath and
// cloudCABundleFilePath in pkg/daemon/daemon.go, internalRegistryAuthFile in
// pkg/daemon/image_manager_helper.go).
var mcdIgnoredFiles = map[string]bool{
	"/etc/kubernetes/kubelet-ca.crt":                                             true,
	"/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem": true,
	"/etc/mco/internal-registry-pull-secret.json":                                true,
}

// systemdDir is where the MCD looks for units and drop-ins (on_disk_validation.go
// getIgn3SystemdUnitPath, getIgn3SystemdDropinPath, getSystemdPath).
const systemdDir = "/etc/systemd/system/"

// ignitionConfig is the part of a MachineConfig's spec.config the MCD validates.
type ignitionConfig struct {
	Storage struct {
		Files []struct {
			Path string `yaml:"path"`
		} `yaml:"files"`
	} `yaml:"storage"`
	Systemd struct {
		Units []struct {
			Name     string  `yaml:"name"`
			Contents *string `yaml:"contents"`
			Enabled  *bool   `yaml:"enabled"`
			Dropins  []struct {
				Name string `yaml:"name"`
			} `yaml:"dropins"`
		} `yaml:"units"`
	} `yaml:"systemd"`
}

type machineConfig struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Config ignitionConfig `yaml:"config"`
	} `yaml:"spec"`
}

// claim adds what one MachineConfig puts on the node, by the MCD's rules: every file but the
// ignored ones (checkV3Files); every drop-in (checkV3Dropin); a unit's own file only when it
// has contents, since checkV3Unit returns before looking at an empty one, and then its
// enabled state (checkUnitEnabled).
func (o owners) claim(mc machineConfig, source string) {
	name := mc.Metadata.Name
	for _, f := range mc.Spec.Config.Storage.Files {
		if !mcdIgnoredFiles[f.Path] {
			o[f.Path] = append(o[f.Path], owner{MachineConfig: name, Source: source, Kind: "file"})
		}
	}
	for _, u := range mc.Spec.Config.Systemd.Units {
		for _, d := range u.Dropins {
			p := systemdDir + u.Name + ".d/" + d.Name
			o[p] = append(o[p], owner{MachineConfig: name, Source: source, Kind: "dropin"})
		}
		if u.Contents != nil && *u.Contents != "" {
			p := systemdDir + u.Name
			o[p] = append(o[p], owner{MachineConfig: name, Source: source, Kind: "unit", Unit: u.Name, Enabled: u.Enabled})
		}
	}
}

// renderedOwners runs `snofactory render` on testdata/sno.yaml with the recorded
// openshift-install stand-in and reads every master MachineConfig from the config the
// installer was given (config.ign embeds render's manifests and the installer's own under
// /opt/openshift), so both render's MachineConfigs and the installer's are claimed.
func renderedOwners(t *testing.T, bin string) owners {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(bin, "render", "testdata/sno.yaml", "-o", out)
	standIn := filepath.Join(root, "stages", "render", "testdata", "openshift-install-standin")
	cmd.Env = append(os.Environ(), "PATH="+standIn+string(os.PathListSeparator)+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("snofactory render: %v\n%s", err, b)
	}
	ign, err := os.ReadFile(filepath.Join(out, "ignition", "config.ign"))
	if err != nil {
		t.Fatal(err)
	}
	o := owners{}
	if err := o.claimEmbedded(ign); err != nil {
		t.Fatal(err)
	}
	return o
}

// claimEmbedded claims the master MachineConfigs among the manifests an Ignition config
// carries under /opt/openshift.
func (o owners) claimEmbedded(ign []byte) error {
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Contents struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(ign, &cfg); err != nil {
		return fmt.Errorf("reading config.ign: %w", err)
	}
	for _, f := range cfg.Storage.Files {
		if !strings.HasPrefix(f.Path, "/opt/openshift/") || !(strings.HasSuffix(f.Path, ".yaml") || strings.HasSuffix(f.Path, ".yml")) {
			continue
		}
		doc, err := decodeContents(f.Contents.Source, f.Contents.Compression)
		if err != nil {
			return fmt.Errorf("config.ign %s: %w", f.Path, err)
		}
		if err := o.claimManifest(doc, "render: config.ign "+f.Path); err != nil {
			return fmt.Errorf("config.ign %s: %w", f.Path, err)
		}
	}
	return nil
}

// claimManifest claims every master MachineConfig in a (multi-document) manifest: the
// master pool is the single node's.
func (o owners) claimManifest(doc []byte, source string) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var mc machineConfig
		err := dec.Decode(&mc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if mc.Kind == "MachineConfig" && mc.Metadata.Labels["machineconfiguration.openshift.io/role"] == "master" {
			o.claim(mc, source)
		}
	}
}

// decodeContents decodes an Ignition file's data URL, as the MCD does
// (pkg/controller/common DecodeIgnitionFileContents).
func decodeContents(source, compression string) ([]byte, error) {
	u, err := dataurl.DecodeString(source)
	if err != nil {
		return nil, err
	}
	switch compression {
	case "":
		return u.Data, nil
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(u.Data))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	default:
		return nil, fmt.Errorf("compression %q", compression)
	}
}

// mcoOwners claims what the MCO's own templates put on every single-node master, from the
// recorded list (mco_test.go).
func mcoOwners(t *testing.T) owners {
	t.Helper()
	entries, err := readMCOList(mcoList)
	if err != nil {
		t.Fatal(err)
	}
	o := owners{}
	for _, en := range entries {
		ow := owner{MachineConfig: en.MachineConfig, Source: "machine-config-operator " + en.Template, Kind: en.Kind}
		if en.Kind == "unit" {
			ow.Unit = strings.TrimPrefix(en.Path, systemdDir)
			if v, ok := strings.CutPrefix(en.Attr, "enabled="); ok && v != "-" {
				b := v == "true"
				ow.Enabled = &b
			}
		}
		if !mcdIgnoredFiles[en.Path] {
			o[en.Path] = append(o[en.Path], ow)
		}
	}
	return o
}

// merge is every claim of both.
func (o owners) merge(other owners) owners {
	out := owners{}
	for _, src := range []owners{o, other} {
		for p, ws := range src {
			out[p] = append(out[p], ws...)
		}
	}
	return out
}
