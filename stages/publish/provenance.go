package publish

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// ProvenanceFile is the provenance statement in the stage's output, as attached.
const ProvenanceFile = "provenance.json"

// ArtifactInToto is the artifact type of an in-toto statement attached as a referrer of
// an unsigned seed; a signed seed carries it as a cosign attestation instead.
const ArtifactInToto = trust.PayloadTypeInToto

// BuildType names how a snofactory seed is built, the schema of the provenance's
// buildDefinition.
const BuildType = "https://snofactory.io/provenance/seed/v1"

// BuilderID names the builder: snofactory, whose version the builder's version map gives.
const BuilderID = "https://snofactory.io/builder/snofactory"

// PerBuildProvenanceFields are the only fields in which the provenance of two builds from
// the same blueprint and lock may differ: when the build ran, and the stages' cache keys,
// recorded as the run's byproducts. A key names the very bytes its stage consumed, and an
// installed disk is not bit-for-bit reproducible (the kernel stamps inode change times; on
// OpenShift the installer generates the cluster's keys), so the keys of validate and seal
// differ between builds; a key of a stage that reads secrets also depends on the cache's
// random HMAC key. The build definition records each stage's recipe instead
// (pipeline.KeyInputs.Recipe), which two such builds share.
var PerBuildProvenanceFields = []string{"runDetails.metadata.startedOn", "runDetails.metadata.finishedOn", "runDetails.byproducts"}

// provenance is a SLSA v1 provenance predicate.
type provenance struct {
	BuildDefinition buildDefinition `json:"buildDefinition"`
	RunDetails      runDetails      `json:"runDetails"`
}

type buildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   externalParameters   `json:"externalParameters"`
	InternalParameters   internalParameters   `json:"internalParameters"`
	ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies"`
}

// externalParameters are what the user chose: the blueprint.
type externalParameters struct {
	Blueprint blueprintParameter `json:"blueprint"`
}

type blueprintParameter struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// internalParameters are what snofactory chose: its stages, each with its recipe (what it
// was asked to do, from its options, files and upstream recipes), and the target the seed
// carries.
type internalParameters struct {
	Target string       `json:"target"`
	Stages []stageEntry `json:"stages"`
}

type stageEntry struct {
	Name   string `json:"name"`
	Recipe string `json:"recipe"`
}

// stageKeyPrefix names a stage's cache key among the run's byproducts.
const stageKeyPrefix = "stage-key/"

type resourceDescriptor struct {
	Name        string            `json:"name"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type runDetails struct {
	Builder  builder  `json:"builder"`
	Metadata metadata `json:"metadata"`
	// Byproducts are each stage's cache key in this run ("stage-key/NAME"): the key
	// chains on the digests of what upstream stages made, so it finds the run's records
	// and cache entries.
	Byproducts []resourceDescriptor `json:"byproducts,omitempty"`
}

type builder struct {
	ID string `json:"id"`
	// Version maps snofactory and each tool that made the seed to its version.
	Version map[string]string `json:"version"`
}

type metadata struct {
	StartedOn  time.Time `json:"startedOn,omitzero"`
	FinishedOn time.Time `json:"finishedOn,omitzero"`
}

// provenanceInputs is what the provenance is made from.
type provenanceInputs struct {
	Seed   *seed.Manifest
	Lock   *lockfile.Lock
	Record *pipeline.Record
	// Finished is when the publish made the statement.
	Finished time.Time
}

// digestMap is d in an in-toto digest set; nil for an empty or malformed digest.
func digestMap(d string) map[string]string {
	dg := digest.Digest(d)
	if dg.Validate() != nil {
		return nil
	}
	return map[string]string{string(dg.Algorithm()): dg.Encoded()}
}

// sha256Map is a bare hex sha256 (the lock's ISO form) in an in-toto digest set.
func sha256Map(hex string) map[string]string {
	if hex == "" {
		return nil
	}
	return map[string]string{"sha256": hex}
}

// makeProvenance builds the SLSA v1 predicate of the seed: the blueprint and lock it came
// from, every input the lock pins, snofactory's version and tools, and each stage's key.
func makeProvenance(in provenanceInputs) (json.RawMessage, error) {
	m := in.Seed
	p := provenance{}
	p.BuildDefinition.BuildType = BuildType
	p.BuildDefinition.ExternalParameters.Blueprint = blueprintParameter{Name: m.Name, Digest: digestMap(string(m.BlueprintDigest))}
	p.BuildDefinition.InternalParameters.Target = string(m.Target)
	deps := []resourceDescriptor{{Name: "lock", Digest: digestMap(string(m.LockDigest))}}
	if l := in.Lock; l != nil {
		if l.Release.Digest != "" {
			deps = append(deps, resourceDescriptor{Name: "release", URI: "docker://" + l.Release.Ref, Digest: digestMap(l.Release.Digest),
				Annotations: map[string]string{"version": l.Release.Version}})
		}
		if iso := l.ISO; iso != nil && iso.SHA256 != "" {
			uri := iso.URL
			if uri == "" {
				uri = "file:" + iso.Path
			}
			deps = append(deps, resourceDescriptor{Name: "iso", URI: uri, Digest: sha256Map(iso.SHA256), Annotations: map[string]string{"from": iso.From}})
		}
		if t := l.Installer; t != nil {
			deps = append(deps, resourceDescriptor{Name: "openshift-install", URI: "docker://" + t.Ref, Digest: digestMap(t.Digest)})
		}
		for _, img := range l.Images {
			deps = append(deps, resourceDescriptor{Name: img.Name, URI: "docker://" + img.Ref, Digest: digestMap(img.Digest),
				Annotations: map[string]string{"source": img.Source}})
		}
	}
	for _, d := range deps {
		if d.Digest == nil {
			return nil, fmt.Errorf("provenance: %s has no valid digest", d.Name)
		}
	}
	p.BuildDefinition.ResolvedDependencies = deps
	p.BuildDefinition.InternalParameters.Stages = []stageEntry{}
	if r := in.Record; r != nil {
		for _, s := range r.Stages {
			p.BuildDefinition.InternalParameters.Stages = append(p.BuildDefinition.InternalParameters.Stages, stageEntry{Name: s.Name, Recipe: s.Recipe})
			p.RunDetails.Byproducts = append(p.RunDetails.Byproducts, resourceDescriptor{Name: stageKeyPrefix + s.Name, Digest: map[string]string{"sha256": s.Key}})
		}
		p.RunDetails.Metadata.StartedOn = r.Started.UTC()
	}
	p.RunDetails.Builder = builder{ID: BuilderID, Version: map[string]string{"snofactory": versions.Self()}}
	for tool, v := range m.Tools {
		if _, ok := p.RunDetails.Builder.Version[tool]; !ok {
			p.RunDetails.Builder.Version[tool] = v
		}
	}
	p.RunDetails.Metadata.FinishedOn = in.Finished.UTC()
	return json.Marshal(p)
}

// readRecord reads the build's run record as it stands while publish runs: the stages
// before it, with their keys. A publish outside a build has none.
func readRecord(path string) (*pipeline.Record, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r pipeline.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// sbomOf is the seed's SPDX document, when its seal wrote one (nil for a seed without),
// checked against the digest seed.json gives it.
func sbomOf(dir string, m *seed.Manifest) (json.RawMessage, error) {
	if m.SBOM == nil {
		return nil, nil
	}
	b, err := seed.ReadSBOM(dir, m)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}
