package seal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// SBOMFile is the seed's SBOM in the seed directory.
const SBOMFile = sbom.FileName

// maxInventory bounds the inventory read back from validate's output (the cache is the
// user's to edit): wire.MaxPackages entries of wire.MaxPackageField-long fields.
const maxInventory = 32 << 20

// writeSBOM writes the seed's SBOM into dir: the seed m (its disks written) with its images,
// and the node's packages and snofactory binaries as validate recorded them.
func writeSBOM(ctx context.Context, in inputs, m *seed.Manifest, dir string) (*seed.SBOM, error) {
	inv, err := readInventory(in.validate)
	if err != nil {
		return nil, err
	}
	doc, err := sbom.Build(sbom.Input{Manifest: m, OS: osPackages(inv.Packages), Binaries: nodeBinaries(m.Target, inv.Binaries)})
	if err != nil {
		return nil, err
	}
	b, err := sbom.Marshal(doc)
	if err != nil {
		return nil, err
	}
	// The SBOM names software and digests, nothing secret: readable like the manifest.
	if err := os.WriteFile(filepath.Join(dir, SBOMFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("writing the seed's SBOM: %w", err)
	}
	return seed.DescribeSBOM(ctx, dir, SBOMFile)
}

// readInventory reads the node's inventory from validate's output; a validation that
// predates it gives an inventory whose package list says so.
func readInventory(v handoff.Input[handoff.Validate]) (*wire.Inventory, error) {
	if v.Out.Inventory == "" {
		return &wire.Inventory{Packages: &wire.PackageFacts{
			Reason: "the validation this seed passed recorded no inventory (it predates the SBOM)"}}, nil
	}
	p := v.Path(v.Out.Inventory)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("the node's inventory: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInventory+1))
	if err != nil {
		return nil, fmt.Errorf("the node's inventory %s: %w", p, err)
	}
	if len(b) > maxInventory {
		return nil, fmt.Errorf("the node's inventory %s is more than %d bytes", p, maxInventory)
	}
	var inv wire.Inventory
	if err := strictjson.DecodeOpen(b, &inv); err != nil {
		return nil, fmt.Errorf("the node's inventory %s: %w", p, err)
	}
	return &inv, nil
}

func osPackages(pf *wire.PackageFacts) sbom.OSPackages {
	if pf == nil {
		return sbom.OSPackages{Reason: "the node's agent reported no package list"}
	}
	out := sbom.OSPackages{Manager: pf.Manager, DistroID: pf.DistroID, DistroVersion: pf.DistroVersion,
		Total: pf.Total, Reason: pf.Reason}
	for _, p := range pf.Packages {
		out.Packages = append(out.Packages, sbom.Package{Name: p.Name, Epoch: p.Epoch, Version: p.Version, Release: p.Release, Arch: p.Arch})
	}
	return out
}

// nodeBinaries are the snofactory binaries the sealed disk carries. On the conformance OS
// that is the agent its installer copied onto the root. An OpenShift node has none at
// validation: the seal installs, at wire.AgentPath, the agent the node ran from the
// precache data disk, the same one that reported the facts.
func nodeBinaries(t oskind.Kind, facts []wire.BinaryFact) []sbom.Binary {
	var out []sbom.Binary
	for _, b := range facts {
		path := b.Path
		switch {
		case t == oskind.OpenShift && !b.Installed:
			path = wire.AgentPath
		case t == oskind.OpenShift, !b.Installed:
			continue
		}
		out = append(out, sbom.Binary{Path: path, SHA256: b.SHA256, Size: b.Size, Module: b.Module, Version: b.Version})
	}
	return out
}
