package seed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline/strictjson"
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
	// Duplicate keys and trailing data first: the version must be read from the one
	// document every reader sees.
	if err := strictjson.Check(b); err != nil {
		return nil, jsonProblem(name, err)
	}
	if err := json.Unmarshal(b, &version); err != nil {
		return nil, jsonProblem(name, strictjson.Locate(b, err))
	}
	if version.SchemaVersion != SchemaVersion && version.SchemaVersion != SchemaVersionV1 {
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("schemaVersion %d is not supported (this snofactory reads %d and %d)", version.SchemaVersion, SchemaVersionV1, SchemaVersion)}
	}
	var m Manifest
	if err := strictjson.Decode(b, &m); err != nil {
		return nil, jsonProblem(name, err)
	}
	if err := m.Validate(); err != nil {
		return nil, &BadSeedError{File: name, Problem: "invalid seed manifest:\n" + err.Error()}
	}
	return &m, nil
}

// jsonProblem names where in the file a strict decoding error is, as FILE:LINE:COL,
// without quoting the file's bytes.
func jsonProblem(name string, err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) && se.Line > 0 {
		return &BadSeedError{File: fmt.Sprintf("%s:%d:%d", name, se.Line, se.Col), Problem: se.Problem}
	}
	return &BadSeedError{File: name, Problem: "is not a seed manifest: " + err.Error()}
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
