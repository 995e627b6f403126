package render

import (
	"fmt"
	"path"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// siteKeysConcern is the concern of the MachineConfig that carries the site keys.
const siteKeysConcern = "site-keys"

// siteKeyFiles reads opts.SiteKeys and returns the files that put them on the node, each
// at siteconfig.NodeKeysDir/FINGERPRINT.pub (so the hook's reading of them does not depend
// on the names they had here), and their fingerprints. Each key is checked as the hook
// loads it.
func siteKeyFiles(opts Options) ([]butaneFile, []string, error) {
	var files []butaneFile
	var fps []string
	seen := map[string]string{}
	for _, label := range opts.SiteKeys {
		k, err := trust.LoadPublicKey(opts.HostFiles[label])
		if err != nil {
			return nil, nil, fmt.Errorf("site-config key %s: %w", label, err)
		}
		if other, dup := seen[k.Fingerprint]; dup {
			return nil, nil, fmt.Errorf("site-config keys %s and %s are the same key", other, label)
		}
		seen[k.Fingerprint] = label
		pem, err := k.PEM()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, butaneFile{Path: path.Join(siteconfig.NodeKeysDir, k.Fingerprint+".pub"), Mode: 0o644, Overwrite: true,
			Contents: butaneContents{Inline: string(pem)}})
		fps = append(fps, k.Fingerprint)
	}
	return files, fps, nil
}

// siteKeysManifest is, on an OpenShift node, the MachineConfig that puts the site keys in
// place; none without keys.
func siteKeysManifest(opts Options, variant string, rep *Report) ([]extraManifest, error) {
	files, fps, err := siteKeyFiles(opts)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	mc := masterMC(variant, "90-master-snofactory-site-keys")
	mc.Storage = &butaneStorage{Files: files}
	doc, err := translateOwn(mc.Metadata.Name, mc, false)
	if err != nil {
		return nil, err
	}
	m, err := machineConfigManifest(mc.Metadata.Name, siteKeysConcern, doc)
	if err != nil {
		return nil, err
	}
	rep.SiteKeys = fps
	return []extraManifest{m}, nil
}
