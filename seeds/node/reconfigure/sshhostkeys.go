package reconfigure

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// SSHHostKeysDir is where sshd's host keys live; the site's recert replaces them
// (recert.Config.RegenerateServerSSHKeys), so no two sites share the factory's.
const SSHHostKeysDir = "/etc/ssh"

// sshHostKeyFiles are the files ssh-keygen -A makes on RHEL 9 (RSA, ECDSA and Ed25519),
// and so the files recert's regeneration replaces (it keeps the types it found).
func sshHostKeyFiles() []string {
	var out []string
	for _, t := range []string{"rsa", "ecdsa", "ed25519"} {
		k := SSHHostKeysDir + "/ssh_host_" + t + "_key"
		out = append(out, k, k+".pub")
	}
	return out
}

// hostKeys lists the host keys (ssh_host_*_key*) in the node's /etc/ssh: the files recert's
// server_ssh_keys.rs remove_old_keys globs for.
func (r *run) hostKeys() ([]string, error) {
	keys, err := filepath.Glob(under(r.o.Root, SSHHostKeysDir+"/ssh_host_*_key*"))
	if err != nil {
		return nil, fmt.Errorf("listing the SSH host keys: %w", err)
	}
	return keys, nil
}

// sshHostKeys makes sure /etc/ssh holds host keys before recert runs. recert replaces only
// the key types it finds, and with none it stops ("No SSH server keys found",
// src/server_ssh_keys.rs remove_old_keys) after it has already rewritten the certificates
// on disk (src/recert.rs finalize), leaving the node half changed. The seal keeps the
// factory's keys for recert to replace, as lifecycle-agent's seed does; a seed whose keys
// are gone (an older seal, or a hand-made one) gets fresh ones from ssh-keygen -A, which
// makes each missing type, as RHCOS's sshd-keygen@.service would at boot.
func (r *run) sshHostKeys(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
	keys, err := r.hostKeys()
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		return map[string]string{"kept": strconv.Itoa(len(keys)) + " seed host key files, which recert replaces"}, nil
	}
	if _, err := r.cmd(ctx, "ssh-keygen", "-A", "-f", r.o.Root); err != nil {
		return nil, fmt.Errorf("making SSH host keys for recert to replace (%s has none): %w", SSHHostKeysDir, err)
	}
	if keys, err = r.hostKeys(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("ssh-keygen -A left no host keys in %s: recert would stop on it; check that %s is writable", SSHHostKeysDir, SSHHostKeysDir)
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = filepath.Base(k)
	}
	return map[string]string{"generated": strings.Join(names, ","), "dir": SSHHostKeysDir}, nil
}
