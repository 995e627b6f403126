package strictyaml_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// fuzzDoc has every shape the decoder walks: nested and pointer structs, lists of structs,
// maps, bounded integers, booleans.
type fuzzDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Name   string            `yaml:"name"`
		CPUs   int               `yaml:"cpus,omitempty" jsonschema:"minimum=1,maximum=64"`
		On     *bool             `yaml:"on,omitempty"`
		Labels map[string]string `yaml:"labels,omitempty"`
		Items  []struct {
			Path string `yaml:"path"`
			Mode *int   `yaml:"mode,omitempty"`
			Sub  *sub   `yaml:"sub,omitempty"`
		} `yaml:"items,omitempty"`
	} `yaml:"spec"`
}

// FuzzDecode feeds arbitrary bytes to the strict YAML layer every loader sits on (the
// blueprint, the site config): parse, bound, decode, locate. It is the fuzzed entry point of
// `make fuzz` for hostile YAML because its test binary links about 130 packages, which a
// fuzz build all instruments, where the blueprint loader's FuzzLoad links over 1000 (its
// seed corpus still runs in go test).
// Seeded with the blueprint examples and the malformed-blueprint corpus. It must never
// panic, and every problem must name the file, say something and point inside it.
func FuzzDecode(f *testing.F) {
	root := filepath.Join("..", "..", "..", "blueprints")
	seeds, _ := filepath.Glob(filepath.Join(root, "*.yaml"))
	bad, _ := filepath.Glob(filepath.Join(root, "testdata", "bad", "*.yaml"))
	if len(seeds) == 0 || len(bad) == 0 {
		f.Fatalf("no seed corpus under %s: the blueprint examples moved", root)
	}
	for _, p := range append(seeds, bad...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: " + version + "\nkind: T\nspec:\n  name: a\n  cpus: 0\n  labels: {a: b, a: c}\n  items: [{path: x, mode: 420, sub: {value: v}}]\n"))
	f.Add([]byte("apiVersion: " + version + "\nspec: &a\n  items: [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The blueprints' apiVersion is accepted so their corpus gets past it into the decoder.
		d := strictyaml.NewDecoder("fuzz.yaml", "thing", []string{"snofactory.io/v1alpha1", "example.io/v0", version}, reflect.TypeOf(fuzzDoc{}))
		if root, ok := d.Parse(data); ok {
			var v fuzzDoc
			d.Decode(root, &v)
		}
		checkProblems(t, d, data)
	})
}

// checkProblems holds what every report must be: bounded, each problem naming the file with
// a message and a position inside the data, and Err agreeing with Problems.
func checkProblems(t *testing.T, d *strictyaml.Decoder, data []byte) {
	problems := d.Problems()
	if len(problems) > strictyaml.MaxProblems+1 {
		t.Fatalf("%d problems, more than the bound %d", len(problems), strictyaml.MaxProblems+1)
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	for _, p := range problems {
		if p.File != "fuzz.yaml" || p.Message == "" {
			t.Fatalf("incomplete problem: %#v", p)
		}
		if p.Line < 0 || p.Col < 0 || p.Line > lines {
			t.Fatalf("problem outside the %d-line input: %#v", lines, p)
		}
	}
	err := d.Err()
	var ve *strictyaml.ValidationErrors
	switch {
	case len(problems) == 0 && err != nil:
		t.Fatalf("no problems but an error: %v", err)
	case len(problems) > 0 && !errors.As(err, &ve):
		t.Fatalf("problems but the error is %T: %v", err, err)
	}
}
