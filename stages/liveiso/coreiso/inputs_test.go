package coreiso

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadIgnition(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.ign")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want, wantErr string
	}{
		{"a file", file, `{"from":"file"}`, ""},
		{"stdin", "-", `{"from":"stdin"}`, ""},
		{"missing", filepath.Join(dir, "none.ign"), "", "reading the Ignition config: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadIgnition(t.Context(), tc.path, strings.NewReader(`{"from":"stdin"}`))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestReadKeyfiles(t *testing.T) {
	dir := t.TempDir()
	eth := filepath.Join(dir, "eth0.nmconnection")
	if err := os.WriteFile(eth, []byte("[connection]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		paths   []string
		want    map[string][]byte
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"by base name", []string{eth}, map[string][]byte{"eth0.nmconnection": []byte("[connection]\n")}, ""},
		{"missing", []string{eth, filepath.Join(dir, "none")}, nil, "reading network keyfile: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadKeyfiles(tc.paths)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
