package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

// reconfigureWantsLink is what `systemctl enable` makes for the unit's
// WantedBy=multi-user.target (systemd src/shared/install.c install_info_symlink_wants).
const reconfigureWantsLink = "/etc/systemd/system/multi-user.target.wants/" + wire.ReconfigureUnitName

// systemdInits are where a root's systemd lives: a root without it (the busybox conformance
// OS) runs the hook from its own init.
var systemdInits = []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd"}

// coreosReconfigureUnitAction installs the site's hook on a coreos root that boots with
// systemd, the unit and its place exactly as an OpenShift seal installs them
// (reconfigureUnitActions), so the site's first boot runs the agent's reconfigure ordered
// as on RHCOS. The link is made as systemctl enable makes it rather than by running
// systemctl, which cannot enable a unit in a root it does not run (the offline seal).
func (s Sealer) coreosReconfigureUnitAction() sealAction {
	step := steps.Step{Name: "reconfigure-unit", Changes: []string{ReconfigureUnitPath, reconfigureWantsLink},
		Detail: "on a systemd root: installed and enabled for the site's first boot"}
	return sealAction{step, func(context.Context) (string, error) {
		if !s.bootsSystemd() {
			return "no systemd under the root: its init runs the hook", nil
		}
		if err := writeFileMode(s.under(ReconfigureUnitPath), []byte(ReconfigureUnit), 0o644); err != nil {
			return "", fmt.Errorf("installing %s: %w", wire.ReconfigureUnitName, err)
		}
		link := s.under(reconfigureWantsLink)
		if err := os.MkdirAll(s.under("/etc/systemd/system/multi-user.target.wants"), 0o755); err != nil {
			return "", fmt.Errorf("enabling %s: %w", wire.ReconfigureUnitName, err)
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("enabling %s: %w", wire.ReconfigureUnitName, err)
		}
		if err := os.Symlink(ReconfigureUnitPath, link); err != nil {
			return "", fmt.Errorf("enabling %s: %w", wire.ReconfigureUnitName, err)
		}
		return ReconfigureUnitPath + " enabled in multi-user.target", nil
	}}
}

// bootsSystemd says whether the root's init is systemd.
func (s Sealer) bootsSystemd() bool {
	for _, p := range systemdInits {
		if fi, err := os.Stat(s.under(p)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}
