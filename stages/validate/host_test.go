package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// hostConfig is a coreos config as render writes it: an inline file, a gzip-compressed
// one, a directory, a link, a unit with a drop-in, a disabled unit and a user with a key.
const hostConfig = `{"ignition":{"version":"3.3.0"},
"storage":{"files":[{"path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}},
  {"path":"/etc/gz","contents":{"compression":"gzip","source":"data:;base64,H4sIAAAAAAAA/8pIzcnJBwQAAP//hqYQNgUAAAA="}}],
 "directories":[{"path":"/var/lib/app","mode":448}],
 "links":[{"path":"/etc/localtime","target":"/usr/share/zoneinfo/UTC"}]},
"systemd":{"units":[{"name":"app.service","enabled":true,"contents":"[Unit]\n","dropins":[{"name":"10-env.conf","contents":"x"}]},
  {"name":"off.service","enabled":false}]},
"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAkey core@x"]}]}}`

const imageDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

var received = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// goodFacts are the facts of a node where hostConfig was applied, as GatherFacts reports them.
func goodFacts() *wire.Facts {
	return &wire.Facts{
		Version: wire.FactsVersion, Time: received.Add(3 * time.Second), Root: "/mnt/disk/root",
		Boot: wire.BootFacts{Cmdline: "snofactory.root=LABEL=sfroot", RootLabel: "sfroot", MountPoint: "/mnt/disk", Source: "/dev/vda1", FSType: "ext4"},
		Files: []wire.FileFact{
			{Path: "/etc/motd", Declared: wire.KindFile, Exists: true, Kind: wire.KindFile, Mode: 0o644, SHA256: sha256Hex([]byte("hello"))},
			{Path: "/etc/gz", Declared: wire.KindFile, Exists: true, Kind: wire.KindFile, Mode: 0o644, SHA256: sha256Hex([]byte("hello"))},
			{Path: "/var/lib/app", Declared: wire.KindDirectory, Exists: true, Kind: wire.KindDirectory, Mode: 0o700},
			{Path: "/etc/localtime", Declared: wire.KindLink, Exists: true, Kind: wire.KindLink, Mode: 0o777, Target: "/usr/share/zoneinfo/UTC"},
		},
		Units: []wire.UnitFact{
			{Name: "app.service", Present: true, SHA256: sha256Hex([]byte("[Unit]\n")), Enabled: true, EnabledBy: "preset",
				Dropins: []wire.DropinFact{{Name: "10-env.conf", Present: true, SHA256: sha256Hex([]byte("x"))}}},
			{Name: "off.service", Disabled: true},
		},
		Users: []wire.UserFact{{Name: "core", Present: true, UID: 1000, AuthorizedKeys: []string{wire.SSHKeyHash("ssh-ed25519 AAAAkey")}}},
		Images: &wire.ImageFacts{GraphRoot: "/var/lib/containers/storage", Driver: "overlay", Images: []wire.ImageFact{
			{ID: "abc", Names: []string{"quay.io/example/app@" + imageDigest}, Digest: imageDigest},
		}},
		Leftovers: agent.BootstrapLeftovers(),
		Disk:      wire.DiskFacts{Device: "/dev/vda1", Disk: "/dev/vda", DiskBytes: 8 << 30, TotalBytes: 8 << 30, FreeBytes: 6 << 30},
	}
}

func hostInputs() Inputs {
	return Inputs{Facts: goodFacts(), ReceivedAt: received, Ignition: []byte(hostConfig),
		Images: []handoff.Image{{Name: "app", Ref: "quay.io/example/app@" + imageDigest, Digest: imageDigest}}}
}

