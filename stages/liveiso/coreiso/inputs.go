package coreiso

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadIgnition reads the Ignition config to embed from path, or from stdin when path is
// "-".
func ReadIgnition(path string, stdin io.Reader) ([]byte, error) {
	var (
		cfg []byte
		err error
	)
	if path == "-" {
		cfg, err = io.ReadAll(stdin)
	} else {
		cfg, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Ignition config: %w", err)
	}
	return cfg, nil
}

// ReadKeyfiles reads NetworkManager keyfiles to embed, by their base names, as
// Customization.NetworkKeyfiles takes them; none is nil.
func ReadKeyfiles(paths []string) (map[string][]byte, error) {
	var out map[string][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading network keyfile: %w", err)
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[filepath.Base(p)] = data
	}
	return out, nil
}
