package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

type bytesBuffer = bytes.Buffer

// writeFile writes data below dir at the slash-separated rel with perm, creating parents.
func writeFile(dir, rel string, data []byte, perm os.FileMode) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		return err
	}
	// WriteFile keeps the mode of a file that already exists and applies the umask.
	return os.Chmod(p, perm)
}

// jsonToYAMLValue decodes JSON into plain values for a YAML encoder, keeping integers as
// integers (Ignition has no fractional numbers, and float64 would print 1e+06).
func jsonToYAMLValue(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbersToInts(v)
}

func numbersToInts(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			n, err := numbersToInts(e)
			if err != nil {
				return nil, err
			}
			t[k] = n
		}
	case []any:
		for i, e := range t {
			n, err := numbersToInts(e)
			if err != nil {
				return nil, err
			}
			t[i] = n
		}
	case json.Number:
		i, err := t.Int64()
		if err != nil {
			return nil, fmt.Errorf("non-integer number %s", t)
		}
		return i, nil
	}
	return v, nil
}

// stableJSON encodes v indented with a final newline (map keys sorted by encoding/json).
func stableJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// firstLine returns s up to its first newline, trimmed.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

func netipPrefix(s string) (netip.Prefix, error) { return netip.ParsePrefix(s) }
