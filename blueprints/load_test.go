package blueprints

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// loadWithin runs LoadFile under a deadline: hostile files must fail fast, never hang.
func loadWithin(t *testing.T, path string, limit time.Duration) (*v1alpha1.Blueprint, error) {
	t.Helper()
	type result struct {
		bp  *v1alpha1.Blueprint
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		bp, err := LoadFile(path)
		done <- result{bp, err}
	}()
	select {
	case r := <-done:
		t.Logf("%s: %v", filepath.Base(path), time.Since(start).Round(time.Millisecond))
		return r.bp, r.err
	case <-time.After(limit):
		t.Fatalf("LoadFile(%s) still running after %v", path, limit)
		return nil, nil
	}
}

func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var ve *ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationErrors, got %T: %v", err, err)
	}
	if len(ve.Problems) == 0 {
		t.Fatal("ValidationErrors without problems")
	}
	return ve.Problems
}

func TestExamplesAreValid(t *testing.T) {
	for _, name := range []string{"demo.yaml", "du-profile.yaml"} {
		t.Run(name, func(t *testing.T) {
			bp, err := loadWithin(t, name, 10*time.Second)
			if err != nil {
				t.Fatalf("%s is invalid:\n%v", name, err)
			}
			wantDir, _ := filepath.Abs(".")
			if bp.Dir() != wantDir {
				t.Errorf("Dir() = %s, want %s", bp.Dir(), wantDir)
			}
		})
	}
}

func TestDemoBlueprint(t *testing.T) {
	bp, err := LoadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := bp.Spec
	repo, _ := filepath.Abs("..")
	checks := []struct {
		name      string
		got, want any
	}{
		{"target", s.Target.Type, oskind.CoreOS},
		{"ignition version", s.Target.IgnitionVersion, "3.3.0"},
		{"iso", bp.Resolved.ISO, filepath.Join(repo, "build/conformance/conformance.iso")},
		{"generatedBy", s.Source.GeneratedBy, "make conformance-iso"},
		{"butane count", len(s.Butane), 2},
		{"butane file", bp.Resolved.Butane[0], filepath.Join(repo, "blueprints/demo/motd.bu")},
		{"butane inline resolved", bp.Resolved.Butane[1], ""},
		{"extra images", len(s.ExtraImages), 1},
		{"cpus", s.VM.CPUs, 1},
		{"memory", s.VM.Memory, 512 * v1alpha1.MiB},
		{"disk", s.VM.DiskSize, 2 * v1alpha1.GiB},
		{"accelerator", s.VM.Accelerator, "auto"},
		{"formats", strings.Join(s.Outputs.Formats, ","), "chunked"},
		{"kubelet validity", s.Relocation.KubeletCertValidity.D(), 24 * time.Hour},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestDUProfileBlueprint(t *testing.T) {
	bp, err := LoadFile("du-profile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := bp.Spec.OpenShift
	if o == nil || o.ReleaseImage != "quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64" {
		t.Fatalf("openshift = %+v", o)
	}
	var names []string
	for _, op := range o.Operators {
		names = append(names, op.Name)
	}
	if got := strings.Join(names, ","); got != "ptp-operator,sriov-network-operator,lvms-operator" {
		t.Errorf("operators = %s", got)
	}
	for _, p := range []string{bp.Resolved.PullSecretFile, bp.Resolved.SSHPublicKeyFile, bp.Resolved.ExtraManifests} {
		if !filepath.IsAbs(p) {
			t.Errorf("resolved path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	rt, err := os.ReadFile(filepath.Join(bp.Resolved.ExtraManifests, "05-realtime-kernel.yaml"))
	if err != nil || !strings.Contains(string(rt), "kernelType: realtime") || !strings.Contains(string(rt), "kind: MachineConfig") {
		t.Errorf("realtime kernel MachineConfig missing or wrong: %v", err)
	}
	if *o.ControlPlane.Replicas != 1 || o.Compute.Replicas != 0 || !o.WorkerIgnition {
		t.Errorf("topology = %d/%d worker=%v", *o.ControlPlane.Replicas, o.Compute.Replicas, o.WorkerIgnition)
	}
	if bp.Resolved.OCILayout == "" || !filepath.IsAbs(bp.Resolved.OCILayout) {
		t.Errorf("oci layout not resolved: %q", bp.Resolved.OCILayout)
	}
}

// TestBadCorpus loads every malformed blueprint in testdata/bad: each must fail with a
// *ValidationErrors whose first problem sits where NAME.want says (LINE:COL PATH), and
// whose text is FILE:LINE:COL: lines.
func TestBadCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 25 {
		t.Fatalf("only %d malformed blueprints in the corpus", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			pos, path, _ := strings.Cut(strings.TrimSpace(string(want)), " ")
			lineS, colS, _ := strings.Cut(pos, ":")
			line, _ := strconv.Atoi(lineS)
			col, _ := strconv.Atoi(colS)

			bp, err := loadWithin(t, f, 5*time.Second)
			if err == nil {
				t.Fatalf("loaded without error: %+v", bp)
			}
			ps := problems(t, err)
			first := ps[0]
			if first.Line != line || first.Col != col || !strings.Contains(first.Path, path) {
				t.Errorf("first problem at %d:%d %s, want %d:%d %s\n%v", first.Line, first.Col, first.Path, line, col, path, err)
			}
			for _, p := range ps {
				if strings.HasPrefix(p.Message, internalErrorPrefix) {
					t.Errorf("loader bug: %v", p)
				}
			}
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, f+":") {
					t.Errorf("line does not start with the file name: %q", l)
				}
			}
			if !strings.HasPrefix(err.Error(), f+":"+pos+": ") {
				t.Errorf("message does not start with %s:%s: %q", f, pos, err.Error())
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "nope.yaml"))
	ps := problems(t, err)
	if !strings.Contains(ps[0].Message, "no such file") {
		t.Errorf("got %v", err)
	}
	_, err = LoadFile(t.TempDir())
	if ps := problems(t, err); !strings.Contains(ps[0].Message, "not a regular file") {
		t.Errorf("got %v", err)
	}
}

func TestCheckISO(t *testing.T) {
	dir := fixtureDir(t)
	bp, err := parseIn(t, dir, strings.Replace(coreos("    generatedBy: make conformance-iso\n"), "path: live.iso", "path: build/out.iso", 1))
	if err != nil {
		t.Fatal(err)
	}
	err = bp.CheckISO()
	if err == nil || !strings.Contains(err.Error(), "make conformance-iso") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CheckISO = %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "build/out.iso"), []byte("iso"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bp.CheckISO(); err != nil {
		t.Errorf("CheckISO after the build: %v", err)
	}
}
