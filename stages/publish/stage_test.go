package publish

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// The stage pushes the sealed seed to a real registry and into an OCI layout, with the
// validation report and the run record as referrers, and says where it went.
func TestPublish(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	sealDir, validateDir, runDir, out := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	m := seedtest.Write(t, filepath.Join(sealDir, "seed"), seedtest.Options{RawSize: 3 << 20, Formats: []string{seed.FormatQCOW2}})
	write := func(dir string, rec any) {
		if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(sealDir, handoff.Seal{Dir: "seed", Manifest: "seed/" + seed.ManifestFile})
	os.WriteFile(filepath.Join(validateDir, "validation.json"), []byte(`{"summary":{"passed":9}}`), 0o644)
	os.WriteFile(filepath.Join(validateDir, "validation.junit.xml"), []byte(`<testsuites/>`), 0o644)
	write(validateDir, handoff.Validate{Report: "validation.json", JUnit: "validation.junit.xml", Passed: 9})
	os.WriteFile(filepath.Join(runDir, pipeline.RecordFile), []byte(`{"status":"running"}`), 0o644)

	ref := reg.Ref("seeds/" + m.Name + ":1.0")
	layout := filepath.Join(t.TempDir(), "layout")
	env := &pipeline.Env{Out: out, RunDir: runDir, Log: slog.New(slog.DiscardHandler),
		Inputs: map[string]string{handoff.StageSeal: sealDir, handoff.StageValidate: validateDir}}
	if err := run(context.Background(), Options{Push: ref, OCILayout: layout, ChunkSize: 1 << 20}, env); err != nil {
		t.Fatal(err)
	}
	var rep Report
	b, _ := os.ReadFile(filepath.Join(out, ReportFile))
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Published) != 2 || rep.Published[0].Digest != rep.Published[1].Digest {
		t.Fatalf("publish.json = %s (%v): want the same artifact in both places", b, err)
	}
	for _, loc := range []string{ref, ociseed.TransportLayout + ":" + layout} {
		got, err := ociseed.Inspect(context.Background(), loc)
		if err != nil || got.Name != m.Name {
			t.Errorf("%s: %+v, %v", loc, got, err)
		}
	}
	for _, at := range []string{ArtifactValidation, ArtifactRunRecord} {
		refs, err := ociseed.Referrers(context.Background(), ref, at)
		if err != nil || len(refs) != 1 {
			t.Errorf("referrers %s: %v, %v", at, refs, err)
		}
	}
	// Nothing to publish is not an error: the report says so with no destination.
	out2 := t.TempDir()
	env.Out = out2
	if err := run(context.Background(), Options{}, env); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(out2, ReportFile))
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Published) != 0 {
		t.Errorf("publish.json without destinations = %s", b)
	}
}

