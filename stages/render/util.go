package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
)

type bytesBuffer = bytes.Buffer

// writeFile writes data below dir at the slash-separated rel with exactly perm, creating
// parents. The file is replaced, never written through: a config holding the pull secret
// must not reach another link to an earlier file or sit half-written under the old mode.
func writeFile(dir, rel string, data []byte, perm os.FileMode) error {
	return pipeline.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(rel)), data, perm)
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
