package sbom

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/containers/image/v5/docker/reference"
	"github.com/opencontainers/go-digest"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// FileName is the SBOM's name inside a seed directory; MediaType is SPDX JSON's.
const (
	FileName  = "sbom.spdx.json"
	MediaType = "application/spdx+json"
)

// NamespacePrefix starts every document namespace; the seed's name and the digest of the
// document's content follow.
const NamespacePrefix = "https://snofactory.io/spdx/seed/"

// Package managers of OSPackages.
const (
	ManagerRPM  = "rpm"
	ManagerDpkg = "dpkg"
)

// Input is what a seed's SBOM is built from.
type Input struct {
	// Manifest is the sealed seed's manifest with its disks described: the seed's name,
	// raw disk digest, images, creation time and snofactory version come from it.
	Manifest *seed.Manifest
	// OS is the installed root's package database.
	OS OSPackages
	// Binaries are the snofactory binaries placed on the node.
	Binaries []Binary
}

// OSPackages is the package database of the seed's installed root, as the node reported it.
type OSPackages struct {
	// Manager is ManagerRPM, ManagerDpkg or "" when the root has no package database.
	Manager string
	// DistroID and DistroVersion are the root's os-release ID and VERSION_ID.
	DistroID, DistroVersion string
	Packages                []Package
	// Total is how many packages the database lists (more than len(Packages) when the
	// list was cut on the way); Reason says why the list is empty or incomplete.
	Total  int
	Reason string
}

// Package is one OS package; Epoch and Release are rpm's, a deb's Version is whole.
type Package struct {
	Name, Epoch, Version, Release, Arch string
}

// Binary is one snofactory binary on the node.
type Binary struct {
	// Path is where the node has it.
	Path string
	// SHA256 is the hex digest of the file; Size its length.
	SHA256 string
	Size   int64
	// Module and Version are from its Go build information.
	Module, Version string
}

// Element ids of the document and of the seed, the package it describes.
const (
	documentID common.ElementID = "DOCUMENT"
	seedID     common.ElementID = "Seed"
)

const noAssertion = "NOASSERTION"

// Build returns the SBOM of the seed in. Entries the node reported that cannot be listed
// (a package without a name, a binary without a sha256) are left out and counted in the
// document's comment; everything else from the node is carried as data, escaped where
// it goes into an identifier or a purl.
func Build(in Input) (*spdx.Document, error) {
	m := in.Manifest
	if m == nil {
		return nil, errors.New("sbom: no seed manifest")
	}
	raw, err := rawDigest(m)
	if err != nil {
		return nil, err
	}
	ids := idSet{used: map[common.ElementID]bool{documentID: true, seedID: true}}
	root := &spdx.Package{
		PackageName:             m.Name,
		PackageSPDXIdentifier:   seedID,
		PackageVersion:          m.ReleaseVersion,
		PackageDownloadLocation: noAssertion,
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: raw.Encoded()}},
		// A seed is written onto a server's disk. (Not OPERATING-SYSTEM: SPDX 2.3's text
		// and its JSON schema spell that one differently, and validators disagree.)
		PrimaryPackagePurpose: "INSTALL",
		BuiltDate:             spdxTime(m),
		PackageComment: fmt.Sprintf("snofactory seed: the sealed %s disk (raw bytes %s), blueprint %s, lock %s",
			m.Target, raw, m.BlueprintDigest, m.LockDigest),
	}
	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: documentID,
		DocumentName:   "snofactory seed " + m.Name,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "snofactory-" + toolVersion(m)}},
			Created:  spdxTime(m),
		},
		Packages:      []*spdx.Package{root},
		Relationships: []*spdx.Relationship{relate(documentID, common.TypeRelationshipDescribe, seedID)},
	}
	contains := func(p *spdx.Package) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relate(seedID, common.TypeRelationshipContains, p.PackageSPDXIdentifier))
	}
	for _, im := range m.Images {
		contains(imagePackage(im, ids))
	}
	pkgs, nameless := osPackages(in.OS, ids)
	for _, p := range pkgs {
		contains(p)
	}
	bins, unhashed := binaryPackages(in.Binaries, ids)
	for _, p := range bins {
		contains(p)
	}
	doc.DocumentComment = comment(in.OS, len(pkgs), nameless, unhashed)
	if doc.DocumentNamespace, err = namespace(doc, m.Name); err != nil {
		return nil, err
	}
	return doc, nil
}