// With a key, the stage signs the seed and attaches its SLSA provenance as a signed
// attestation, and cosign, built from its own source, verifies both with the public key.
// The provenance names the lock's inputs and the stages' keys from the run record.
func TestPublishSigned(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	sealDir, validateDir, resolveDir, runDir, out := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	var err error
	m := seedtest.Write(t, filepath.Join(sealDir, "seed"), seedtest.Options{RawSize: 3 << 20, Formats: []string{seed.FormatQCOW2}})
	write := func(dir string, rec any) {
		if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(sealDir, handoff.Seal{Dir: "seed", Manifest: "seed/" + seed.ManifestFile})
	// The seal's SBOM, which publish attests beside the provenance.
	spdx := `{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","name":"demo","packages":[]}`
	os.WriteFile(filepath.Join(sealDir, "seed", "sbom.spdx.json"), []byte(spdx), 0o644)
	if m.SBOM, err = seed.DescribeSBOM(context.Background(), filepath.Join(sealDir, "seed"), "sbom.spdx.json"); err != nil {
		t.Fatal(err)
	}
	if err := seed.WriteManifest(filepath.Join(sealDir, "seed"), m); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(validateDir, "validation.json"), []byte(`{"summary":{"passed":9}}`), 0o644)
	os.WriteFile(filepath.Join(validateDir, "validation.junit.xml"), []byte(`<testsuites/>`), 0o644)
	write(validateDir, handoff.Validate{Report: "validation.json", JUnit: "validation.junit.xml", Passed: 9})
	isoSum := strings.Repeat("ab", 32)
	imgDigest := "sha256:" + strings.Repeat("cd", 32)
	lock := &lockfile.Lock{SchemaVersion: 1, Arch: "x86_64",
		Images: []lockfile.LockedImage{{Name: "hello", Ref: "127.0.0.1:5000/demo/hello@" + imgDigest, Digest: imgDigest, Source: lockfile.SourceExtra}},
		ISO:    &lockfile.LockedISO{Path: "live.iso", SHA256: isoSum, From: "blueprint"}}
	if err := lockfile.WriteLock(filepath.Join(resolveDir, "lock.json"), lock); err != nil {
		t.Fatal(err)
	}
	write(resolveDir, handoff.Resolve{Lock: "lock.json"})
	started := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	rec, _ := json.Marshal(pipeline.Record{Status: "running", Started: started,
		Stages: []pipeline.StageRecord{{Name: "resolve", Key: "1111", Recipe: "aaaa"}, {Name: "seal", Key: "2222", Recipe: "bbbb"}}})
	os.WriteFile(filepath.Join(runDir, pipeline.RecordFile), rec, 0o644)

	keys := t.TempDir()
	pass := trusttest.Generate(t, filepath.Join(keys, "depot"), "depot passphrase").Passphrase
	pem, _ := os.ReadFile(trust.KeyFile(filepath.Join(keys, "depot")))
	finished := started.Add(time.Hour)
	ref := reg.Ref("seeds/" + m.Name + ":signed")
	env := &pipeline.Env{Out: out, RunDir: runDir, Log: slog.New(slog.DiscardHandler),
		Inputs:  map[string]string{handoff.StageSeal: sealDir, handoff.StageValidate: validateDir, handoff.StageResolve: resolveDir},
		Secrets: pipeline.SecretSet{Values: map[string][]byte{SecretSigningKey: pem, SecretSigningPassphrase: pass}}}
	opts := Options{Push: ref, Sign: true, ChunkSize: 1 << 20, Clock: clocktest.New(finished)}

	// A wrong passphrase stops the stage before anything is pushed.
	bad := *env
	bad.Secrets = pipeline.SecretSet{Values: map[string][]byte{SecretSigningKey: pem, SecretSigningPassphrase: []byte("wrong")}}
	if err := run(context.Background(), opts, &bad); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Fatalf("a wrong passphrase: %v", err)
	}
	if _, err := ociseed.Inspect(context.Background(), ref); err == nil {
		t.Fatal("a publish whose key did not open pushed the seed")
	}

	if err := run(context.Background(), opts, env); err != nil {
		t.Fatal(err)
	}
	var rep Report
	b, _ := os.ReadFile(filepath.Join(out, ReportFile))
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Signed) != 1 || rep.Signed[0] != ref {
		t.Fatalf("publish.json = %s (%v): want the push signed", b, err)
	}
	// Publishing again replaces the provenance rather than adding a second one.
	if err := run(context.Background(), opts, env); err != nil {
		t.Fatal(err)
	}
	atts, err := ociseed.Attachments(context.Background(), ref, rep.Published[0].Digest, ociseed.KindAttestation)
	if err != nil || len(atts) != 2 {
		t.Fatalf("attestations after two publishes: %d, %v; want the provenance and the SBOM", len(atts), err)
	}
	pub, err := trust.LoadPublicKey(trust.PubFile(filepath.Join(keys, "depot")))
	if err != nil {
		t.Fatal(err)
	}
	var envelope []byte
	for _, a := range atts {
		if a.Annotations[trust.AnnotationPredicateType] == trust.PredicateSLSAProvenance {
			envelope = a.Payload
		}
	}
	st, who, err := trust.OpenEnvelope(envelope, []trust.PublicKey{pub})
	if err != nil || who != 0 || !st.About(rep.Published[0].Digest) || st.PredicateType != trust.PredicateSLSAProvenance {
		t.Fatalf("the attestation: %+v, key %d, %v", st, who, err)
	}
	var p provenance
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		deps[d.Name] = d.Digest["sha256"]
	}
	if deps["iso"] != isoSum || "sha256:"+deps["hello"] != imgDigest || "sha256:"+deps["lock"] != string(m.LockDigest) {
		t.Errorf("resolvedDependencies = %+v", p.BuildDefinition.ResolvedDependencies)
	}
	if s := p.BuildDefinition.InternalParameters.Stages; len(s) != 2 || s[1] != (stageEntry{Name: "seal", Recipe: "bbbb"}) {
		t.Errorf("stages = %+v", s)
	}
	if b := p.RunDetails.Byproducts; len(b) != 2 || b[1].Name != "stage-key/seal" || b[1].Digest["sha256"] != "2222" {
		t.Errorf("byproducts = %+v", b)
	}
	if !p.RunDetails.Metadata.StartedOn.Equal(started) || !p.RunDetails.Metadata.FinishedOn.Equal(finished) ||
		p.RunDetails.Builder.Version["snofactory"] == "" {
		t.Errorf("runDetails = %+v", p.RunDetails)
	}

	cosign := testbin.Cosign(t)
	for _, args := range [][]string{
		{"verify", "--key", trust.PubFile(filepath.Join(keys, "depot"))},
		{"verify-attestation", "--type", "slsaprovenance1", "--key", trust.PubFile(filepath.Join(keys, "depot"))},
		{"verify-attestation", "--type", "spdxjson", "--key", trust.PubFile(filepath.Join(keys, "depot"))},
	} {
		cmd := exec.Command(cosign, append(args, "--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry", ref)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cosign %s: %v\n%s", args[0], err, out)
		}
	}
	// Another key's holder cannot pass the attestation off as the depot's.
	trusttest.Generate(t, filepath.Join(keys, "intruder"), string(pass))
	cmd := exec.Command(cosign, "verify-attestation", "--type", "slsaprovenance1", "--key", trust.PubFile(filepath.Join(keys, "intruder")),
		"--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry", ref)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("cosign accepted the attestation with another key:\n%s", out)
	}
}
