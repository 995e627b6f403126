package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// MCDCurrentConfig is the machine-config daemon's record of the config the node runs: every
// file it lists, the MCD checks on disk (machine-config-operator pkg/daemon/
// on_disk_validation.go validateOnDiskState, checkV3Files) and degrades the pool when one
// is missing or differs.
const MCDCurrentConfig = "/etc/machine-config-daemon/currentconfig"

// perNodeState is what belongs to this one boot of this one machine and must not ship:
// lifecycle-agent's exclusions from its /var archive (lca-cli/seedcreator/seedcreator.go
// backupVar: /var/tmp/*, /var/log/*, /var/lib/log/*, /var/lib/cni/bin/*,
// /var/lib/kubelet/pods/*, /var/lib/ovn-ic/etc/*) and all of /etc/cni/multus, which its
// /etc archive drops (backupEtc filters `ostree admin config-diff` through
// `grep -v 'cni/multus'`: the factory's multus kubeconfig and per-node certificates, which
// multus's daemon writes again when it starts). Each directory is emptied and kept, as tar's
// DIR/* exclusion leaves the directory in the seed.
// Not followed: /var/lib/containers/* (this seed ships its images there, where
// lifecycle-agent's seed re-pulls them) and /var/lib/lca (lifecycle-agent's own state).
func perNodeState() []string {
	return []string{"/var/tmp/", "/var/log/", "/var/lib/log/", "/var/lib/cni/bin/", "/var/lib/kubelet/pods/",
		"/var/lib/ovn-ic/etc/", "/etc/cni/multus/"}
}

// factoryEtcState is what lifecycle-agent leaves out of a seed's /etc (seedcreator.go
// backupEtc): the factory NIC's NetworkManager profiles (br-ex, ovs-if), the MCD's backup of
// the original kubelet files, the OVS database and its lock, and the factory's hostname.
// This seed is the whole disk, so left out means removed.
func factoryEtcState() []string {
	return []string{"/etc/NetworkManager/system-connections/", "/etc/machine-config-daemon/orig/var/lib/kubelet",
		"/etc/openvswitch/conf.db", "/etc/openvswitch/.conf.db.~lock~", "/etc/hostname"}
}

// shellHistory is lifecycle-agent's */.bash_history exclusion from /var (backupVar): the
// factory operator's shells, under /var/roothome and /var/home on RHCOS.
const shellHistory = "/var/**/.bash_history"

// mcOwned lists the files the node's MachineConfig owns (MCDCurrentConfig's
// spec.config.storage.files); none on a node without a machine-config daemon.
func mcOwned(root string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, MCDCurrentConfig))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", MCDCurrentConfig, err)
	}
	var mc struct {
		Spec struct {
			Config struct {
				Storage struct {
					Files []struct {
						Path string `json:"path"`
					} `json:"files"`
				} `json:"storage"`
			} `json:"config"`
		} `json:"spec"`
	}
	if err := strictjson.DecodeOpen(b, &mc); err != nil {
		return nil, fmt.Errorf("reading %s (the MachineConfig the node runs): %w", MCDCurrentConfig, err)
	}
	owned := map[string]bool{}
	for _, f := range mc.Spec.Config.Storage.Files {
		owned[path.Clean(f.Path)] = true
	}
	return owned, nil
}

// removal removes node paths under a root, never one a MachineConfig owns nor a directory
// holding one: the MCD would find it missing.
type removal struct {
	root    string
	owned   map[string]bool
	removed int
	kept    []string // MachineConfig-owned paths left in place
}

// remove takes away the node path p. A p ending in "/" is emptied and kept (tar's DIR/*).
func (r *removal) remove(p string) error {
	if strings.HasSuffix(p, "/") {
		entries, err := os.ReadDir(filepath.Join(r.root, p))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("clearing %s: %w", p, err)
		}
		for _, e := range entries {
			if err := r.remove(path.Join(p, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if r.owned[p] {
		r.kept = append(r.kept, p)
		return nil
	}
	if r.holdsOwned(p) {
		return r.remove(p + "/")
	}
	if _, err := os.Lstat(filepath.Join(r.root, p)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(r.root, p)); err != nil {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	r.removed++
	return nil
}

// holdsOwned tells whether a MachineConfig owns a file under the directory p.
func (r *removal) holdsOwned(p string) bool {
	for o := range r.owned {
		if strings.HasPrefix(o, p+"/") {
			return true
		}
	}
	return false
}

// detail is what a removal step reports.
func (r *removal) detail() string {
	d := fmt.Sprintf("%d entries removed", r.removed)
	if len(r.kept) > 0 {
		slices.Sort(r.kept)
		d += "; kept, a MachineConfig owns them: " + strings.Join(r.kept, ", ")
	}
	return d
}

// removeShellHistory removes every .bash_history under /var, skipping the container
// storage (image content, not the factory's shells).
func (r *removal) removeShellHistory() error {
	var found []string
	err := filepath.WalkDir(filepath.Join(r.root, "var"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case d.IsDir() && p == filepath.Join(r.root, "var/lib/containers"):
			return filepath.SkipDir
		case d.Name() == ".bash_history" && !d.IsDir():
			rel, _ := filepath.Rel(r.root, p)
			found = append(found, "/"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("looking for shell history under /var: %w", err)
	}
	for _, p := range found {
		if err := r.remove(p); err != nil {
			return err
		}
	}
	return nil
}
