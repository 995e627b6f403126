package sbom

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

var (
	rawDisk  = digest.FromString("raw disk")
	agentSum = strings.Repeat("ab", 32)
	etcdDig  = digest.FromString("etcd")
	appDig   = digest.FromString("app")
)

func testManifest() *seed.Manifest {
	return &seed.Manifest{
		SchemaVersion:   seed.SchemaVersion,
		Name:            "sno-edge",
		Target:          oskind.OpenShift,
		ReleaseVersion:  "4.16.3",
		Firmware:        seed.FirmwareUEFI,
		BlueprintDigest: digest.FromString("blueprint"),
		LockDigest:      digest.FromString("lock"),
		Created:         time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC),
		Tools:           map[string]string{"snofactory": "v1.4.0"},
		Images: []seed.Image{
			{Name: "etcd", Ref: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@" + etcdDig.String(), Digest: etcdDig},
			{Name: "store-app", Ref: "registry.example:5000/shop/app:1.2@" + appDig.String(), Digest: appDig},
		},
		Disks: []seed.Disk{
			{Format: seed.FormatQCOW2, File: "disk.qcow2", RawDigest: rawDisk},
			{Format: seed.FormatChunked, File: "disk.pack", RawDigest: rawDisk},
		},
	}
}

func testInput() Input {
	return Input{
		Manifest: testManifest(),
		OS: OSPackages{Manager: ManagerRPM, DistroID: "rhcos", DistroVersion: "416.94", Total: 2, Packages: []Package{
			{Name: "kernel-core", Epoch: "1", Version: "5.14.0", Release: "427.24.1.el9_4", Arch: "x86_64"},
			{Name: "bash", Version: "5.1.8", Release: "9.el9", Arch: "x86_64"},
		}},
		Binaries: []Binary{{Path: "/usr/local/bin/snofactory", SHA256: agentSum, Size: 42, Module: "github.com/snofactory/snofactory", Version: "v1.4.0"}},
	}
}

// roundTrip writes the document with tools-golang's writer and reads it back with its
// reader, as a consumer of the seed's SBOM would.
func roundTrip(t *testing.T, in Input) (*spdx.Document, []byte) {
	t.Helper()
	doc, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("tools-golang cannot read the SBOM back: %v\n%s", err, b)
	}
	if err := spdxlib.ValidateDocument(back); err != nil {
		t.Errorf("invalid SPDX document: %v", err)
	}
	mine, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(mine.Packages) != len(back.Packages) {
		t.Errorf("Read gives %d packages, tools-golang's reader %d", len(mine.Packages), len(back.Packages))
	}
	return back, b
}

type pkgs map[string]*spdx.Package

func byName(doc *spdx.Document) pkgs {
	out := pkgs{}
	for _, p := range doc.Packages {
		out[p.PackageName] = p
	}
	return out
}

func purlOf(p *spdx.Package) string {
	for _, r := range p.PackageExternalReferences {
		if r.Category == common.CategoryPackageManager && r.RefType == common.TypePackageManagerPURL {
			return r.Locator
		}
	}
	return ""
}

