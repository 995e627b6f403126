package reconfigure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// progressFile, in the state directory, lists the steps done for one site config.
const progressFile = "progress.json"

// progressVersion is the progress file's format.
const progressVersion = 1

// progress is what a reconfiguration has done so far.
type progress struct {
	Version int `json:"version"`
	// SiteDigest is the sha256 of the site config the steps were done for.
	SiteDigest string   `json:"siteDigest"`
	Done       []string `json:"done"`
}

func (p *progress) done(step string) bool { return slices.Contains(p.Done, step) }

// loadProgress returns the progress recorded for digest; progress for another site config
// (or none, or an unreadable file) starts over. restarted says a different site config's
// progress was dropped.
func loadProgress(dir, digest string) (p *progress, restarted bool, err error) {
	fresh := &progress{Version: progressVersion, SiteDigest: digest}
	b, err := os.ReadFile(filepath.Join(dir, progressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the reconfiguration progress: %w", err)
	}
	var old progress
	if json.Unmarshal(b, &old) != nil || old.Version != progressVersion {
		return fresh, true, nil // written by rename, so only a foreign file gets here: redo
	}
	if old.SiteDigest != digest {
		return fresh, true, nil
	}
	return &old, false, nil
}

func (p *progress) save(dir string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the reconfiguration progress: %w", err)
	}
	return writeFile(filepath.Join(dir, progressFile), append(b, '\n'), 0o644)
}
