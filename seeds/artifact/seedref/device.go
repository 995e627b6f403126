package seedref

import (
	"context"
	"errors"
	"fmt"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// VerifyDevice checks that device holds the seed: complete, and byte for byte its raw
// disk. A referenced seed is staged first (and its staging removed after), once the trust
// policy accepts it.
func (s *Seed) VerifyDevice(ctx context.Context, device string) (d seed.Disk, err error) {
	dir, done, err := s.Dir(ctx)
	if err != nil {
		return d, err
	}
	defer func() { err = errors.Join(err, done()) }()
	return seed.VerifyDevice(ctx, dir, device)
}

// SBOM is the seed's SPDX document: a seed directory's own file (m is its manifest), or
// the SPDX attestation attached to a referenced seed (a, as Inspect returned it), which
// with checked (keys were given) must be one a key verified.
func (s *Seed) SBOM(m *seed.Manifest, a *trust.Attached, checked bool) ([]byte, error) {
	if s.local {
		return seed.ReadSBOM(s.ref, m)
	}
	b, err := a.SBOM(checked)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.ref, err)
	}
	return b, nil
}