// rawDigest is the digest of the sealed raw disk, which every stored form shares.
func rawDigest(m *seed.Manifest) (digest.Digest, error) {
	if len(m.Disks) == 0 {
		return "", errors.New("sbom: the seed manifest describes no disk")
	}
	d := m.Disks[0].RawDigest
	for _, o := range m.Disks[1:] {
		if o.RawDigest != d {
			return "", fmt.Errorf("sbom: the seed's disks disagree on the raw disk: %s has %s, %s has %s", m.Disks[0].File, d, o.File, o.RawDigest)
		}
	}
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
		return "", fmt.Errorf("sbom: the raw disk digest %q is not a sha256 digest", d)
	}
	return d, nil
}

// spdxTime is the seed's creation time as SPDX writes it (UTC, seconds).
func spdxTime(m *seed.Manifest) string { return m.Created.UTC().Format("2006-01-02T15:04:05Z") }

func toolVersion(m *seed.Manifest) string {
	if v := m.Tools["snofactory"]; v != "" {
		return v
	}
	return "unknown"
}

func relate(a common.ElementID, rel string, b common.ElementID) *spdx.Relationship {
	return &spdx.Relationship{RefA: common.MakeDocElementID("", string(a)), RefB: common.MakeDocElementID("", string(b)), Relationship: rel}
}

func purlRef(p string) []*spdx.PackageExternalReference {
	return []*spdx.PackageExternalReference{{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: p}}
}

// imagePackage is a container image of the seed: its manifest digest as the checksum
// and the version, a pkg:oci purl naming where it is pulled from.
func imagePackage(im seed.Image, ids idSet) *spdx.Package {
	p := &spdx.Package{
		PackageName:             im.Name,
		PackageSPDXIdentifier:   ids.make("Image", im.Name, im.Ref, im.Digest.String()),
		PackageVersion:          im.Digest.String(),
		PackageDownloadLocation: noAssertion,
		PrimaryPackagePurpose:   "CONTAINER",
		PackageComment:          "pull spec " + im.Ref,
	}
	if im.Digest.Algorithm() == digest.SHA256 && im.Digest.Validate() == nil {
		p.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: im.Digest.Encoded()}}
	}
	p.PackageExternalReferences = purlRef(ociPURL(im))
	return p
}

// ociPURL is pkg:oci/NAME@DIGEST?repository_url=REPO[&tag=TAG], NAME the last part of
// the repository, as the purl spec's oci type has it.
func ociPURL(im seed.Image) string {
	q := map[string]string{}
	name := im.Name
	if ref, err := reference.ParseNormalizedNamed(im.Ref); err == nil {
		repo := ref.Name()
		name = path.Base(reference.Path(ref))
		q["repository_url"] = repo
		if t, ok := ref.(reference.Tagged); ok {
			q["tag"] = t.Tag()
		}
	}
	return purl("oci", "", strings.ToLower(name), im.Digest.String(), q)
}

