package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// Name is the stage name.
const Name = handoff.StagePublish

const version = "1"

// ReportFile lists where the seed went.
const ReportFile = "publish.json"

// Artifact types of the referrers attached to a seed.
const (
	ArtifactValidation = "application/vnd.snofactory.validation.report.v1+json"
	ArtifactRunRecord  = "application/vnd.snofactory.run.record.v1+json"
)

// Options is exactly what the stage reads.
type Options struct {
	// Push is the registry reference (with a tag) to push to; "" for none.
	Push string `json:"push,omitempty"`
	// OCILayout is a directory to write an OCI image layout into; "" for none.
	OCILayout string `json:"ociLayout,omitempty"`
	// Sign makes the stage sign what it pushes to a registry, with the key and passphrase
	// it reads from the secrets SecretSigningKey and SecretSigningPassphrase.
	Sign bool `json:"sign,omitempty"`
	// ChunkSize and Jobs tune the transfer, not the result.
	ChunkSize int64 `json:"-"`
	Jobs      int   `json:"-"`
	// Clock stamps the provenance's finishedOn; nil is the wall clock.
	Clock clock.Clock `json:"-"`
}

// The secrets a signing publish reads: the encrypted sigstore private key (PEM) and its
// passphrase.
const (
	SecretSigningKey        = "signing-key"
	SecretSigningPassphrase = "signing-passphrase"
)

// New returns the publish stage.
func New(opts Options) pipeline.Stage {
	return pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Deps:    handoff.Deps(handoff.Resolve{}, handoff.Validate{}, handoff.Seal{}),
		// The push's effect lives in the registry, not the cache: it runs every time, and
		// sends nothing the registry already has.
		Uncached: true,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return run(ctx, opts, env)
		},
	}
}

