package reconfigure

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// maxSiteKeys bounds the keys read from the node: a blueprint names at most 32.
const maxSiteKeys = 64

// loadSiteKeys reads the public keys (*.pub) a medium must be signed by. No directory, or
// no key in it, is none: the seed accepts unsigned media. A key that does not load fails
// the whole: a seed that asked for signed media never falls back to unsigned ones.
func loadSiteKeys(dir string) ([]trust.PublicKey, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the site keys: %w", err)
	}
	var keys []trust.PublicKey
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pub") {
			continue
		}
		if len(keys) == maxSiteKeys {
			return nil, fmt.Errorf("more than %d site keys in %s", maxSiteKeys, dir)
		}
		k, err := trust.LoadPublicKey(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("site key %s: %w", e.Name(), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// unseal opens the secrets sc carries sealed with the node's identity (never logged, never
// quoted); a site config without sealed secrets needs none.
func unseal(sc *siteconfig.SiteConfig, identityFile string) error {
	if sc.Spec.SealedSecrets == "" {
		return nil
	}
	ids, err := loadIdentity(identityFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("its secrets are sealed, and this seed has no identity to open them (%s): %s", identityFile, siteconfig.IdentityHint)
	}
	if err != nil {
		return fmt.Errorf("its secrets are sealed, and this seed's identity %s does not load: %w", identityFile, err)
	}
	if err := sc.DecryptSecrets(ids...); err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return fmt.Errorf("its secrets are sealed to another recipient than this seed's identity: %s", siteconfig.IdentityHint)
		}
		return err
	}
	return nil
}

func loadIdentity(path string) ([]age.Identity, error) {
	b, err := smallfile.Read(path, 64<<10)
	if err != nil {
		return nil, err
	}
	return siteconfig.ParseIdentities(b)
}

// DefaultMachineSerialFile is where Linux shows the firmware's system serial number.
const DefaultMachineSerialFile = "/sys/class/dmi/id/product_serial"

// machineSerial reads the machine's serial number: "" when the firmware reports none or it
// cannot be read, which matches no binding that names one.
func machineSerial(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, siteconfig.MaxMachineSerial+2))
	return strings.TrimSpace(string(b))
}