// osPackages are the OS packages, sorted and without duplicates, and the number left out
// for want of a name.
func osPackages(pk OSPackages, ids idSet) ([]*spdx.Package, int) {
	list := append([]Package(nil), pk.Packages...)
	sort.Slice(list, func(i, j int) bool { return packageKey(list[i]) < packageKey(list[j]) })
	var out []*spdx.Package
	nameless := 0
	for i, p := range list {
		if p.Name == "" {
			nameless++
			continue
		}
		if i > 0 && packageKey(list[i-1]) == packageKey(p) {
			continue
		}
		version, pu := p.Version, ""
		switch pk.Manager {
		case ManagerRPM:
			version = rpmVersion(p)
			q := map[string]string{"arch": p.Arch, "epoch": p.Epoch, "distro": distro(pk)}
			pu = purl("rpm", rpmVendor(pk.DistroID), p.Name, joinNonEmpty("-", p.Version, p.Release), q)
		case ManagerDpkg:
			q := map[string]string{"arch": p.Arch, "distro": distro(pk)}
			pu = purl("deb", debVendor(pk.DistroID), p.Name, p.Version, q)
		}
		sp := &spdx.Package{
			PackageName:             p.Name,
			PackageSPDXIdentifier:   ids.make("Package-"+pk.Manager, p.Name, packageKey(p)),
			PackageVersion:          version,
			PackageDownloadLocation: noAssertion,
		}
		if pu != "" {
			sp.PackageExternalReferences = purlRef(pu)
		}
		out = append(out, sp)
	}
	return out, nameless
}

func packageKey(p Package) string {
	return strings.Join([]string{p.Name, p.Epoch, p.Version, p.Release, p.Arch}, "\x00")
}

// rpmVersion is rpm's EVR as rpm prints it: [EPOCH:]VERSION-RELEASE.
func rpmVersion(p Package) string {
	v := joinNonEmpty("-", p.Version, p.Release)
	if p.Epoch != "" {
		v = p.Epoch + ":" + v
	}
	return v
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// distro is the purl distro qualifier, ID-VERSION_ID (debian-12, rhcos-4.16).
func distro(pk OSPackages) string {
	if pk.DistroID == "" {
		return ""
	}
	return joinNonEmpty("-", pk.DistroID, pk.DistroVersion)
}

// rpmVendor is the purl namespace of an rpm: the distribution's vendor.
func rpmVendor(id string) string {
	switch id {
	case "fedora", "centos", "opensuse", "suse", "rocky", "almalinux", "oraclelinux":
		return id
	}
	return "redhat" // rhcos, rhel, scos and unknown: RHCOS is what rpm seeds run
}

func debVendor(id string) string {
	if id == "ubuntu" {
		return id
	}
	return "debian"
}

// binaryPackages are the snofactory binaries with a sha256, by path, and the number left
// out for want of one.
func binaryPackages(bins []Binary, ids idSet) ([]*spdx.Package, int) {
	list := append([]Binary(nil), bins...)
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	var out []*spdx.Package
	unhashed := 0
	for _, b := range list {
		if !sha256Hex.MatchString(b.SHA256) || b.Path == "" {
			unhashed++
			continue
		}
		p := &spdx.Package{
			PackageName:             path.Base(b.Path),
			PackageSPDXIdentifier:   ids.make("Binary", path.Base(b.Path), b.Path, b.SHA256),
			PackageVersion:          b.Version,
			PackageFileName:         b.Path,
			PackageDownloadLocation: noAssertion,
			PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: b.SHA256}},
			PrimaryPackagePurpose:   "APPLICATION",
			PackageComment:          fmt.Sprintf("placed on the node at %s (%d bytes)", b.Path, b.Size),
		}
		// A module version names a release; a development build's version holds a space
		// and a revision and is no purl version.
		if b.Module != "" && b.Version != "" && !strings.ContainsAny(b.Version, " ()") {
			ns, name := path.Split(b.Module)
			p.PackageExternalReferences = purlRef(purl("golang", strings.TrimSuffix(ns, "/"), name, b.Version, nil))
		}
		out = append(out, p)
	}
	return out, unhashed
}

var sha256Hex = regexp.MustCompile(`^[a-f0-9]{64}$`)

