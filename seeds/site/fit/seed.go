package fit

import (
	"context"
	"fmt"
	"io"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// CheckSeed reads the manifest of the seed s, and nothing else (no disk is fetched), and
// checks sc against its record. A misfit is the user's input: every problem is in the
// error, which badinput marks.
func CheckSeed(ctx context.Context, s *seedref.Seed, sc *siteconfig.SiteConfig) error {
	m, _, err := s.Describe(ctx)
	if err != nil {
		return fmt.Errorf("reading the manifest of seed %s: %w", s.Ref(), err)
	}
	if err := Check(m.SiteFit, sc); err != nil {
		return badinput.Wrap(fmt.Errorf("seed %s (%s) cannot serve site %s:\n%w", m.Name, s.Ref(), sc.Metadata.Name, err))
	}
	return nil
}

// CheckRef is CheckSeed for ref, any seed argument the CLI takes (a seed directory or a
// reference), opened with opts.
func CheckRef(ctx context.Context, ref string, sc *siteconfig.SiteConfig, opts ...seedref.Option) error {
	s, err := seedref.Open(ctx, ref, opts...)
	if err != nil {
		return err
	}
	return CheckSeed(ctx, s, sc)
}

// CheckSiteFile loads the site config at path, its problems all printed on stderr as
// siteconfig.LoadReported does, and checks it against the seed s as CheckSeed does.
func CheckSiteFile(ctx context.Context, stderr io.Writer, s *seedref.Seed, path string) error {
	sc, err := siteconfig.LoadReported(stderr, path)
	if err != nil {
		return err
	}
	return CheckSeed(ctx, s, sc)
}
