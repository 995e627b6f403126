package seed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ReadManifest reads and validates the manifest of the seed directory dir. Unknown fields
// and schema versions are refused: a reader must not silently drop what a newer writer said.
func ReadManifest(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	f, err := openStored(dir, ManifestFile, -maxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("reading the seed manifest: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestSize))
	if err != nil {
		return nil, fmt.Errorf("reading the seed manifest: %w", err)
	}
	return ParseManifest(b, p)
}

// ParseManifest decodes and validates a manifest's JSON; name says where it came from in errors.
func ParseManifest(b []byte, name string) (*Manifest, error) {
	var version struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if len(b) > maxManifestSize {
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("is %d bytes, more than a seed manifest's %d", len(b), maxManifestSize)}
	}
	if err := json.Unmarshal(b, &version); err != nil {
		return nil, jsonProblem(b, name, err)
	}
	if version.SchemaVersion != SchemaVersion && version.SchemaVersion != SchemaVersionV1 {
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("schemaVersion %d is not supported (this snofactory reads %d and %d)", version.SchemaVersion, SchemaVersionV1, SchemaVersion)}
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, jsonProblem(b, name, err)
	}
	if err := m.Validate(); err != nil {
		return nil, &BadSeedError{File: name, Problem: "invalid seed manifest:\n" + err.Error()}
	}
	return &m, nil
}

// jsonProblem locates a JSON decoding error in b as FILE:LINE:COL, without quoting b.
func jsonProblem(b []byte, name string, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending character
	case errors.As(err, &te):
		off = valueStart(b, te.Offset) // te.Offset is just past the value
	}
	if off < 0 || off > int64(len(b)) {
		return &BadSeedError{File: name, Problem: "is not a seed manifest: " + err.Error()}
	}
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	return &BadSeedError{File: fmt.Sprintf("%s:%d:%d", name, line, col), Problem: err.Error()}
}

// valueStart finds where the scalar JSON value ending at end begins.
func valueStart(b []byte, end int64) int64 {
	if end <= 0 || end > int64(len(b)) {
		return end
	}
	i := end - 1
	if b[i] == '"' {
		for i--; i > 0 && (b[i] != '"' || b[i-1] == '\\'); i-- {
		}
		return i
	}
	for i > 0 && !strings.ContainsRune(",:[{ \t\r\n", rune(b[i-1])) {
		i--
	}
	return i
}

// Marshal returns m's JSON as WriteManifest stores it: indented, keys in a fixed order, the
// creation time in UTC, a trailing newline. Equal manifests give equal bytes.
func (m *Manifest) Marshal() ([]byte, error) {
	c := *m
	c.Created = c.Created.UTC()
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the seed manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteManifest validates m and writes it as dir's manifest. It writes a temporary file in
// dir and renames it, so a reader never sees half a manifest.
func WriteManifest(dir string, m *Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("invalid seed manifest:\n%w", err)
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ManifestFile), b)
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // a no-op after the rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
