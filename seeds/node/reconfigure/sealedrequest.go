package reconfigure

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// FromSealedRequest fills what o leaves unset from the request the seed under o.Root was
// sealed with: its target, its name and, unless timeoutSet, how long to wait for the
// medium. Without a sealed seed, o must name its target.
func (o *Options) FromSealedRequest(timeoutSet bool) error {
	b, err := os.ReadFile(filepath.Join(o.Root, wire.SealedFile))
	if err != nil {
		if o.Target != "" {
			return nil
		}
		return fmt.Errorf("no --target and no sealed seed under %s: %w", o.Root, err)
	}
	var req wire.SealRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return fmt.Errorf("reading %s: %w", wire.SealedFile, err)
	}
	if o.Target == "" {
		o.Target = req.Target
	}
	if o.SeedName == "" {
		o.SeedName = req.Seed
	}
	if o.Fit == nil {
		o.Fit = req.Fit
	}
	if !timeoutSet && req.SiteConfigTimeout != "" {
		d, err := time.ParseDuration(req.SiteConfigTimeout)
		if err != nil {
			return fmt.Errorf("%s: siteConfigTimeout: %w", wire.SealedFile, err)
		}
		o.MediumTimeout = d
	}
	return nil
}