func TestHostChecks(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Inputs)
		failing map[string]string // id -> piece of its message; every other host check passes
	}{
		{name: "healthy", mutate: func(*Inputs) {}},
		{name: "image missing", mutate: func(in *Inputs) {
			in.Images = append(in.Images, handoff.Image{Name: "extra", Ref: "quay.io/x/extra:1", Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"})
		}, failing: map[string]string{CheckImagesPresent: "quay.io/x/extra@sha256:2222222222222222222222222222222222222222222222222222222222222222 missing from container storage"}},
		{name: "image at another digest", mutate: func(in *Inputs) {
			in.Images[0].Digest = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
		}, failing: map[string]string{CheckImagesPresent: "(it holds quay.io/example/app with " + imageDigest + ")"}},
		{name: "live boot", mutate: func(in *Inputs) {
			in.Facts.Boot.Live, in.Facts.Boot.LiveReason = true, "/sysroot is on / (rootfs), a live filesystem"
		}, failing: map[string]string{CheckBootFromDisk: "booted from the live system: /sysroot is on / (rootfs)"}},
		{name: "leftovers", mutate: func(in *Inputs) { in.Facts.Leftovers[0].Exists = true },
			failing: map[string]string{CheckBootstrapCleaned: "/etc/kubernetes/bootstrap-secrets left on the installed root"}},
		{name: "little free space", mutate: func(in *Inputs) { in.Facts.Disk.FreeBytes = 100 << 20 },
			failing: map[string]string{CheckDiskFreeSpace: "100MiB free on the root filesystem, need 1GiB"}},
		{name: "clock skew", mutate: func(in *Inputs) { in.Facts.Time = received.Add(-time.Hour) },
			failing: map[string]string{CheckTimeSync: "guest clock is -1h0m0s off the host's"}},
		{name: "file mode and content", mutate: func(in *Inputs) {
			in.Facts.Files[0].Mode, in.Facts.Files[1].SHA256 = 0o600, sha256Hex([]byte("other"))
		}, failing: map[string]string{CheckIgnitionFiles: "/etc/motd has mode 0600, want 0644 (and 1 more)"}},
		{name: "file missing", mutate: func(in *Inputs) { in.Facts.Files[2].Exists = false },
			failing: map[string]string{CheckIgnitionFiles: "directory /var/lib/app missing"}},
		{name: "unit not enabled", mutate: func(in *Inputs) { in.Facts.Units[0].Enabled = false },
			failing: map[string]string{CheckIgnitionUnits: "unit app.service is not enabled"}},
		{name: "disabled unit enabled", mutate: func(in *Inputs) { in.Facts.Units[1].Enabled, in.Facts.Units[1].EnabledBy = true, "link x" },
			failing: map[string]string{CheckIgnitionUnits: "unit off.service is enabled (link x), want disabled"}},
		{name: "ssh key missing", mutate: func(in *Inputs) { in.Facts.Users[0].AuthorizedKeys = nil },
			failing: map[string]string{CheckIgnitionUsers: "user core lacks SSH key ssh-ed25519 AAAAkey core@x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hostInputs()
			tt.mutate(&in)
			rep, err := Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				if r.Scope != ScopeHost || r.ID == CheckClusterDNS { // an OpenShift node's; TestClusterDNS has it
					if r.Status != StatusSkip || !strings.Contains(r.Message, "not OpenShift") {
						t.Errorf("%s: %s %q, want skipped as not OpenShift", r.ID, r.Status, r.Message)
					}
					continue
				}
				if want, ok := tt.failing[r.ID]; ok {
					if r.Status != StatusFail || !strings.Contains(r.Message, want) {
						t.Errorf("%s: %s %q, want fail with %q", r.ID, r.Status, r.Message, want)
					}
					continue
				}
				if r.Status != StatusPass {
					t.Errorf("%s: %s %q %v, want pass", r.ID, r.Status, r.Message, r.Evidence)
				}
			}
			if rep.Failed() != (len(tt.failing) > 0) {
				t.Errorf("Failed() = %v: %v", rep.Failed(), rep.FailureLines())
			}
			for id, want := range tt.failing {
				line := "FAIL " + id + ": "
				if lines := strings.Join(rep.FailureLines(), "\n"); !strings.Contains(lines, line) || !strings.Contains(lines, want) {
					t.Errorf("failure lines %q lack %q ... %q", lines, line, want)
				}
			}
		})
	}
}

// Without facts the host checks are skipped with the reason, without a config the
// Ignition checks are; a failed warning does not fail the gate.
func TestHostChecksNotApplicable(t *testing.T) {
	rep, err := Evaluate(context.Background(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Status != StatusSkip {
			t.Errorf("%s: %s without facts or cluster", r.ID, r.Status)
		}
	}
	in := hostInputs()
	in.Ignition = nil
	in.Facts.Truncated = map[string]int{"files": 900}
	rep, err = Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		switch {
		case strings.HasPrefix(r.ID, "host.ignition."):
			if r.Status != StatusSkip || !strings.Contains(r.Message, "no Ignition config") {
				t.Errorf("%s: %s %q", r.ID, r.Status, r.Message)
			}
		case r.ID == CheckFactsComplete:
			if r.Status != StatusFail || r.Severity != SeverityWarning || !strings.Contains(r.Message, "files cut") {
				t.Errorf("%s: %s %s %q", r.ID, r.Severity, r.Status, r.Message)
			}
		}
	}
	if rep.Failed() || rep.Summary.Warnings != 1 {
		t.Errorf("a warning failed the gate or was not counted: %+v %v", rep.Summary, rep.FailureLines())
	}
}

