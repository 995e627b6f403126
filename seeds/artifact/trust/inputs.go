package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containers/image/v5/signature"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Caps on the files a trust check reads (docs/inputs.md lists them with every other input).
const (
	// MaxPolicyFile bounds a containers-policy.json(5): real ones are a few KiB.
	MaxPolicyFile = 1 << 20
	// MaxPolicyKeyFile bounds a file the policy names (keyPath, keyPaths, caPath,
	// rekorPublicKeyPath, ...): a public key is a few hundred bytes, a CA bundle a few
	// hundred KiB at most.
	MaxPolicyKeyFile = 1 << 20
	// MaxRegistriesFile bounds one containers-registries.d(5) file: a few lines each.
	MaxRegistriesFile = 1 << 20
	// MaxAuthFile bounds a containers-auth.json(5): a few KiB of credentials, even for many
	// registries (the cap the seed's own reads apply, ociseed's keychain).
	MaxAuthFile = 1 << 20
)

// checkAuthFile reads the auth file REGISTRY_AUTH_FILE names (file; "" is none) through
// smallfile before containers/image reads it (pkg/docker/config/config.go, authPath.parse:
// os.ReadFile, which blocks on a FIFO and reads /dev/zero without end). It returns the file
// to hand on: a missing one is left to containers/image, which takes it as no credentials.
func checkAuthFile(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	_, err := smallfile.Read(file, MaxAuthFile)
	if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
		return "", badinput.Errorf("reading registry credentials (REGISTRY_AUTH_FILE): %w", err)
	}
	return file, nil
}

// readPolicy reads the policy file; every failure is the user's input.
func readPolicy(file string) ([]byte, error) {
	b, err := smallfile.Read(file, MaxPolicyFile)
	if err != nil {
		return nil, badinput.Errorf("the trust policy: %w", err)
	}
	return b, nil
}

// ReadPolicyFile reads a containers-policy.json(5) that a user named for callers that hand
// it on to containers/image (a stage's signature policy): the file and every file it names
// (keyPath, caPath, ...) through smallfile, so that containers/image, which reads them with
// os.ReadFile, never meets a FIFO, a device or a huge file. Every failure is bad input
// naming the file and, where it is too large, the cap.
func ReadPolicyFile(file string) ([]byte, error) {
	b, err := readPolicy(file)
	if err != nil {
		return nil, err
	}
	if err := checkPolicyFiles(file, b); err != nil {
		return nil, err
	}
	// Its meaning too, not only its syntax: an unknown requirement type is refused by
	// containers/image only when the policy is applied (signature/policy_config.go,
	// newPolicyRequirementFromJSON), which a seed directory never is.
	if _, err := signature.NewPolicyFromBytes(b); err != nil {
		return nil, badinput.Errorf("the trust policy %s: %w", file, err)
	}
	return b, nil
}

// checkPolicyFiles reads every file the policy names through smallfile before
// containers/image reads them with os.ReadFile (signature/policy_eval_sigstore.go,
// loadBytesFromConfigSources, used by signedBy and sigstoreSigned alike), which would block
// on a FIFO and read /dev/zero until memory runs out. A missing or unreadable file is left
// to containers/image, which reports it only when the requirement applies.
func checkPolicyFiles(file string, policy []byte) error {
	var doc any
	// containers/image refuses a duplicated key too (signature/json.go,
	// paranoidUnmarshalJSONObject), but without saying where; this says where first.
	if err := strictjson.DecodeOpen(policy, &doc); err != nil {
		return badinput.Errorf("the trust policy %s: %w", file, err)
	}
	var errs []error
	walkPaths(doc, func(field, p string) {
		_, err := smallfile.Read(p, MaxPolicyKeyFile)
		if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
			errs = append(errs, fmt.Errorf("the trust policy %s: %s: %w", file, field, err))
		}
	})
	return badinput.Wrap(errors.Join(errs...))
}

// walkPaths calls fn for each file a policy document names: a string under a key ending in
// "Path", each string of a list under a key ending in "Paths".
func walkPaths(v any, fn func(field, path string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch x := x.(type) {
			case string:
				if strings.HasSuffix(k, "Path") && x != "" {
					fn(k, x)
				}
			case []any:
				if strings.HasSuffix(k, "Paths") {
					for _, p := range x {
						if s, ok := p.(string); ok && s != "" {
							fn(k, s)
						}
					}
					continue
				}
			}
			walkPaths(x, fn)
		}
	case []any:
		for _, x := range v {
			walkPaths(x, fn)
		}
	}
}

