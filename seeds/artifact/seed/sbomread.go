package seed

import (
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
)

// ReadSBOM reads the SBOM that m (the manifest of the seed in dir) declares, as data: a
// regular file of its declared size and digest.
func ReadSBOM(dir string, m *Manifest) ([]byte, error) {
	if m.SBOM == nil {
		return nil, fmt.Errorf("%s: the seed has no SBOM (seeds sealed before SBOMs have none)", dir)
	}
	if m.SBOM.Size > MaxSBOMSize {
		return nil, &BadSeedError{File: m.SBOM.File, Problem: fmt.Sprintf("declares %d bytes, more than the %d allowed", m.SBOM.Size, MaxSBOMSize)}
	}
	f, err := openStored(dir, m.SBOM.File, m.SBOM.Size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, m.SBOM.Size))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", m.SBOM.File, err)
	}
	if got := digest.FromBytes(b); got != m.SBOM.Digest {
		return nil, &BadSeedError{File: m.SBOM.File, Problem: fmt.Sprintf("has digest %s, the manifest says %s", got, m.SBOM.Digest)}
	}
	return b, nil
}
