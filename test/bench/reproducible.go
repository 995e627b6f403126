package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/test/conformance"
)

// sourceDateEpoch is the SOURCE_DATE_EPOCH both builds of the reproducibility figure share.
const sourceDateEpoch = "1700000000"

// Sources of difference between two builds of one lock, as found by comparing two such
// seeds' raw disks block by block (dumpe2fs, and debugfs icheck and ncheck on the root
// file system).
const (
	// removedSources are the ones the build controls, and what it does about each.
	removedSources = "removed: journal and logs (the seal empties /var/log), machine-id (the seal empties it; this OS writes none), " +
		"the root file system's UUID and directory hash seed (from the lock; the seed also places directories), " +
		"its creation time and the files' mtimes and atimes (SOURCE_DATE_EPOCH), " +
		"Ignition's provisioning boot ID and date (shredded), " +
		"the file layout and inode numbers (blocks allocated as written; the userland before the image import, " +
		"the containers storage in a block group of its own)"
	// remainingSources are the ones it cannot set.
	remainingSources = "remaining: inode change and deletion times and generation numbers (the kernel stamps them), " +
		"the superblock's mount and write times and write count, " +
		"containers-storage's lock files (random writer IDs), layer and image creation times, " +
		"and its directories' entries (temporary files, as many as timing makes)"
)

// benchReproducible builds the demo twice from one lock, into two caches, with the same
// SOURCE_DATE_EPOCH (the second build stands for another day: nothing it makes is shared
// with the first), and measures how much of the sealed disk the two share (bytes of
// identical content, by chunk) and whether their seed.json files differ outside the fields
// the schema declares per-build. It checks on the way that the seed's SBOM names the
// conformance OS's Debian packages.
func benchReproducible(ctx context.Context, dir string) ([]Result, error) {
	bin, bp, reg, err := demoBench(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer reg.Stop()
	if _, err := runBuild(ctx, bin, "lock", bp); err != nil {
		return nil, err
	}
	var seeds [2]string
	for i, name := range []string{"first", "second"} {
		out := filepath.Join(dir, name)
		if _, err := buildUntilEnv(ctx, bin, bp, "seal", filepath.Join(dir, "cache-"+name), out,
			[]string{"SOURCE_DATE_EPOCH=" + sourceDateEpoch}, "--locked"); err != nil {
			return nil, err
		}
		seeds[i] = filepath.Join(out, "seal", "seed")
	}
	var raw [2][]byte
	var idx [2]*diskpack.Index
	for i, s := range seeds {
		if raw[i], err = os.ReadFile(filepath.Join(s, seed.ManifestFile)); err != nil {
			return nil, err
		}
		if idx[i], err = chunkIndex(s); err != nil {
			return nil, err
		}
	}
	fields, err := seed.DiffManifests(raw[0], raw[1])
	if err != nil {
		return nil, err
	}
	// The provenance is made of seed.json's build-independent fields, the lock and each
	// stage's recipe: with the first two equal, the recipes decide whether two builds'
	// provenance differs in more than its declared per-build fields (its times, and the
	// stage keys it carries as byproducts).
	keys, err := differingStageKeys(filepath.Join(dir, "first", pipeline.RecordFile), filepath.Join(dir, "second", pipeline.RecordFile))
	if err != nil {
		return nil, err
	}
	if err := sbomListsOSPackages(ctx, seeds[0]); err != nil {
		return nil, err
	}
	d := diskpack.Compare(idx[0], idx[1])
	identical := "seed.json identical apart from the per-build fields"
	if len(fields) > 0 {
		identical = "seed.json also differs in " + strings.Join(fields, ", ")
	}
	fmt.Fprintf(os.Stderr, "reproducible: the second build shares %d of %d chunks, %.1f of %.1f MiB with the first; %s\n",
		d.SharedChunks, d.Chunks, float64(d.SharedBytes)/(1<<20), float64(d.Bytes)/(1<<20), identical)
	return []Result{
		{Name: "reproducible-seed-disk-shared-bytes", Unit: "MiB", Ours: float64(d.SharedBytes) / (1 << 20),
			Baseline: float64(d.Bytes) / (1 << 20), Target: "ratio >= 0.95",
			Note: fmt.Sprintf("two builds of one lock, SOURCE_DATE_EPOCH=%s: %d of %d chunks shared; %s; %s; %s",
				sourceDateEpoch, d.SharedChunks, d.Chunks, identical, removedSources, remainingSources)},
		// The baseline is how many fields the schema declares per-build.
		{Name: "reproducible-seed-json-fields-differing-outside-per-build", Ours: float64(len(fields)),
			Baseline: float64(len(seed.PerBuildFields())), Target: "ours = 0", Note: identical},
		// The baseline is how many stages the two records list.
		{Name: "reproducible-provenance-stage-recipes-differing", Ours: float64(len(keys.recipes)), Baseline: float64(keys.stages),
			Target: "ours = 0", Note: keys.String()},
	}, nil
}

// stageKeys is how two run records' stage keys compare, and which outputs differ (a
// stage's key chains on the outputs of the stages before it).
type stageKeys struct {
	stages  int
	recipes []string // stages whose recipes differ: the provenance's build definition
	differ  []string // stages whose keys differ: the provenance's byproducts (per-build)
	outputs []string // stage/path of each output file whose digest differs
}

func (k stageKeys) String() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	s := "stages whose recipes differ: " + list(k.recipes) + "; whose keys differ (recorded per-build, as byproducts): " + list(k.differ)
	if len(k.outputs) > 0 {
		s += "; outputs that differ (keys chain on those that are not reports): " + strings.Join(k.outputs, ", ")
	}
	return s
}