// TestWriteReports reads the JUnit file back with encoding/xml in the usual schema's shape
// (testsuites > testsuite > testcase with skipped/failure/error children) and the JSON
// report as a Report.
func TestWriteReports(t *testing.T) {
	in := hostInputs()
	in.Images[0].Digest = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	in.Skip = map[string]string{CheckTimeSync: "no NTP in the lab"}
	in.Facts.Truncated = map[string]int{"units": 3}
	rep, err := Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jp, xp, err := WriteReports(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if jp != filepath.Join(dir, ReportJSON) || xp != filepath.Join(dir, ReportJUnit) {
		t.Errorf("paths %s %s", jp, xp)
	}
	var back Report
	b, _ := os.ReadFile(jp)
	if err := json.Unmarshal(b, &back); err != nil || len(back.Results) != len(KnownChecks()) || back.Summary != rep.Summary {
		t.Errorf("JSON report: %v, %d results, summary %+v want %+v", err, len(back.Results), back.Summary, rep.Summary)
	}

	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Skipped  int      `xml:"skipped,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Skipped   *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error     *struct{} `xml:"error"`
				SystemOut string    `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	x, _ := os.ReadFile(xp)
	if !bytes.HasPrefix(x, []byte(xml.Header)) {
		t.Error("JUnit file lacks the XML header")
	}
	if err := xml.Unmarshal(x, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || doc.Tests != len(KnownChecks()) || len(doc.Suites[0].Cases) != len(KnownChecks()) {
		t.Fatalf("JUnit lists %d tests in %d suites, want every check", doc.Tests, len(doc.Suites))
	}
	seen := map[string]bool{}
	for _, c := range doc.Suites[0].Cases {
		seen[c.Name] = true
		switch c.Name {
		case CheckTimeSync:
			if c.Skipped == nil || c.Skipped.Message != "skipped by the blueprint: no NTP in the lab" {
				t.Errorf("%s: skipped = %+v", c.Name, c.Skipped)
			}
		case CheckImagesPresent:
			if c.Failure == nil || !strings.Contains(c.Failure.Message, "missing from container storage") || !strings.Contains(c.Failure.Text, "sha256:3333") {
				t.Errorf("%s: failure = %+v", c.Name, c.Failure)
			}
		case CheckFactsComplete:
			if c.Failure != nil || !strings.Contains(c.SystemOut, "WARN "+CheckFactsComplete) {
				t.Errorf("%s: a warning must not be a JUnit failure: %+v %q", c.Name, c.Failure, c.SystemOut)
			}
		}
	}
	for _, c := range KnownChecks() {
		if !seen[c.ID] {
			t.Errorf("JUnit lacks %s", c.ID)
		}
	}
	if doc.Failures != 1 || doc.Skipped != rep.Summary.Skipped {
		t.Errorf("JUnit counts failures %d skipped %d, report %+v", doc.Failures, doc.Skipped, rep.Summary)
	}
	if err := rep.Err(); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "FAIL "+CheckImagesPresent+": quay.io/example/app@sha256:3333") {
		t.Errorf("Err() = %v", err)
	}
}

// The blueprint validates skip ids against its own copy of the check ids.
func TestKnownChecksMatchBlueprint(t *testing.T) {
	var ids []string
	for _, c := range KnownChecks() {
		ids = append(ids, c.ID)
	}
	if got, want := v1alpha1.KnownCheckIDs(), ids; !slices.Equal(got, want) {
		t.Errorf("blueprints/v1alpha1.KnownCheckIDs() = %v\nstages/validate.KnownChecks() ids = %v", got, want)
	}
	for _, c := range KnownChecks() {
		if !regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`).MatchString(c.ID) || c.Description == "" || (c.Severity != SeverityError && c.Severity != SeverityWarning) {
			t.Errorf("bad check %+v", c)
		}
	}
}

func TestSkips(t *testing.T) {
	in := hostInputs()
	in.Images = append(in.Images, handoff.Image{Ref: "quay.io/x/y:1", Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"})
	in.Skip = map[string]string{CheckImagesPresent: "lab seed: images are pulled at the site", CheckTimeSync: ""}
	rep, err := Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.ID] = r
	}
	if r := got[CheckImagesPresent]; r.Status != StatusSkip || r.Message != "skipped by the blueprint: lab seed: images are pulled at the site" {
		t.Errorf("images: %s %q", r.Status, r.Message)
	}
	if r := got[CheckTimeSync]; r.Status != StatusSkip || !strings.Contains(r.Message, "no reason given") {
		t.Errorf("time: %s %q", r.Status, r.Message)
	}
	if rep.Failed() {
		t.Errorf("skipped failure failed the gate: %v", rep.FailureLines())
	}

	in.Skip = map[string]string{"host.image.present": "typo"}
	_, err = Evaluate(context.Background(), in)
	var unknown *UnknownSkipError
	if !errors.As(err, &unknown) || unknown.Suggestion != CheckImagesPresent {
		t.Errorf("err = %v, want an unknown skip suggesting %s", err, CheckImagesPresent)
	}
}
