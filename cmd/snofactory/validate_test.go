package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/blueprints"
)

// validateCLI runs the real command line (run in main.go) and returns its exit code and output.
func validateCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateExamples(t *testing.T) {
	files, _ := filepath.Glob("../../blueprints/*.yaml")
	if len(files) < 2 {
		t.Fatalf("example blueprints not found: %v", files)
	}
	code, stdout, stderr := validateCLI(append([]string{"validate"}, files...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, f := range files {
		if !strings.Contains(stdout, f+": ok\n") {
			t.Errorf("no ok line for %s in:\n%s", f, stdout)
		}
	}
}

// TestValidateBadCorpus: every malformed blueprint exits 2 and is reported as
// FILE:LINE:COL: at the position its .want file gives, without a panic.
func TestValidateBadCorpus(t *testing.T) {
	files, _ := filepath.Glob("../../blueprints/testdata/bad/*.yaml")
	if len(files) < 25 {
		t.Fatalf("only %d malformed blueprints", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			pos, path, _ := strings.Cut(strings.TrimSpace(string(want)), " ")
			code, stdout, stderr := validateCLI("validate", f)
			if code != exitBadInput {
				t.Fatalf("exit %d, want %d\n%s", code, exitBadInput, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout for a bad file: %q", stdout)
			}
			first, _, _ := strings.Cut(stderr, "\n")
			if !strings.HasPrefix(first, f+":"+pos+": "+path) {
				t.Errorf("first line %q, want prefix %q", first, f+":"+pos+": "+path)
			}
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "SUPERSECRET") {
				t.Errorf("bad output:\n%s", stderr)
			}
		})
	}
}

func TestValidateMixed(t *testing.T) {
	good := "../../blueprints/demo.yaml"
	bad1 := "../../blueprints/testdata/bad/unknown-key-typo.yaml"
	bad2 := "../../blueprints/testdata/bad/pull-secret-not-json.yaml"
	code, stdout, stderr := validateCLI("validate", bad1, good, bad2)
	if code != exitBadInput {
		t.Fatalf("exit %d", code)
	}
	if stdout != good+": ok\n" {
		t.Errorf("stdout = %q", stdout)
	}
	for _, want := range []string{bad1 + ":7:5: spec.target.tpye", bad2 + ":11:21: spec.openshift.pullSecretFile", "2 of 3 blueprints invalid"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("missing %q in:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "SUPERSECRET") {
		t.Errorf("pull secret printed:\n%s", stderr)
	}
}

func TestValidateJSON(t *testing.T) {
	code, stdout, _ := validateCLI("validate", "--format", "json", "../../blueprints/demo.yaml", "../../blueprints/testdata/bad/firmware-enum.yaml")
	if code != exitBadInput {
		t.Fatalf("exit %d", code)
	}
	var reports []blueprints.FileReport
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(reports) != 2 || !reports[0].OK || reports[1].OK || len(reports[1].Problems) != 1 {
		t.Fatalf("reports = %+v", reports)
	}
	if p := reports[1].Problems[0]; p.Line != 11 || p.Col != 15 || p.Path != "spec.vm.firmware" || p.Hint == "" {
		t.Errorf("problem = %+v", p)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"validate"},
		{"validate", "--format", "xml", "../../blueprints/demo.yaml"},
		{"validate", "--no-such-flag", "x.yaml"},
		{"validate", "does-not-exist.yaml"},
		{"schema", "extra"},
	} {
		if code, _, stderr := validateCLI(args...); code != exitBadInput {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitBadInput, stderr)
		}
	}
}

func TestSchemaCommand(t *testing.T) {
	code, stdout, stderr := validateCLI("schema")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if stdout != string(blueprints.Schema()) {
		t.Error("schema output differs from blueprints.Schema()")
	}
	committed, err := os.ReadFile("../../blueprints/schema.json")
	if err != nil || stdout != string(committed) {
		t.Errorf("schema output differs from blueprints/schema.json (%v)", err)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
}