// differingStageKeys names the stages whose keys differ between the run records a and b.
func differingStageKeys(a, b string) (stageKeys, error) {
	var recs [2]pipeline.Record
	for i, p := range []string{a, b} {
		raw, err := os.ReadFile(p)
		if err != nil {
			return stageKeys{}, err
		}
		if err := json.Unmarshal(raw, &recs[i]); err != nil {
			return stageKeys{}, fmt.Errorf("%s: %w", p, err)
		}
	}
	second := map[string]pipeline.StageRecord{}
	for _, s := range recs[1].Stages {
		second[s.Name] = s
	}
	out := stageKeys{stages: len(recs[0].Stages)}
	for _, s := range recs[0].Stages {
		other := second[s.Name]
		if other.Recipe != s.Recipe || s.Recipe == "" {
			out.recipes = append(out.recipes, s.Name)
		}
		if other.Key != s.Key {
			out.differ = append(out.differ, s.Name)
		}
		digests := map[string]string{}
		for _, a := range other.Artifacts {
			digests[a.Path] = a.SHA256
		}
		for _, a := range s.Artifacts {
			if d, ok := digests[a.Path]; ok && d != a.SHA256 {
				out.outputs = append(out.outputs, s.Name+"/"+a.Path)
			}
		}
	}
	return out, nil
}

// chunkIndex reads the chunk index of the seed directory's chunked disk.
func chunkIndex(dir string) (*diskpack.Index, error) {
	m, err := seed.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range m.Disks {
		if d.Format == seed.FormatChunked {
			return seed.ReadIndex(dir, d)
		}
	}
	return nil, fmt.Errorf("%s has no chunked disk", dir)
}

// sbomListsOSPackages checks that the SBOM of the seed in dir names each Debian package of
// the conformance OS at its version.
func sbomListsOSPackages(ctx context.Context, dir string) error {
	m, err := seed.ReadManifest(dir)
	if err != nil {
		return err
	}
	b, err := seed.ReadSBOM(dir, m)
	if err != nil {
		return err
	}
	doc, err := sbom.Read(bytes.NewReader(b))
	if err != nil {
		return err
	}
	missing, err := conformance.MissingPackages(ctx, doc)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("the demo seed's SBOM does not name the conformance OS's packages %s", strings.Join(missing, ", "))
	}
	return nil
}
