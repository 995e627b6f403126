package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// hasNetworkManager probes for a running NetworkManager: its keyfile directory under the
// root, then nmcli's own answer. Without the directory the node is the busybox
// conformance OS; with it, a NetworkManager that does not answer is an error, since
// the busybox path would fight it over the interfaces.
func (r *run) hasNetworkManager(ctx context.Context) (bool, error) {
	if _, err := os.Stat(under(r.o.Root, NMConnectionsDir)); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	// -t -f RUNNING general: one terse field, "running" or "starting".
	out, err := r.cmd(ctx, "nmcli", "-t", "-f", "RUNNING", "general")
	if err != nil {
		return false, fmt.Errorf("the node has %s but nmcli cannot reach NetworkManager: %w", NMConnectionsDir, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "running" {
			return true, nil
		}
	}
	return false, fmt.Errorf("the node has %s but NetworkManager is not running (nmcli: %q): start NetworkManager before the hook", NMConnectionsDir, strings.TrimSpace(string(out)))
}

// nmNetwork applies the whole nmstate document as NetworkManager keyfiles, the profiles
// nmstate's generator writes (NMKeyfiles), replacing the factory's: every other profile
// in the directory is removed, then NetworkManager reloads them once and the top-level
// profiles are activated (nmActivate), so each bond port is enslaved once.
func (r *run) nmNetwork(ctx context.Context, n *siteconfig.Network) (map[string]string, error) {
	kfs, err := NMKeyfiles(n)
	if err != nil {
		return nil, fmt.Errorf("the site network cannot be applied by NetworkManager: %w", err)
	}
	for _, iface := range n.Interfaces {
		if iface.Type == "ethernet" && iface.MACAddress != "" {
			if err := r.checkMAC(ctx, iface); err != nil {
				return nil, err
			}
		}
	}
	dir := under(r.o.Root, NMConnectionsDir)
	old, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the factory's NetworkManager profiles: %w", err)
	}
	keep := map[string]bool{}
	var ids []string
	for _, k := range kfs {
		// NetworkManager ignores a keyfile others can read (it may hold secrets).
		if _, err := r.writeUnder(path.Join(NMConnectionsDir, k.FileName()), k.Data, 0o600); err != nil {
			return nil, fmt.Errorf("writing the NetworkManager profile %s: %w", k.ID, err)
		}
		keep[k.FileName()] = true
		ids = append(ids, k.ID)
	}
	var removed []string
	for _, e := range old {
		if keep[e.Name()] || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := os.Remove(path.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("removing the factory's NetworkManager profile %s: %w", e.Name(), err)
		}
		removed = append(removed, e.Name())
	}
	if _, err := r.cmd(ctx, "nmcli", "connection", "reload"); err != nil {
		return nil, fmt.Errorf("reloading NetworkManager's profiles: %w", err)
	}
	if err := r.nmActivate(ctx, n); err != nil {
		return nil, err
	}
	d, err := r.addressReport(ctx, n)
	if err != nil {
		return nil, err
	}
	d["networkmanager.profiles"] = strings.Join(ids, ",")
	if len(removed) > 0 {
		d["networkmanager.removed"] = strings.Join(removed, ",")
	}
	return d, nil
}

// addressReport lists the global addresses each up interface holds.
func (r *run) addressReport(ctx context.Context, n *siteconfig.Network) (map[string]string, error) {
	d := map[string]string{}
	var names []string
	for _, iface := range n.Interfaces {
		names = append(names, iface.Name)
		if iface.State == "down" {
			d["address."+iface.Name] = "down"
			continue
		}
		out, err := r.cmd(ctx, "ip", "-o", "addr", "show", "dev", iface.Name)
		if err != nil {
			return nil, fmt.Errorf("reading the addresses of %s: %w", iface.Name, err)
		}
		d["address."+iface.Name] = strings.Join(globalAddresses(out), ",")
	}
	d["interfaces"] = strings.Join(names, ",")
	return d, nil
}

// nmActivate brings up the site's profiles after the reload the way nmstate applies a
// document, in one go: a port is never activated on its own, its controller activates it
// (connection.autoconnect-slaves=1, nm-settings-nmcli(5): "activate all the port
// connections with this connection"). The reload may already have started a profile
// (autoconnect=true, nm-settings-nmcli(5) connection.autoconnect), and activating a profile
// that is active activates it again (nmcli(1) "connection up": the device is disconnected
// first), which would release and enslave the bond's ports once more: a controller or
// plain interface NetworkManager reports activating or activated is left alone. A VLAN is
// always activated: nmcli waits for it to be activated, its addresses then to report, and
// activating it again touches neither its parent nor the parent's ports.
func (r *run) nmActivate(ctx context.Context, n *siteconfig.Network) error {
	ports := map[string]bool{}
	var top, vlans []string
	for _, iface := range n.Interfaces {
		if iface.Type == "bond" {
			for _, p := range iface.LinkAggregation.PortNames() {
				ports[p] = true
			}
		}
	}
	for _, iface := range n.Interfaces {
		switch {
		case ports[iface.Name] || iface.State == "down":
		case iface.Type == "vlan":
			vlans = append(vlans, iface.Name)
		default:
			top = append(top, iface.Name)
		}
	}
	var up []string
	for _, id := range top {
		// -g: the field's value alone; empty for a profile that is not active.
		out, err := r.cmd(ctx, "nmcli", "-g", "GENERAL.STATE", "connection", "show", "id", id)
		if err != nil {
			return fmt.Errorf("reading the state of the NetworkManager profile %s: %w", id, err)
		}
		if st := strings.TrimSpace(string(out)); st != "activated" && st != "activating" {
			up = append(up, id)
		}
	}
	// The controllers and plain interfaces first, then the VLANs over them.
	for _, id := range append(up, vlans...) {
		if _, err := r.cmd(ctx, "nmcli", "connection", "up", "id", id); err != nil {
			return fmt.Errorf("activating the NetworkManager profile %s: %w", id, err)
		}
	}
	return nil
}
