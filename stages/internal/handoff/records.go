package handoff

import "github.com/snofactory/snofactory/seeds/contract/oskind"

// Resolve is the resolve stage's output: the lock that pins every input, and the files it
// extracted from the release.
type Resolve struct {
	// Lock is the lock file (stages/internal/lockfile's format).
	Lock File `json:"lock"`
	// Installer is openshift-install extracted from the release ("" without a release).
	Installer File `json:"installer,omitempty"`
	// ISO is the live ISO extracted from the release's machine-os-images ("" when the ISO
	// is downloaded instead); the lock holds its sha256.
	ISO File `json:"iso,omitempty"`
}

func (Resolve) stage() string { return StageResolve }

func (r Resolve) files() []File { return []File{r.Lock, r.Installer, r.ISO} }

// Render is the render stage's output: the Ignition configs it produced.
type Render struct {
	// Target is the blueprint's target.
	Target oskind.Kind `json:"target"`
	// Configs maps a config's role to the config: ConfigNode always, ConfigWorker for a
	// seed that takes day-2 workers.
	Configs map[string]IgnitionConfig `json:"configs"`
	// Kubeconfig and KubeadminPassword are the installer's credentials (openshift only).
	Kubeconfig        File `json:"kubeconfig,omitempty"`
	KubeadminPassword File `json:"kubeadminPassword,omitempty"`
	// RelocationMachineConfigs names the relocation MachineConfigs render added (openshift
	// only): validate checks they are rendered into the master pool.
	RelocationMachineConfigs []string `json:"relocationMachineConfigs,omitempty"`
	// MachineNetwork and FIPS are the install-config's (openshift only): the seal records
	// what a site must match from them.
	MachineNetwork []string `json:"machineNetwork,omitempty"`
	FIPS           bool     `json:"fips,omitempty"`
	// ContainerStorageLabel is the partition label of a separate /var/lib/containers the
	// install makes (openshift only, coreos in Install; empty: none), for the seed's record of what a site
	// must match.
	ContainerStorageLabel string `json:"containerStorageLabel,omitempty"`
	// Proxy: the install-config has a cluster-wide proxy (openshift only).
	Proxy bool `json:"proxy,omitempty"`
}

// Config roles in Render.Configs.
const (
	ConfigNode   = "config"
	ConfigWorker = "worker"
)

// IgnitionConfig is one rendered Ignition config.
type IgnitionConfig struct {
	Path File `json:"path"`
	// Version is the Ignition spec version it declares.
	Version string `json:"version"`
	// Secret marks a config that embeds secrets (a pull secret): whatever carries it is
	// owner-only and never published.
	Secret bool `json:"secret,omitempty"`
}

func (Render) stage() string { return StageRender }

func (r Render) files() []File {
	out := []File{r.Kubeconfig, r.KubeadminPassword}
	for _, c := range r.Configs {
		out = append(out, c.Path)
	}
	return out
}

// LiveISO is the live-iso stage's output: the live ISO with the node config embedded.
type LiveISO struct {
	ISO File `json:"iso"`
	// Secret is true when the embedded config carries secrets.
	Secret bool `json:"secret,omitempty"`
}

func (LiveISO) stage() string { return StageLiveISO }

func (l LiveISO) files() []File { return []File{l.ISO} }

// Precache is the precache stage's output: the images the node needs, as an OCI layout and
// as a data disk for the factory VM.
type Precache struct {
	// Layout is the OCI image layout directory.
	Layout File `json:"layout"`
	// DataDisk is the raw data disk the node imports from ("" when not packaged).
	DataDisk File `json:"dataDisk,omitempty"`
	// Images are the precached images, pinned by digest as the lock pins them.
	Images []Image `json:"images"`
}

// Image is one precached image.
type Image struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

func (Precache) stage() string { return StagePrecache }

func (p Precache) files() []File { return []File{p.Layout, p.DataDisk} }

// Install is the install stage's output: the installed disk.
type Install struct {
	Disk File `json:"disk"`
	// Format is the disk image format (qcow2).
	Format string `json:"format"`
	// Firmware is what the disk boots with (bios or uefi).
	Firmware string `json:"firmware"`
	// Target is the blueprint's target.
	Target oskind.Kind `json:"target"`
	// ContainerStorageLabel is the partition label of the separate /var/lib/containers the
	// conformance installer made (coreos only: on OpenShift render's MachineConfig makes
	// it, and Render carries the label), for the seed's record of what a site must match.
	ContainerStorageLabel string `json:"containerStorageLabel,omitempty"`
}

func (Install) stage() string { return StageInstall }

func (i Install) files() []File { return []File{i.Disk} }

// Validate is the validate stage's output: the reports of a node that passed the gate.
type Validate struct {
	Report File `json:"report"`
	JUnit  File `json:"junit"`
	// Inventory is the node's software as its agent reported it (wire.Inventory JSON),
	// which the seal's SBOM lists; "" from a validation that predates it.
	Inventory File `json:"inventory,omitempty"`
	// Passed, Skipped and Warnings count the checks (a recorded validation failed none).
	Passed   int `json:"passed"`
	Skipped  int `json:"skipped"`
	Warnings int `json:"warnings"`
}

func (Validate) stage() string { return StageValidate }

func (v Validate) files() []File { return []File{v.Report, v.JUnit, v.Inventory} }

// Seal is the seal stage's output: the seed directory (seeds/artifact/seed) and its manifest.
type Seal struct {
	// Dir is the seed directory; Manifest is its seed.json.
	Dir      File `json:"dir"`
	Manifest File `json:"manifest"`
}

func (Seal) stage() string { return StageSeal }

func (s Seal) files() []File { return []File{s.Dir, s.Manifest} }
