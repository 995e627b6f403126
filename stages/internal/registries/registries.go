package registries

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containers/image/v5/types"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// Config is how a stage reaches registries. Nothing in it is secret: the pull secret is
// named here and read through the pipeline's secrets channel.
type Config struct {
	// Insecure lists registries (host[:port]) reached over plain HTTP or without TLS
	// verification.
	Insecure []string `json:"insecure,omitempty"`
	// Mirrors are ImageContentSourcePolicy / ImageDigestMirrorSet entries: pulls by digest of
	// anything under Source try each mirror in order, then Source itself.
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// RegistriesConf is a registries.conf file to use instead of the host's. It is hashed into
	// the key through Stage.Files, so its host path is not part of the options.
	RegistriesConf string `json:"-"`
	// PolicyFile is a containers signature policy (policy.json). When set, every image must
	// be allowed by it before any of its blobs is fetched. Hashed into the key through
	// Stage.Files.
	PolicyFile string `json:"-"`
	// PullSecret names a pipeline secret holding an auth file (pull-secret / auth.json
	// format). Empty means the standard auth files of the user running the build.
	PullSecret string `json:"pullSecret,omitempty"`
}

// Files are the host files c names, by the name a stage keys their content under
// (pipeline.Stage.Files): "registries.conf" and "policy.json", each only when set.
func (c Config) Files() map[string]string {
	files := map[string]string{}
	if c.RegistriesConf != "" {
		files["registries.conf"] = c.RegistriesConf
	}
	if c.PolicyFile != "" {
		files["policy.json"] = c.PolicyFile
	}
	return files
}

// Secrets are the pipeline secrets c reads (pipeline.Stage.Secrets): the pull secret when
// one is named, else none.
func (c Config) Secrets() []string {
	if c.PullSecret == "" {
		return nil
	}
	return []string{c.PullSecret}
}

// Mirror is one ICSP/IDMS mirror list.
type Mirror struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// SystemContext builds the containers/image configuration for reg (registries.conf drop-in,
// auth file holding the pull secret) in a new private directory below scratch, whose
// removal it registers with cl as it creates it. A stage passes its env.Scratch and env,
// so the pull secret never outlives the run (and after a crash the engine removes the
// scratch directory on the next one). scratch "" (callers outside a stage run) means the
// system temp directory.
func SystemContext(ctx context.Context, scratch string, reg Config, secrets pipeline.SecretSource, arch string, cl pipeline.Cleaner) (*types.SystemContext, error) {
	dir, err := os.MkdirTemp(scratch, "snofactory-registries-")
	if err != nil {
		return nil, fmt.Errorf("creating registry configuration directory: %w", err)
	}
	cl.Cleanup("registry configuration "+dir, func(context.Context) error { return os.RemoveAll(dir) })
	sys := &types.SystemContext{
		ArchitectureChoice:          GoArch(arch),
		OSChoice:                    "linux",
		SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d"),
		BigFilesTemporaryDir:        dir,
		DockerRegistryUserAgent:     "snofactory",
	}
	if sys.SystemRegistriesConfPath, err = checkedCopy(dir, "registries.conf", reg.RegistriesConf, readRegistriesConf); err != nil {
		return nil, err
	}
	if sys.SignaturePolicyPath, err = checkedCopy(dir, "policy.json", reg.PolicyFile, trust.ReadPolicyFile); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(sys.SystemRegistriesConfDirPath, 0o700); err != nil {
		return nil, fmt.Errorf("creating registry configuration directory: %w", err)
	}
	if conf := registriesDropIn(reg); conf != "" {
		if _, err := writePrivate(sys.SystemRegistriesConfDirPath, "50-snofactory.conf", []byte(conf)); err != nil {
			return nil, fmt.Errorf("writing registries.conf drop-in: %w", err)
		}
	}
	if err := checkRegistriesConf(sys, reg.RegistriesConf); err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	if err := trust.CheckCertDirs(trust.CertDirs(home)); err != nil {
		return nil, err
	}
	if sys.AuthFilePath, err = authFile(dir, reg.PullSecret, secrets); err != nil {
		return nil, err
	}
	return sys, nil
}

// authFile writes the pull secret reg names (none: "") to dir for containers/image, and
// returns its path. The secret is read through smallfile (pipeline.SecretFiles), so a
// FIFO, a device or a huge file named as the pull secret is bad input naming the file.
func authFile(dir, name string, secrets pipeline.SecretSource) (string, error) {
	if name == "" {
		return "", nil
	}
	if secrets == nil {
		return "", fmt.Errorf("pull secret %q is configured but no secrets were given", name)
	}
	b, err := secrets.Secret(name)
	if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
		return "", badinput.Wrap(err)
	}
	if err != nil {
		return "", err
	}
	p, err := writePrivate(dir, "auth.json", b)
	if err != nil {
		return "", fmt.Errorf("writing pull secret for registry access: %w", err)
	}
	return p, nil
}

// registriesDropIn renders mirrors and insecure registries as a registries.conf (v2) drop-in.
func registriesDropIn(reg Config) string {
	var b strings.Builder
	insecure := func(loc string) bool {
		host, _, _ := strings.Cut(loc, "/")
		return slices.Contains(reg.Insecure, host) || slices.Contains(reg.Insecure, loc)
	}
	prefixes := map[string]bool{}
	for _, m := range reg.Mirrors {
		if prefixes[m.Source] {
			continue
		}
		prefixes[m.Source] = true
		fmt.Fprintf(&b, "[[registry]]\nprefix = %s\nlocation = %s\ninsecure = %t\nmirror-by-digest-only = true\n",
			strconv.Quote(m.Source), strconv.Quote(m.Source), insecure(m.Source))
		for _, loc := range m.Mirrors {
			fmt.Fprintf(&b, "[[registry.mirror]]\nlocation = %s\ninsecure = %t\n", strconv.Quote(loc), insecure(loc))
		}
		b.WriteString("\n")
	}
	for _, h := range reg.Insecure {
		if prefixes[h] {
			continue
		}
		prefixes[h] = true
		fmt.Fprintf(&b, "[[registry]]\nlocation = %s\ninsecure = true\n\n", strconv.Quote(h))
	}
	return b.String()
}

// GoArch maps an RPM/CoreOS architecture name to the OCI one.
func GoArch(arch string) string {
	switch arch {
	case "", "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	default:
		return arch
	}
}
