package ociseed

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Keychain finds registry credentials the way skopeo and podman do, then docker:
//  1. $REGISTRY_AUTH_FILE, else $XDG_RUNTIME_DIR/containers/auth.json, else
//     $HOME/.config/containers/auth.json (the containers auth files; the most specific
//     key wins: host/namespace/repo before host);
//  2. authn.DefaultKeychain: $HOME/.docker/config.json or $DOCKER_CONFIG/config.json,
//     including their credential helpers;
//  3. anonymous.
func Keychain() authn.Keychain {
	return authn.NewMultiKeychain(containersKeychain{}, authn.DefaultKeychain)
}

// containersKeychain reads the containers auth file each time, so a login during a long
// push is seen.
type containersKeychain struct{}

func containersAuthFile() string {
	if f := os.Getenv("REGISTRY_AUTH_FILE"); f != "" {
		return f
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if f := filepath.Join(d, "containers", "auth.json"); fileExists(f) {
			return f
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "containers", "auth.json")
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// maxAuthFile bounds a containers-auth.json(5): a few KiB of credentials, even for many
// registries.
const maxAuthFile = 1 << 20

func (containersKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	file := containersAuthFile()
	if file == "" {
		return authn.Anonymous, nil
	}
	b, err := smallfile.Read(file, maxAuthFile)
	if errors.Is(err, os.ErrNotExist) {
		return authn.Anonymous, nil
	}
	if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
		// A FIFO, a device or a huge file named as the credentials is the user's input.
		return nil, badinput.Errorf("reading registry credentials: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials: %w", err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := strictjson.DecodeOpen(b, &cfg); err != nil {
		return nil, fmt.Errorf("reading registry credentials from %s: %w", file, err)
	}
	// From the most specific key (host/ns/repo) to the host alone.
	for key := r.String(); key != ""; key = parent(key) {
		for _, k := range []string{key, "https://" + key, "http://" + key} {
			a, ok := cfg.Auths[k]
			if !ok || a.Auth == "" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("registry credentials for %s in %s: %w", k, file, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("registry credentials for %s in %s: not user:password", k, file)
			}
			return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), nil
		}
	}
	return authn.Anonymous, nil
}

func parent(key string) string {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return ""
	}
	return key[:i]
}
