package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/vincent-petithory/dataurl"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// openshiftToken is the fake registry credential in the test's pull secret: recognizable, so
// the test can look for it in every file the build leaves behind.
const openshiftToken = "snofactory-e2e:FAKE-TOKEN-7f3c9a1e5d"

// installerStandIn returns a self-contained openshift-install for the release's installer
// component. The real openshift-install cannot exist here (it needs a real release payload
// and is not redistributable), so this is render's recorded stand-in,
// stages/render/testdata/openshift-install-standin: a script replaying the real installer's
// output formats for `version`, `create manifests` and `create
// single-node-ignition-config`. The stand-in reads recorded/ beside itself, but resolve
// extracts only /usr/bin/openshift-install from the installer image, so the script and its
// recorded files are packed into one shell script that unpacks them into a temporary
// directory per run and runs the stand-in from there, unchanged.
func installerStandIn(t *testing.T) []byte {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "stages", "render", "testdata", "openshift-install-standin")
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil || len(files) < 2 {
		t.Fatalf("reading the openshift-install stand-in in %s: %v (%d files)", dir, err, len(files))
	}
	sort.Strings(files)
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# TEST STAND-IN FOR openshift-install, NOT THE REAL INSTALLER: snofactory's recorded stand-in
# (stages/render/testdata/openshift-install-standin), packed with its recorded/ files.
set -eu
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/recorded"
`)
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "base64 -d >\"$d/%s\" <<'SNOFACTORY_EOF'\n", rel)
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\nSNOFACTORY_EOF\n")
	}
	// The real installer prints the path it was run by (version.go runVersionCmd): this
	// wrapper's, not the unpacked copy's.
	b.WriteString("chmod 0755 \"$d/openshift-install\"\nOPENSHIFT_INSTALL_STANDIN_ARGV0=\"$0\" \"$d/openshift-install\" \"$@\"\n")
	return []byte(b.String())
}

// openshiftBlueprint writes an openshift blueprint modeled on blueprints/du-profile.yaml into
// dir: the synthetic release by tag, a pull secret with openshiftToken, an SSH key, one extra
// image, relocation defaults and no source (the live ISO comes from the release).
func openshiftBlueprint(t *testing.T, dir, releaseTag, extra string) (bp string, pullSecret []byte) {
	t.Helper()
	pullSecret = []byte(`{"auths":{"registry.e2e.invalid":{"auth":"` +
		base64.StdEncoding.EncodeToString([]byte(openshiftToken)) + `","email":"e2e@example.com"}}}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "pull-secret.json"), pullSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI depot@factory.example\n"
	if err := os.WriteFile(filepath.Join(dir, "id_ed25519.pub"), []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	// The seed's reconfiguration runs recert at the site: an image on the same registry.
	recert := recertRef(extra)
	pushRandom(t, recert)
	bp = filepath.Join(dir, "sno-e2e.yaml")
	doc := `apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: sno-e2e
spec:
  target:
    type: openshift
    ignitionVersion: 3.4.0
  openshift:
    releaseImage: ` + releaseTag + `
    clusterName: sno-e2e
    baseDomain: edge.example.com
    pullSecretFile: pull-secret.json
    sshPublicKeyFile: id_ed25519.pub
    clusterNetwork:
      - cidr: 10.128.0.0/14
        hostPrefix: 23
    serviceNetwork:
      - 172.30.0.0/16
    installDisk: /dev/vda
  extraImages:
    - ` + extra + `
  relocation:
    recertImage: ` + recert + `
`
	if err := os.WriteFile(bp, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return bp, pullSecret
}

// recertRef is the test's recert image, on the registry of the extra image.
func recertRef(extra string) string {
	host, _, _ := strings.Cut(extra, "/")
	return host + "/edge-infrastructure/recert:v0"
}

// lockFile is the part of resolve's lock.json this test checks.
type lockFile struct {
	Release struct{ Ref, Digest, Version string }
	Images  []struct{ Name, Ref, Digest, Source string }
	ISO     *struct {
		URL, Path, SHA256, From string
	}
	Installer *struct{ Ref, Digest, Path, SHA256 string }
}

// TestOpenShiftBuildsThroughPrecache runs the OpenShift path of the real pipeline against a
// synthetic release payload in a real registry: resolve pins the release, its components,
// its live ISO (the conformance ISO, named by the release's coreos-bootimages stream) and its
// installer; render runs the installer extracted from the release (a stand-in replaying the
// real installer's recorded output formats, see installerStandIn); live-iso embeds the
// bootstrap-in-place config; precache copies every pinned image. A second build is all cache
// hits; a new base domain re-plans and rebuilds render and what follows it, not resolve or
// precache. No file the build leaves holds the pull secret, except those that must.
func TestOpenShiftBuildsThroughPrecache(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	iso, err := conformance.Cached(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A private copy: the shared one is rebuilt when the conformance OS's inputs change,
	// possibly by another test while this one runs.
	iso = testbin.CopyFile(t, iso, filepath.Join(t.TempDir(), "rhcos-live.x86_64.iso"))
	isoSum := fileSHA256(t, iso)
	reg := registry.StartT(t, registry.Options{})
	script := installerStandIn(t)
	rel, err := payload.Generate(ctx, reg.Addr(), payload.Options{
		Size:            payload.Tiny,
		Version:         "4.18.0",
		ISO:             payload.ISO{Location: "file://" + iso, SHA256: isoSum},
		InstallerScript: script,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The blueprint names the release by this tag, as users do; it starts with the version.
	if !strings.HasSuffix(rel.Tag, ":4.18.0-x86_64") {
		t.Fatalf("payload tag %s", rel.Tag)
	}
	extra := reg.Ref("site/agent:1.0")
	pushRandom(t, extra)

	dir := t.TempDir()
	bp, pullSecret := openshiftBlueprint(t, dir, rel.Tag, extra)
	// The installer's work directory holds the real pull secret; a private TMPDIR shows that
	// nothing of it outlives the build.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cache, out := t.TempDir(), t.TempDir()
	build := func(out string) *pipeline.Record {
		t.Helper()
		r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out, "--progress", "plain")
		if r.code != 0 {
			t.Fatalf("build: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		t.Logf("build took %s", r.took.Round(time.Millisecond))
		return loadRecord(t, out)
	}
	first := build(out)
	want := []string{"resolve", "render", "live-iso", "precache"}
	if len(first.Stages) != len(want) {
		t.Fatalf("stages: %+v", first.Stages)
	}
	for i, s := range first.Stages {
		if s.Name != want[i] || s.Cache != "miss" {
			t.Errorf("first build, stage %d: %s was %s, want %s miss", i, s.Name, s.Cache, want[i])
		}
	}

	// The lock pins the release, every component, the ISO and the installer.
	var lock lockFile
	mustJSON(t, filepath.Join(out, "resolve", "lock.json"), &lock)
	if lock.Release.Digest != rel.Digest || lock.Release.Ref != rel.Tag {
		t.Errorf("lock release %+v, want %s at %s", lock.Release, rel.Tag, rel.Digest)
	}
	pinned := map[string]string{}
	for _, im := range lock.Images {
		if !strings.Contains(im.Ref, "@"+im.Digest) {
			t.Errorf("lock image %s is not pinned by digest: %s", im.Name, im.Ref)
		}
		pinned[im.Name] = im.Digest
	}
	if pinned["release"] != rel.Digest {
		t.Errorf("lock images: release %s, want %s", pinned["release"], rel.Digest)
	}
	for _, c := range rel.Components {
		if pinned[c.Name] != c.Digest {
			t.Errorf("lock: component %s pinned to %q, want %s", c.Name, pinned[c.Name], c.Digest)
		}
	}
	if n := len(rel.Components) + 3; len(lock.Images) != n {
		t.Errorf("lock has %d images, want %d (release, %d components, the extra image, recert)", len(lock.Images), n, len(rel.Components))
	}
	if pinned[recertRef(extra)] == "" {
		t.Errorf("lock does not pin the recert image %s", recertRef(extra))
	}
	if pinned[extra] == "" {
		t.Errorf("lock does not pin the extra image %s", extra)
	}
	if lock.ISO == nil || lock.ISO.SHA256 != isoSum || lock.ISO.URL != "file://"+iso || lock.ISO.From != "coreos-bootimages" {
		t.Errorf("lock ISO %+v, want the conformance ISO (sha256 %s) from coreos-bootimages", lock.ISO, isoSum)
	}
	inst, _ := rel.Component(payload.NameInstaller)
	scriptSum := sha256.Sum256(script)
	if lock.Installer == nil || lock.Installer.Digest != inst.Digest || lock.Installer.SHA256 != hex.EncodeToString(scriptSum[:]) {
		t.Fatalf("lock installer %+v, want digest %s, sha256 %x", lock.Installer, inst.Digest, scriptSum)
	}
	if b, err := os.ReadFile(filepath.Join(out, "resolve", filepath.FromSlash(lock.Installer.Path))); err != nil || !bytes.Equal(b, script) {
		t.Errorf("resolve's extracted openshift-install is not the installer component's (%v)", err)
	}

	// render: the installer's bootstrap-in-place config, secret, valid Ignition.
	cfgPath := filepath.Join(out, "render", "ignition", "config.ign")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Only the owner may read it (committed cache outputs are also read-only: 0400).
	if st, _ := os.Stat(cfgPath); st.Mode().Perm()&0o077 != 0 || st.Mode().Perm()&0o400 == 0 {
		t.Errorf("config.ign mode %v, want readable by its owner only", st.Mode().Perm())
	}
	files := parseIgnition(t, cfg)
	if got := files["/root/.docker/config.json"]; !bytes.Equal(got, compactJSON(t, pullSecret)) {
		t.Errorf("config.ign gives the node pull secret %q, want the blueprint's", got)
	}
	// The leak check below would see a copy of the config: it looks for this form too.
	if needles := pullSecretNeedles(t, pullSecret); !bytes.Contains(cfg, needles[len(needles)-1]) {
		t.Error("config.ign does not carry the pull secret as the leak check expects (a base64 data URL)")
	}
	// The installer is told to install the release resolve pinned, by digest.
	var rrep struct {
		Release struct{ Image, Version, From string }
	}
	mustJSON(t, filepath.Join(out, "render", "render.json"), &rrep)
	if rrep.Release.Image != rel.PullSpec || rrep.Release.Version != "4.18.0" {
		t.Errorf("render.json release %+v, want %s (4.18.0)", rrep.Release, rel.PullSpec)
	}
	ic, err := os.ReadFile(filepath.Join(out, "render", "manifests", "install-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var icDoc struct {
		BaseDomain string `yaml:"baseDomain"`
		PullSecret string `yaml:"pullSecret"`
		SSHKey     string `yaml:"sshKey"`
		Metadata   struct{ Name string }
	}
	if err := yaml.Unmarshal(ic, &icDoc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(icDoc.PullSecret, "REDACTED") || icDoc.BaseDomain != "edge.example.com" || icDoc.Metadata.Name != "sno-e2e" {
		t.Errorf("kept install-config.yaml: pullSecret %q, baseDomain %q, name %q", icDoc.PullSecret, icDoc.BaseDomain, icDoc.Metadata.Name)
	}
	for _, mc := range []string{"90-master-snofactory-internal-ip", "90-master-snofactory-node-ip",
		"90-master-snofactory-seal", "90-master-snofactory-shipment", "50-master-dnsmasq-configuration"} {
		b, err := os.ReadFile(filepath.Join(out, "render", "manifests", mc+".yaml"))
		if err != nil {
			t.Errorf("relocation MachineConfig: %v", err)
			continue
		}
		var m struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal(b, &m); err != nil || m.Kind != "MachineConfig" || m.Metadata.Name != mc {
			t.Errorf("%s.yaml: kind %q name %q (%v)", mc, m.Kind, m.Metadata.Name, err)
		}
		// The installer got it in its openshift/ directory, so the node installs it.
		if !bytes.Equal(files["/opt/openshift/openshift/"+mc+".yaml"], b) {
			t.Errorf("%s did not reach the installer's openshift/ directory", mc)
		}
	}

	// live-iso: the ISO carries exactly config.ign.
	shown := runCLI(t, "iso", "show", filepath.Join(out, "live-iso", "live.iso"))
	if shown.code != 0 || !bytes.Equal(bytes.TrimSpace([]byte(shown.stdout)), bytes.TrimSpace(cfg)) {
		t.Fatalf("the live ISO does not carry config.ign (exit %d): %s", shown.code, shown.stderr)
	}
	if st, err := os.Stat(filepath.Join(out, "live-iso", "live.iso")); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("live.iso embeds the pull secret: want it readable by its owner only (%v)", err)
	}
	var lrep struct {
		Strategy                     string
		ConfigBytes, PayloadBytes    int
		AreaBytes, OriginalAreaBytes int64
	}
	mustJSON(t, filepath.Join(out, "live-iso", "liveiso-report.json"), &lrep)
	t.Logf("config.ign %d bytes, embed payload %d bytes, ISO embed area %d bytes: strategy %s",
		lrep.ConfigBytes, lrep.PayloadBytes, lrep.OriginalAreaBytes, lrep.Strategy)
	// The stand-in's config compresses to less than the conformance ISO's embed area, so the
	// area is patched in place; a real installer's bigger config would take the rebuild path.
	if lrep.ConfigBytes != len(cfg) || int64(lrep.PayloadBytes) > lrep.OriginalAreaBytes || lrep.Strategy != "embed" {
		t.Errorf("live-iso report %+v: want the embed strategy for a %d-byte config", lrep, len(cfg))
	}

	// precache: every image of the lock.
	var prep struct {
		Images     int
		BytesTotal int64
		ImageList  []struct{ Name, Ref, Digest string }
	}
	mustJSON(t, filepath.Join(out, "precache", "precache-report.json"), &prep)
	t.Logf("precache: %d images, %d bytes", prep.Images, prep.BytesTotal)
	// The data disk carries the node's agent, the snofactory that built it, where the
	// node's phase script takes it from (GNU tar stopping at the first occurrence).
	agentDir := t.TempDir()
	if b, err := exec.Command("tar", "-xf", filepath.Join(out, "precache", "precache.tar"), "--occurrence=1", "-C", agentDir, "agent/snofactory").CombinedOutput(); err != nil {
		t.Errorf("taking the agent off the data disk: %v: %s", err, b)
	} else if got, want := fileDigest(t, filepath.Join(agentDir, "agent", "snofactory")), fileDigest(t, snofactoryBin); got != want {
		t.Errorf("the data disk's agent is %s, want the snofactory binary %s", got, want)
	}
	cached := map[string]bool{}
	for _, im := range prep.ImageList {
		cached[im.Digest] = true
	}
	for _, im := range lock.Images {
		if !cached[im.Digest] {
			t.Errorf("precache-report.json lacks %s (%s)", im.Name, im.Digest)
		}
	}
	if len(prep.ImageList) != len(lock.Images) {
		t.Errorf("precache lists %d images, the lock %d", len(prep.ImageList), len(lock.Images))
	}

	// No leftover copy of the pull secret outside the files that must carry it. The output
	// dir's stage directories link into the cache's entries, so the cache walk reads them.
	assertNoPullSecret(t, pullSecret, cache, out, tmp)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the build left %d entries in TMPDIR (first %s)", len(left), left[0].Name())
	}

	// Again: every stage a cache hit.
	for _, s := range build(t.TempDir()).Stages {
		if s.Cache != "hit" {
			t.Errorf("second build: %s was %s", s.Name, s.Cache)
		}
	}

	// A new base domain: render and what follows it run again, resolve (and precache, which
	// reads only the lock) stay cached.
	b, _ := os.ReadFile(bp)
	if err := os.WriteFile(bp, bytes.Replace(b, []byte("baseDomain: edge.example.com"), []byte("baseDomain: edge2.example.com"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := runCLI(t, "plan", bp, "--cache-dir", cache, "-o", "json")
	if plan.code != 0 {
		t.Fatalf("plan: exit %d: %s", plan.code, plan.stderr)
	}
	var p struct{ Stages []pipeline.PlannedStage }
	if err := json.Unmarshal([]byte(plan.stdout), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, plan.stdout)
	}
	// Every stage after render runs again; resolve and precache (which reads only the lock)
	// stay cached.
	wantAction := map[string]string{"resolve": "cached", "precache": "cached"}
	wantReason := map[string]string{"render": "openshift.baseDomain changed", "live-iso": "render"}
	for _, s := range p.Stages {
		want := "run"
		if w, ok := wantAction[s.Name]; ok {
			want = w
		}
		if s.Action != want {
			t.Errorf("plan after a new baseDomain: %s %s (%v), want %s", s.Name, s.Action, s.Reasons, want)
		}
		if w, ok := wantReason[s.Name]; ok && !strings.Contains(strings.Join(s.Reasons, "; "), w) {
			t.Errorf("plan after a new baseDomain: %s runs because %v, want %q", s.Name, s.Reasons, w)
		}
	}
	if len(p.Stages) < 5 {
		t.Errorf("plan shows %d stages, want the whole graph", len(p.Stages))
	}
	out3 := t.TempDir()
	for _, s := range build(out3).Stages {
		want := map[string]string{"resolve": "hit", "render": "miss", "live-iso": "miss", "precache": "hit"}[s.Name]
		if s.Cache != want {
			t.Errorf("build after a new baseDomain: %s was %s, want %s", s.Name, s.Cache, want)
		}
	}
	if ic, err := os.ReadFile(filepath.Join(out3, "render", "manifests", "install-config.yaml")); err != nil || !bytes.Contains(ic, []byte("baseDomain: edge2.example.com")) {
		t.Errorf("install-config.yaml after a new baseDomain: %v\n%s", err, ic)
	}
	shown = runCLI(t, "iso", "show", filepath.Join(out3, "live-iso", "live.iso"))
	if cfg3, err := os.ReadFile(filepath.Join(out3, "render", "ignition", "config.ign")); err != nil || bytes.Equal(cfg3, cfg) ||
		!bytes.Equal(bytes.TrimSpace([]byte(shown.stdout)), bytes.TrimSpace(cfg3)) {
		t.Errorf("after a new baseDomain the live ISO does not carry the new config (%v)", err)
	}

	// snofactory lock pins the installer by its image digest without extracting it; a
	// build's resolve also records its checksum, and --locked accepts both.
	if r := runCLI(t, "lock", bp); r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, "build", bp, "--locked", "--until", "precache", "--cache-dir", cache, "--output-dir", t.TempDir()); r.code != 0 {
		t.Fatalf("build --locked with a fresh lock: exit %d: %s", r.code, r.stderr)
	}
	assertNoPullSecret(t, pullSecret, cache, out3, tmp)
}

// parseIgnition parses a config with the Ignition spec package of the version it declares
// and returns its files' decoded contents.
func parseIgnition(t *testing.T, cfg []byte) map[string][]byte {
	t.Helper()
	var head struct {
		Ignition struct{ Version string }
	}
	if err := json.Unmarshal(cfg, &head); err != nil {
		t.Fatalf("config.ign is not JSON: %v", err)
	}
	type file struct{ path, source string }
	var found []file
	// ParseCompatibleVersion parses with the package of the version the config declares
	// (3.0–3.5), validates it there, and translates it up to 3.5 for reading.
	c, rpt, err := v35.ParseCompatibleVersion(cfg)
	for _, f := range c.Storage.Files {
		if f.Contents.Source != nil {
			found = append(found, file{f.Path, *f.Contents.Source})
		}
	}
	if err != nil {
		t.Fatalf("config.ign (Ignition %s): %v\n%s", head.Ignition.Version, err, rpt)
	}
	out := map[string][]byte{}
	for _, f := range found {
		d, err := dataurl.DecodeString(f.source)
		if err != nil {
			t.Fatalf("config.ign: %s: %v", f.path, err)
		}
		out[f.path] = d.Data
	}
	return out
}

// assertNoPullSecret walks dirs and fails on any file holding the pull secret's credential,
// except the files that must: the bootstrap-in-place config, the live ISO embedding it, and
// the installer's auth/ outputs.
func assertNoPullSecret(t *testing.T, pullSecret []byte, dirs ...string) {
	t.Helper()
	needles := pullSecretNeedles(t, pullSecret)
	scanned := 0
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			parts := strings.Split(filepath.ToSlash(rel), "/")
			if d.Name() == "config.ign" || d.Name() == "live.iso" || (len(parts) > 1 && parts[len(parts)-2] == "auth") {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil {
				return err
			}
			scanned++
			for _, n := range needles {
				if bytes.Contains(b, n) {
					t.Errorf("%s holds the pull secret", p)
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if scanned == 0 {
		t.Fatal("no files scanned for the pull secret")
	}
}

// pullSecretNeedles are the forms in which the pull secret would show up in a file: its
// credential, decoded and not, the whole secret as written and compacted, and the compacted
// secret base64-encoded, as the bootstrap config's data URL carries it.
func pullSecretNeedles(t *testing.T, pullSecret []byte) [][]byte {
	t.Helper()
	return [][]byte{
		[]byte(base64.StdEncoding.EncodeToString([]byte(openshiftToken))),
		[]byte(openshiftToken),
		bytes.TrimSpace(pullSecret),
		compactJSON(t, pullSecret),
		[]byte(base64.StdEncoding.EncodeToString(compactJSON(t, pullSecret))),
	}
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileDigest(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