// comment says how complete the document is.
func comment(pk OSPackages, listed, nameless, unhashed int) string {
	var b strings.Builder
	b.WriteString("Generated by snofactory when the seed was sealed, from the seed manifest and the facts the node's agent reported at validation. ")
	switch {
	case pk.Manager == "":
		fmt.Fprintf(&b, "OS packages: none listed: %s.", orUnknown(pk.Reason))
	case pk.Total > len(pk.Packages):
		fmt.Fprintf(&b, "OS packages: %d of the %d in the %s database (%s).", listed, pk.Total, pk.Manager, orUnknown(pk.Reason))
	default:
		fmt.Fprintf(&b, "OS packages: %d from the %s database", listed, pk.Manager)
		if d := distro(pk); d != "" {
			fmt.Fprintf(&b, " of %s", d)
		}
		b.WriteString(".")
		if pk.Reason != "" {
			fmt.Fprintf(&b, " %s.", strings.TrimSuffix(pk.Reason, "."))
		}
	}
	if nameless > 0 {
		fmt.Fprintf(&b, " %d package entries without a name were left out.", nameless)
	}
	if unhashed > 0 {
		fmt.Fprintf(&b, " %d snofactory binaries the node could not hash were left out.", unhashed)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "the node gave no reason"
	}
	return strings.TrimSuffix(s, ".")
}

// namespace derives the document namespace from the digest of the document's content
// without it: the same seed, the same namespace; another seed, another.
func namespace(doc *spdx.Document, name string) (string, error) {
	doc.DocumentNamespace = ""
	b, err := Marshal(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return NamespacePrefix + name + "/sha256-" + hex.EncodeToString(sum[:]), nil
}

// idSet makes element ids: SPDXRef- ids allow only letters, digits, '.' and '-', so an id
// is a readable part of the name and a short hash of what identifies the element.
type idSet struct{ used map[common.ElementID]bool }

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func (s *idSet) make(kind, name string, identity ...string) common.ElementID {
	if s.used == nil {
		s.used = map[common.ElementID]bool{}
	}
	readable := strings.Trim(idUnsafe.ReplaceAllString(name, "-"), "-")
	if len(readable) > 48 {
		readable = readable[:48]
	}
	sum := sha256.Sum256([]byte(strings.Join(append([]string{kind, name}, identity...), "\x00")))
	base := kind + "-" + readable + "-" + hex.EncodeToString(sum[:])[:12]
	base = strings.ReplaceAll(base, "--", "-")
	id := common.ElementID(base)
	for n := 2; s.used[id]; n++ {
		id = common.ElementID(fmt.Sprintf("%s-%d", base, n))
	}
	s.used[id] = true
	return id
}

// Marshal is the document as SPDX JSON, as tools-golang writes it, indented.
func Marshal(doc *spdx.Document) ([]byte, error) {
	var b bytes.Buffer
	if err := spdxjson.Write(doc, &b, spdxjson.Indent("  "), spdxjson.EscapeHTML(false)); err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return b.Bytes(), nil
}

// Read parses an SPDX 2.3 JSON document of at most seed.MaxSBOMSize bytes, such as a
// seed's SBOM from elsewhere.
func Read(r io.Reader) (*spdx.Document, error) {
	b, err := io.ReadAll(io.LimitReader(r, seed.MaxSBOMSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the SBOM: %w", err)
	}
	if len(b) > seed.MaxSBOMSize {
		return nil, fmt.Errorf("the SBOM is more than %d bytes", seed.MaxSBOMSize)
	}
	var v struct {
		SPDXVersion string `json:"spdxVersion"`
	}
	if err := strictjson.DecodeOpen(b, &v); err != nil {
		return nil, fmt.Errorf("the SBOM is not JSON: %w", err)
	}
	if v.SPDXVersion != spdx.Version {
		return nil, fmt.Errorf("the SBOM's spdxVersion is %q, not %s", v.SPDXVersion, spdx.Version)
	}
	var doc spdx.Document
	if err := spdxjson.ReadInto(bytes.NewReader(b), &doc); err != nil {
		return nil, fmt.Errorf("reading the SBOM: %w", err)
	}
	return &doc, nil
}
