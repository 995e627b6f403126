package registries

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/smallfile"
)

// MaxRegistriesConf bounds a containers-registries.conf(5): real ones are a few KiB.
const MaxRegistriesConf = 1 << 20

// checkedCopy reads the file a user named (path; "" is none) with read, which checks it,
// and writes what it read to name in dir, the private directory of one SystemContext. The
// SystemContext names the copy: containers/image reads its path fields with os.ReadFile or
// toml.DecodeFile (pkg/sysregistriesv2/system_registries_v2.go, loadConfigFile;
// signature/policy_config.go, NewPolicyFromFile), which block on a FIFO and read
// /dev/zero until memory runs out; the copy is a regular file of checked size that cannot
// be swapped after the check.
func checkedCopy(dir, name, path string, read func(string) ([]byte, error)) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := read(path)
	if err != nil {
		return "", err
	}
	p, err := writePrivate(dir, name, b)
	if err != nil {
		return "", fmt.Errorf("copying %s: %w", path, err)
	}
	return p, nil
}

// writePrivate writes b to name in dir, the private directory of one SystemContext (made
// 0700 below the stage's scratch and removed with it), readable by this user only: what
// containers/image reads there is the checked copy of a user's file, the pull secret or
// the drop-in rendered from the blueprint, never a path a user names as an output.
func writePrivate(dir, name string, b []byte) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// readRegistriesConf reads a registries.conf through smallfile; every failure is bad input.
func readRegistriesConf(path string) ([]byte, error) {
	b, err := smallfile.Read(path, MaxRegistriesConf)
	if err != nil {
		return nil, badinput.Errorf("registries.conf: %w", err)
	}
	return b, nil
}

// checkRegistriesConf has containers/image parse the registries configuration sys names
// (the checked copy of user, and the drop-in made from the blueprint) now, so a malformed
// file is bad input before anything starts rather than a failure at the first pull.
// FindRegistry loads the files as every pull does (system_registries_v2.go, getConfig).
func checkRegistriesConf(sys *types.SystemContext, user string) error {
	if user == "" {
		return nil
	}
	if _, err := sysregistriesv2.FindRegistry(sys, "localhost"); err != nil {
		// The outer layer names the private copy; the user knows the file they gave.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return badinput.Errorf("registries.conf %s: %w", user, err)
	}
	return nil
}
