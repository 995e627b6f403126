package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestISOCommands(t *testing.T) {
	iso := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.ign")
	cfg := `{"ignition":{"version":"3.3.0"}}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.iso")

	steps := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // exact, if set
		wantStderr string // substring, if set
	}{
		{"embed to new file", []string{"iso", "embed", "-i", cfgPath, "-o", out, iso}, 0, "", "embed"},
		{"show", []string{"iso", "show", out}, 0, cfg, ""},
		{"input untouched", []string{"iso", "show", iso}, 2, "", "no Ignition config embedded"},
		{"refuse second embed", []string{"iso", "embed", "-i", cfgPath, out}, 2, "", "--force"},
		{"force second embed", []string{"iso", "embed", "-f", "-i", cfgPath, out}, 0, "", ""},
		{"kargs modify", []string{"iso", "kargs", "modify", "-a", "foo=bar", "-d", "ignition.platform.id=metal", out}, 0, "", "foo=bar"},
		{"kargs show", []string{"iso", "kargs", "show", out}, 0,
			"mitigations=auto,nosmt coreos.liveiso=fedora-coreos-38.20230718.dev.0 ignition.firstboot foo=bar\n", ""},
		{"kargs show default", []string{"iso", "kargs", "show", "--default", out}, 0,
			"mitigations=auto,nosmt coreos.liveiso=fedora-coreos-38.20230718.dev.0 ignition.firstboot ignition.platform.id=metal\n", ""},
		{"kargs reset", []string{"iso", "kargs", "reset", out}, 0, "", ""},
		{"kargs after reset", []string{"iso", "kargs", "show", out}, 0,
			"mitigations=auto,nosmt coreos.liveiso=fedora-coreos-38.20230718.dev.0 ignition.firstboot ignition.platform.id=metal\n", ""},
		{"bad replace", []string{"iso", "kargs", "modify", "-r", "nope", out}, 2, "", "KEY=OLD=NEW"},
		{"delete missing karg", []string{"iso", "kargs", "modify", "-d", "nosuch=1", out}, 2, "", `"nosuch=1"`},
		{"kargs unchanged by a refused delete", []string{"iso", "kargs", "show", out}, 0,
			"mitigations=auto,nosmt coreos.liveiso=fedora-coreos-38.20230718.dev.0 ignition.firstboot ignition.platform.id=metal\n", ""},
		{"remove", []string{"iso", "remove", out}, 0, "", ""},
		{"show after remove", []string{"iso", "show", out}, 2, "", "no Ignition config embedded"},
		{"missing ISO", []string{"iso", "show", filepath.Join(dir, "nope.iso")}, 2, "", "no such file"},
		{"not an ISO", []string{"iso", "show", cfgPath}, 2, "", "not an ISO 9660 image"},
		{"missing config", []string{"iso", "embed", "-i", filepath.Join(dir, "nope.ign"), out}, 2, "", "reading the Ignition config"},
		{"embed onto a character device", []string{"iso", "embed", "-i", cfgPath, "-o", "/dev/null", out}, 2, "", "/dev/null: is a character device"},
		{"embed into a directory", []string{"iso", "embed", "-i", cfgPath, "-o", dir, out}, 2, "", "is a directory"},
		{"kargs onto a character device", []string{"iso", "kargs", "modify", "-a", "x=1", "-o", "/dev/null", out}, 2, "", "/dev/null: is a character device"},
		{"no args", []string{"iso", "show"}, 2, "", "exactly one ISO"},
		{"unknown flag", []string{"iso", "show", "--bogus", out}, 2, "", "bogus"},
	}
	for _, s := range steps {
		code, stdout, stderr := runCLI(s.args...)
		if code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d (stderr %q)", s.name, code, s.wantCode, stderr)
		}
		if s.wantStdout != "" && stdout != s.wantStdout {
			t.Errorf("%s: stdout %q, want %q", s.name, stdout, s.wantStdout)
		}
		if s.wantStderr != "" && !strings.Contains(stderr, s.wantStderr) {
			t.Errorf("%s: stderr %q lacks %q", s.name, stderr, s.wantStderr)
		}
	}
}

func TestISONoEmbedArea(t *testing.T) {
	iso := coreisotest.Fixture(t, "synthetic.iso")
	code, _, stderr := runCLI("iso", "show", iso)
	if code != 2 || !strings.Contains(stderr, "no Ignition embed area") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