// TestBuild reads a seed's SBOM back with tools-golang and checks what it says: the
// seed described, with its raw disk digest, containing its images, OS packages and the
// agent, each with its checksum and purl.
func TestBuild(t *testing.T) {
	doc, raw := roundTrip(t, testInput())
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.DocumentName != "snofactory seed sno-edge" {
		t.Errorf("document: version %q, license %q, name %q", doc.SPDXVersion, doc.DataLicense, doc.DocumentName)
	}
	if doc.CreationInfo.Created != "2025-06-07T08:09:10Z" || len(doc.CreationInfo.Creators) != 1 ||
		doc.CreationInfo.Creators[0] != (common.Creator{CreatorType: "Tool", Creator: "snofactory-v1.4.0"}) {
		t.Errorf("creation info: %+v", doc.CreationInfo)
	}
	if !strings.HasPrefix(doc.DocumentNamespace, NamespacePrefix+"sno-edge/sha256-") || strings.Contains(doc.DocumentNamespace, "#") {
		t.Errorf("namespace %q", doc.DocumentNamespace)
	}
	described, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(described) != 1 {
		t.Fatalf("described packages %v: %v", described, err)
	}
	ps := byName(doc)
	root := ps["sno-edge"]
	if root == nil || root.PackageSPDXIdentifier != described[0] || root.PackageVersion != "4.16.3" ||
		len(root.PackageChecksums) != 1 || root.PackageChecksums[0] != (common.Checksum{Algorithm: common.SHA256, Value: rawDisk.Encoded()}) {
		t.Fatalf("root package: %+v", root)
	}
	contained := map[common.ElementID]bool{}
	for _, r := range doc.Relationships {
		if r.Relationship == common.TypeRelationshipContains && r.RefA.ElementRefID == root.PackageSPDXIdentifier {
			contained[r.RefB.ElementRefID] = true
		}
	}
	want := []struct {
		name, version, sha, purl string
	}{
		{"etcd", etcdDig.String(), etcdDig.Encoded(), "pkg:oci/ocp-v4.0-art-dev@" + etcdDig.String() + "?repository_url=quay.io/openshift-release-dev/ocp-v4.0-art-dev"},
		{"store-app", appDig.String(), appDig.Encoded(), "pkg:oci/app@" + appDig.String() + "?repository_url=registry.example:5000/shop/app&tag=1.2"},
		{"kernel-core", "1:5.14.0-427.24.1.el9_4", "", "pkg:rpm/redhat/kernel-core@5.14.0-427.24.1.el9_4?arch=x86_64&distro=rhcos-416.94&epoch=1"},
		{"bash", "5.1.8-9.el9", "", "pkg:rpm/redhat/bash@5.1.8-9.el9?arch=x86_64&distro=rhcos-416.94"},
		{"snofactory", "v1.4.0", agentSum, "pkg:golang/github.com/snofactory/snofactory@v1.4.0"},
	}
	for _, w := range want {
		p := ps[w.name]
		if p == nil {
			t.Errorf("no package %s in\n%s", w.name, raw)
			continue
		}
		if p.PackageVersion != w.version || purlOf(p) != w.purl || !contained[p.PackageSPDXIdentifier] {
			t.Errorf("%s: version %q, purl %q, contained %v; want %q, %q", w.name, p.PackageVersion, purlOf(p), contained[p.PackageSPDXIdentifier], w.version, w.purl)
		}
		if w.sha != "" && (len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != w.sha || p.PackageChecksums[0].Algorithm != common.SHA256) {
			t.Errorf("%s: checksums %+v, want sha256 %s", w.name, p.PackageChecksums, w.sha)
		}
	}
	if n := len(doc.Packages); n != len(want)+1 {
		t.Errorf("%d packages, want %d", n, len(want)+1)
	}
	if ps["snofactory"].PackageFileName != "/usr/local/bin/snofactory" {
		t.Errorf("agent file name %q", ps["snofactory"].PackageFileName)
	}
	// Every id is one SPDX allows.
	ids := regexp.MustCompile(`"SPDXID": "([^"]*)"`).FindAllSubmatch(raw, -1)
	valid := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, id := range ids {
		if !valid.Match(id[1]) {
			t.Errorf("SPDXID %q is not [A-Za-z0-9.-]+", id[1])
		}
	}
}

