package coreiso

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Caps on the files an ISO is customized with (docs/inputs.md).
const (
	// MaxIgnitionFile bounds an Ignition config: the ISO's embed area is a few MiB.
	MaxIgnitionFile = 16 << 20
	// MaxKeyfile bounds a NetworkManager keyfile: a few hundred bytes.
	MaxKeyfile = 1 << 20
)

// ReadIgnition reads the Ignition config to embed from path, or from stdin when path is
// "-", until ctx ends: stdin may be a terminal or a pipe that never ends.
func ReadIgnition(ctx context.Context, path string, stdin io.Reader) ([]byte, error) {
	var (
		cfg []byte
		err error
	)
	if path == "-" {
		if cfg, err = io.ReadAll(io.LimitReader(ctxio.Abandoning(ctx, stdin), MaxIgnitionFile+1)); err == nil && len(cfg) > MaxIgnitionFile {
			err = fmt.Errorf("stdin: larger than %d bytes", MaxIgnitionFile)
		}
	} else {
		cfg, err = smallfile.Read(path, MaxIgnitionFile)
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
		data, err := smallfile.Read(p, MaxKeyfile)
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