// Report is publish.json: each place the seed went and its manifest digest there.
type Report struct {
	Published []ociseed.Result `json:"published"`
	// Signed lists the destinations whose seed was signed, with its provenance and SBOM
	// attached as signed attestations.
	Signed []string `json:"signed,omitempty"`
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	sl, err := handoff.Read[handoff.Seal](env)
	if err != nil {
		return err
	}
	vd, err := handoff.Read[handoff.Validate](env)
	if err != nil {
		return err
	}
	var signer *trust.Signer
	if opts.Sign {
		if signer, err = loadSigner(env); err != nil {
			return err
		}
	}
	sealed, err := seed.ReadManifest(sl.Path(sl.Out.Dir))
	if err != nil {
		return err
	}
	prov := provenanceInputs{Seed: sealed, Finished: clock.Or(opts.Clock).Now()}
	if _, ok := env.Inputs[handoff.StageResolve]; ok {
		rs, err := handoff.Read[handoff.Resolve](env)
		if err != nil {
			return err
		}
		if prov.Lock, err = lockfile.ReadLock(rs.Path(rs.Out.Lock)); err != nil {
			return err
		}
	}
	refs := []ociseed.Referrer{{File: vd.Path(vd.Out.Report), ArtifactType: ArtifactValidation}}
	rec := filepath.Join(env.RunDir, pipeline.RecordFile)
	if fileExists(rec) {
		refs = append(refs, ociseed.Referrer{File: rec, ArtifactType: ArtifactRunRecord})
	}
	if prov.Record, err = readRecord(rec); err != nil {
		return err
	}
	predicate, err := makeProvenance(prov)
	if err != nil {
		return err
	}
	var rep Report
	for _, dest := range destinations(opts) {
		env.Log.Info("publishing the seed", "to", dest)
		o := []ociseed.Option{ociseed.WithLogger(env.Log), ociseed.WithReferrers(refs...)}
		if opts.ChunkSize > 0 {
			o = append(o, ociseed.WithChunkSize(opts.ChunkSize))
		}
		if opts.Jobs > 0 {
			o = append(o, ociseed.WithJobs(opts.Jobs))
		}
		res, err := ociseed.Push(ctx, sl.Path(sl.Out.Dir), dest, o...)
		if err != nil {
			return err
		}
		env.Log.Info("seed published", "to", res.Location, "digest", res.Digest.String(), "bytes_sent", res.Sent)
		rep.Published = append(rep.Published, *res)
		signed, err := attest(ctx, env, signer, dest, res, predicate, sl.Path(sl.Out.Dir), sealed)
		if err != nil {
			return err
		}
		if signed {
			rep.Signed = append(rep.Signed, dest)
		}
	}
	if len(rep.Published) == 0 {
		env.Log.Info("nothing to publish: the blueprint names no spec.outputs.push or ociLayout")
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.Out, ReportFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return env.Summarize(rep)
}

// loadSigner opens the signing key before anything is pushed, so a wrong passphrase never
// leaves an unsigned seed behind.
func loadSigner(env *pipeline.Env) (*trust.Signer, error) {
	key, err := env.Secrets.Secret(SecretSigningKey)
	if err != nil {
		return nil, err
	}
	pass, err := env.Secrets.Secret(SecretSigningPassphrase)
	if err != nil {
		return nil, err
	}
	s, err := trust.ParseSigner("the signing key", key, pass, "snofactory "+versions.Self())
	if err != nil {
		return nil, fmt.Errorf("spec.outputs.signing: %w", err)
	}
	return s, nil
}

// attest gives the seed pushed to dest its provenance and SBOM. With a signer and a
// registry, the seed is signed and both are signed attestations, as cosign attest makes
// them; otherwise they are attached as plain referrers. It reports whether it signed.
func attest(ctx context.Context, env *pipeline.Env, signer *trust.Signer, dest string, res *ociseed.Result, predicate json.RawMessage,
	dir string, sealed *seed.Manifest) (bool, error) {
	loc, err := ociseed.ParseLocation(dest, true)
	if err != nil {
		return false, err
	}
	name := dest
	if loc.Transport == ociseed.TransportRegistry {
		name = loc.Ref.Context().Name()
	}
	st, err := trust.NewStatement(name, res.Digest, trust.PredicateSLSAProvenance, predicate)
	if err != nil {
		return false, err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return false, err
	}
	statement := filepath.Join(env.Out, ProvenanceFile)
	if err := os.WriteFile(statement, append(b, '\n'), 0o644); err != nil {
		return false, err
	}
	sbom, err := sbomOf(dir, sealed)
	if err != nil {
		return false, err
	}
	if signer == nil || loc.Transport != ociseed.TransportRegistry {
		if signer != nil {
			env.Log.Warn("not signing: signatures are attached in a registry only", "to", dest)
		}
		if _, err := ociseed.AttachReferrer(ctx, dest, statement, ArtifactInToto, ociseed.WithLogger(env.Log)); err != nil {
			return false, fmt.Errorf("attaching the provenance to %s: %w", dest, err)
		}
		return false, nil
	}
	at, err := seed.SourceDate(nil)
	if err != nil {
		return false, err
	}
	if err := trust.SignSeed(ctx, signer, dest, res.Digest, res.Instances, at); err != nil {
		return false, fmt.Errorf("signing the seed at %s: %w", dest, err)
	}
	if err := trust.AttestSeed(ctx, signer, dest, res.Digest, trust.PredicateSLSAProvenance, predicate); err != nil {
		return false, err
	}
	if sbom != nil {
		if err := trust.AttestSeed(ctx, signer, dest, res.Digest, trust.PredicateSPDX, sbom); err != nil {
			return false, err
		}
	}
	env.Log.Info("seed signed", "to", dest, "signature", ociseed.SignatureTag(res.Digest),
		"attestations", ociseed.AttachmentTag(res.Digest, ociseed.KindAttestation))
	return true, nil
}

// destinations are the places to push to, in ociseed's location syntax.
func destinations(opts Options) []string {
	var out []string
	if opts.Push != "" {
		out = append(out, opts.Push)
	}
	if opts.OCILayout != "" {
		out = append(out, ociseed.TransportLayout+":"+opts.OCILayout)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