// checkRegistriesDir reads each *.yaml file of a containers-registries.d(5) directory
// through smallfile, as containers/image would read it with os.ReadFile
// (docker/registries_d.go, loadAndMergeConfig: every name ending in .yaml, no directory
// at all is no configuration), so a FIFO, a device or a huge file there is refused first.
func checkRegistriesDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return badinput.Errorf("the registries.d directory: %w", err)
	}
	if !fi.IsDir() {
		return badinput.Errorf("the registries.d directory %s: not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return badinput.Errorf("the registries.d directory: %w", err)
	}
	seen := map[string]string{} // default-docker or a namespace: the file that defined it
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := smallfile.Read(p, MaxRegistriesFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return badinput.Errorf("the registries.d directory: %w", err)
		}
		if err := checkRegistriesFile(p, b, seen); err != nil {
			return badinput.Errorf("the registries.d directory: %w", err)
		}
	}
	return nil
}

// registriesFile is the shape of a registries.d file, as containers/image decodes it
// (docker/registries_d.go, registryConfiguration and registryNamespace).
type registriesFile struct {
	DefaultDocker *registriesNamespace           `yaml:"default-docker"`
	Docker        map[string]registriesNamespace `yaml:"docker"`
}

type registriesNamespace struct {
	Lookaside              string `yaml:"lookaside"`
	LookasideStaging       string `yaml:"lookaside-staging"`
	SigStore               string `yaml:"sigstore"`
	SigStoreStaging        string `yaml:"sigstore-staging"`
	UseSigstoreAttachments *bool  `yaml:"use-sigstore-attachments,omitempty"`
}

// checkRegistriesFile refuses, before containers/image reads it, what its
// loadAndMergeConfig (docker/registries_d.go) would fail on only once a pull had started:
// YAML that does not decode into its shape (the error says the line), and a
// default-docker or a namespace that two files define. seen records who defined what.
func checkRegistriesFile(path string, b []byte, seen map[string]string) error {
	var f registriesFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	var what []string
	if f.DefaultDocker != nil {
		what = append(what, "default-docker")
	}
	for _, ns := range slices.Sorted(maps.Keys(f.Docker)) {
		what = append(what, fmt.Sprintf("namespace %q under docker", ns))
	}
	for _, w := range what {
		if prev, ok := seen[w]; ok {
			return fmt.Errorf("%s is defined both in %s and %s: keep one", w, prev, path)
		}
		seen[w] = path
	}
	return nil
}

// MaxCertFile bounds a certificate or key in a registry's certificate directory: a CA
// bundle is a few hundred KiB at most.
const MaxCertFile = 1 << 20

// CertDirs are the directories containers/image looks in for a registry's certificates
// (docker/docker_client.go, dockerCertDir: $HOME/.config/containers/certs.d, then
// /etc/containers/certs.d, then /etc/docker/certs.d, each holding a directory per
// host[:port]), for home the user's home directory ("" leaves that one out).
func CertDirs(home string) []string {
	dirs := []string{"/etc/containers/certs.d", "/etc/docker/certs.d"}
	if home != "" {
		dirs = append([]string{filepath.Join(home, ".config", "containers", "certs.d")}, dirs...)
	}
	return dirs
}

// CheckCertDirs reads through smallfile every file containers/image would read from the
// per-host directories in dirs (pkg/tlsclientconfig/tlsclientconfig.go,
// SetupCertificates: each *.crt with os.ReadFile, each *.cert and *.key pair with
// tls.LoadX509KeyPair), so a FIFO, a device or a huge file there is bad input naming it
// and the cap, not a command blocked at its first connection. Every host is checked, not
// only the ones a command reaches: which those are is known only once it runs. A missing
// or unreadable directory is left to containers/image, which skips it.
func CheckCertDirs(dirs []string) error {
	for _, dir := range dirs {
		hosts, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, h := range hosts {
			if !h.IsDir() {
				continue
			}
			if err := checkCertFiles(filepath.Join(dir, h.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCertFiles checks the certificates and keys of one host's directory.
func checkCertFiles(dir string) error {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".crt") && !strings.HasSuffix(f.Name(), ".cert") && !strings.HasSuffix(f.Name(), ".key") {
			continue
		}
		_, err := smallfile.Read(filepath.Join(dir, f.Name()), MaxCertFile)
		if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
			return badinput.Errorf("a registry certificate: %w", err)
		}
	}
	return nil
}