// TestBuildReproducible: the same seed gives the same bytes, whatever the order the node
// listed its packages in; another raw disk or package gives another namespace.
func TestBuildReproducible(t *testing.T) {
	_, a := roundTrip(t, testInput())
	shuffled := testInput()
	slices.Reverse(shuffled.OS.Packages)
	_, b := roundTrip(t, shuffled)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of one seed differ:\n%s\n%s", a, b)
	}
	ns := func(b []byte) string {
		var v struct {
			NS string `json:"documentNamespace"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v.NS
	}
	changes := map[string]func(*Input){
		"raw disk": func(in *Input) {
			for i := range in.Manifest.Disks {
				in.Manifest.Disks[i].RawDigest = digest.FromString("other disk")
			}
		},
		"package": func(in *Input) { in.OS.Packages[0].Release = "428.el9" },
		"agent":   func(in *Input) { in.Binaries[0].SHA256 = strings.Repeat("cd", 32) },
	}
	for name, change := range changes {
		in := testInput()
		change(&in)
		if _, c := roundTrip(t, in); ns(c) == ns(a) {
			t.Errorf("%s changed, the namespace did not: %s", name, ns(a))
		}
	}
}

// TestBuildPackages covers what a node's package list can hold.
func TestBuildPackages(t *testing.T) {
	long := strings.Repeat("very-long-name-", 20)
	tests := []struct {
		name string
		os   OSPackages
		// want maps package names to their version and purl.
		want    map[string][2]string
		comment string
	}{
		{
			name:    "no package database",
			os:      OSPackages{Reason: "no rpm database and no dpkg status file on the installed root"},
			want:    map[string][2]string{},
			comment: "OS packages: none listed: no rpm database and no dpkg status file on the installed root.",
		},
		{
			name:    "empty database",
			os:      OSPackages{Manager: ManagerDpkg},
			want:    map[string][2]string{},
			comment: "OS packages: 0 from the dpkg database.",
		},
		{
			name: "rpm epochs",
			os: OSPackages{Manager: ManagerRPM, DistroID: "rhel", DistroVersion: "9.4", Total: 3, Packages: []Package{
				{Name: "zero-epoch", Epoch: "0", Version: "1.0", Release: "1", Arch: "noarch"},
				{Name: "big-epoch", Epoch: "32", Version: "2.0", Release: "3.el9", Arch: "x86_64"},
				{Name: "no-release", Version: "3.0", Arch: "x86_64"},
			}},
			want: map[string][2]string{
				"zero-epoch": {"0:1.0-1", "pkg:rpm/redhat/zero-epoch@1.0-1?arch=noarch&distro=rhel-9.4&epoch=0"},
				"big-epoch":  {"32:2.0-3.el9", "pkg:rpm/redhat/big-epoch@2.0-3.el9?arch=x86_64&distro=rhel-9.4&epoch=32"},
				"no-release": {"3.0", "pkg:rpm/redhat/no-release@3.0?arch=x86_64&distro=rhel-9.4"},
			},
			comment: "OS packages: 3 from the rpm database of rhel-9.4.",
		},
		{
			name: "debian versions",
			os: OSPackages{Manager: ManagerDpkg, DistroID: "debian", DistroVersion: "12", Total: 2, Packages: []Package{
				{Name: "busybox-static", Version: "1:1.35.0-4+b3", Arch: "amd64"},
				{Name: "libstdc++6", Version: "12.2.0-14", Arch: "amd64"},
			}},
			want: map[string][2]string{
				"busybox-static": {"1:1.35.0-4+b3", "pkg:deb/debian/busybox-static@1:1.35.0-4%2Bb3?arch=amd64&distro=debian-12"},
				"libstdc++6":     {"12.2.0-14", "pkg:deb/debian/libstdc%2B%2B6@12.2.0-14?arch=amd64&distro=debian-12"},
			},
			comment: "OS packages: 2 from the dpkg database of debian-12.",
		},
		{
			name: "weird names",
			os: OSPackages{Manager: ManagerDpkg, Total: 6, Packages: []Package{
				{Name: "with space/and@slash#?&=", Version: "1 2", Arch: "amd64"},
				{Name: "ünïcödé", Version: "1", Arch: "amd64"},
				{Name: "100%", Version: "1", Arch: "all"},
				{Name: long, Version: "1", Arch: "all"},
				{Name: "", Version: "1", Arch: "all"},
				{Name: "", Version: "2", Arch: "all"},
			}},
			want: map[string][2]string{
				"with space/and@slash#?&=": {"1 2", "pkg:deb/debian/with%20space%2Fand%40slash%23%3F%26%3D@1%202?arch=amd64"},
				"ünïcödé":                  {"1", "pkg:deb/debian/%C3%BCn%C3%AFc%C3%B6d%C3%A9@1?arch=amd64"},
				"100%":                     {"1", "pkg:deb/debian/100%25@1?arch=all"},
				long:                       {"1", "pkg:deb/debian/" + long + "@1?arch=all"},
			},
			comment: "OS packages: 4 from the dpkg database. 2 package entries without a name were left out.",
		},
		{
			name: "duplicates and names that clash as ids",
			os: OSPackages{Manager: ManagerDpkg, Total: 3, Packages: []Package{
				{Name: "a b", Version: "1", Arch: "amd64"},
				{Name: "a-b", Version: "1", Arch: "amd64"},
				{Name: "a b", Version: "1", Arch: "amd64"},
			}},
			want: map[string][2]string{
				"a b": {"1", "pkg:deb/debian/a%20b@1?arch=amd64"},
				"a-b": {"1", "pkg:deb/debian/a-b@1?arch=amd64"},
			},
			comment: "OS packages: 2 from the dpkg database.",
		},
		{
			name: "cut on the way",
			os: OSPackages{Manager: ManagerRPM, Total: 900, Reason: "the list holds the first 1 of 900 packages", Packages: []Package{
				{Name: "bash", Version: "5.1.8", Release: "9.el9", Arch: "x86_64"},
			}},
			want:    map[string][2]string{"bash": {"5.1.8-9.el9", "pkg:rpm/redhat/bash@5.1.8-9.el9?arch=x86_64"}},
			comment: "OS packages: 1 of the 900 in the rpm database (the list holds the first 1 of 900 packages).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput()
			in.Manifest.Images, in.Binaries = nil, nil
			in.OS = tt.os
			doc, raw := roundTrip(t, in)
			got := map[string][2]string{}
			seen := map[common.ElementID]bool{}
			for _, p := range doc.Packages {
				if seen[p.PackageSPDXIdentifier] {
					t.Errorf("SPDXID %s twice", p.PackageSPDXIdentifier)
				}
				seen[p.PackageSPDXIdentifier] = true
				if p.PackageSPDXIdentifier != seedID {
					got[p.PackageName] = [2]string{p.PackageVersion, purlOf(p)}
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("packages %v, want %v", got, tt.want)
			}
			for name, w := range tt.want {
				if got[name] != w {
					t.Errorf("%q: got %q, want %q", name, got[name], w)
				}
			}
			if !strings.HasSuffix(doc.DocumentComment, tt.comment) {
				t.Errorf("comment %q, want it to end %q", doc.DocumentComment, tt.comment)
			}
			if bytes.Contains(raw, []byte(`\u0026`)) {
				t.Errorf("purls are HTML-escaped in the JSON")
			}
		})
	}
}

func TestBuildBinaries(t *testing.T) {
	tests := []struct {
		name    string
		bins    []Binary
		purls   []string
		comment string
	}{
		{"release", []Binary{{Path: "/usr/local/bin/snofactory", SHA256: agentSum, Module: "github.com/snofactory/snofactory", Version: "v1.4.0"}},
			[]string{"pkg:golang/github.com/snofactory/snofactory@v1.4.0"}, ""},
		{"development build", []Binary{{Path: "/usr/local/bin/snofactory", SHA256: agentSum, Module: "github.com/snofactory/snofactory", Version: "(devel) 0123456789ab+dirty"}},
			[]string{""}, ""},
		{"unreadable", []Binary{{Path: "/usr/local/bin/snofactory"}, {Path: "/run/snofactory/bin/snofactory", SHA256: "not hex"}},
			nil, "2 snofactory binaries the node could not hash were left out."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput()
			in.Binaries = tt.bins
			doc, _ := roundTrip(t, in)
			var purls []string
			for _, p := range doc.Packages {
				if p.PrimaryPackagePurpose == "APPLICATION" {
					purls = append(purls, purlOf(p))
				}
			}
			if !slices.Equal(purls, tt.purls) {
				t.Errorf("binaries' purls %q, want %q", purls, tt.purls)
			}
			if tt.comment != "" && !strings.HasSuffix(doc.DocumentComment, tt.comment) {
				t.Errorf("comment %q, want it to end %q", doc.DocumentComment, tt.comment)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Input)
		want   string
	}{
		{"no manifest", func(in *Input) { in.Manifest = nil }, "no seed manifest"},
		{"no disk", func(in *Input) { in.Manifest.Disks = nil }, "no disk"},
		{"disks disagree", func(in *Input) { in.Manifest.Disks[1].RawDigest = digest.FromString("x") }, "disagree"},
		{"not sha256", func(in *Input) {
			for i := range in.Manifest.Disks {
				in.Manifest.Disks[i].RawDigest = "md5:abc"
			}
		}, "not a sha256"},
	}
	for _, tt := range tests {
		in := testInput()
		tt.change(&in)
		if _, err := Build(in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

func TestRead(t *testing.T) {
	_, good := roundTrip(t, testInput())
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"not json", "SPDXVersion: SPDX-2.3", "not JSON"},
		{"older spdx", `{"spdxVersion":"SPDX-2.2"}`, "SPDX-2.2"},
		{"too big", string(good[:len(good)-2]) + strings.Repeat(" ", seed.MaxSBOMSize) + "}\n", "more than"},
	}
	for _, tt := range tests {
		if _, err := Read(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

func TestPURL(t *testing.T) {
	tests := []struct {
		typ, ns, name, version string
		q                      map[string]string
		want                   string
	}{
		{"deb", "debian", "curl", "7.50.3-1", map[string]string{"arch": "i386", "distro": "jessie"}, "pkg:deb/debian/curl@7.50.3-1?arch=i386&distro=jessie"},
		{"rpm", "fedora", "curl", "7.50.3-1.fc25", map[string]string{"arch": "i386", "distro": "fedora-25", "epoch": ""}, "pkg:rpm/fedora/curl@7.50.3-1.fc25?arch=i386&distro=fedora-25"},
		{"oci", "", "debian", "sha256:244fd47e07d10", map[string]string{"repository_url": "docker.io/library/debian", "tag": "latest"}, "pkg:oci/debian@sha256:244fd47e07d10?repository_url=docker.io/library/debian&tag=latest"},
		{"golang", "github.com/gorilla", "context", "234fd47e07d1004f0aed9c", nil, "pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c"},
		{"generic", "", "a/b", "", map[string]string{"k": "v w&x"}, "pkg:generic/a%2Fb?k=v%20w%26x"},
	}
	for _, tt := range tests {
		if got := purl(tt.typ, tt.ns, tt.name, tt.version, tt.q); got != tt.want {
			t.Errorf("purl = %q, want %q", got, tt.want)
		}
	}
}
