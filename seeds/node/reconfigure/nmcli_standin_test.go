package reconfigure

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// nmcli is a stand-in for NetworkManager's nmcli over the profiles under the test root.
type nmcli struct {
	loaded map[string]string // profile id -> its controller ("" for none)
	active []string          // ids, in activation order
	// autoconnect: the reload starts every loaded profile at once, as NetworkManager's
	// policy does for autoconnect=true profiles on free devices (src/core/nm-policy.c
	// schedules auto-activation when a connection is added): the least convenient
	// variant, since the hook's own activations then race it.
	autoconnect bool
	enslaved    map[string]int // port -> times attached to its controller
}

// run imitates the nmcli verbs the hook uses:
//   - -t -f RUNNING general: src/nmcli/general.c show_nm_status prints the RUNNING field,
//     "running" once NetworkManager is up.
//   - connection reload: src/core/settings/plugins/keyfile/nms-keyfile-plugin.c reload
//     reads every keyfile; nms-keyfile-utils.c nm_keyfile_utils_ignore_filename skips
//     hidden and temporary files and nms_keyfile_utils_check_file_permissions_stat skips
//     (with a warning in the journal only, nothing to the caller) a file that group or
//     others may read, and a profile whose file is gone is forgotten.
//   - connection up id ID: src/nmcli/connections.c do_connection_up fails with "Error:
//     unknown connection" (exit 10, NMC_RESULT_ERROR_NOT_FOUND) for a profile not loaded;
//     a port's controller must be a loaded profile, or activation fails (exit 4,
//     NMC_RESULT_ERROR_CON_ACTIVATION); success prints the D-Bus path line. Activating a
//     controller activates its ports (connection.autoconnect-slaves=1, nm-settings-nmcli(5)),
//     each attached once more; activating a port activates its controller first when it
//     is not active (src/core/nm-manager.c ensure_controller_active_connection); activating
//     a profile that is active activates it again (nmcli(1) "connection up"), so a
//     controller's ports are released and attached again.
//   - -g GENERAL.STATE connection show id ID: src/nmcli/connections.c prints the active
//     connection's state, "activated", and nothing for a profile that is not active.
func (n *nmcli) run(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"nmcli"}, args...)
	switch {
	case slices.Equal(args, []string{"-t", "-f", "RUNNING", "general"}):
		return []byte("running\n"), nil
	case slices.Equal(args, []string{"connection", "reload"}):
		if err := n.reload(c.root); err != nil || !n.autoconnect {
			return nil, err
		}
		for _, id := range slices.Sorted(maps.Keys(n.loaded)) {
			if !slices.Contains(n.active, id) {
				n.activate(id)
			}
		}
		return nil, nil
	case len(args) == 6 && slices.Equal(args[:5], []string{"-g", "GENERAL.STATE", "connection", "show", "id"}):
		if _, ok := n.loaded[args[5]]; !ok {
			return nil, fail(argv, 10, fmt.Sprintf("Error: %s - no such connection profile.", args[5]))
		}
		if slices.Contains(n.active, args[5]) {
			return []byte("activated\n"), nil
		}
		return nil, nil
	case len(args) == 4 && args[0] == "connection" && args[1] == "up" && args[2] == "id":
		ctrl, ok := n.loaded[args[3]]
		if !ok {
			return nil, fail(argv, 10, fmt.Sprintf("Error: unknown connection '%s'.", args[3]))
		}
		if _, ok := n.loaded[ctrl]; ctrl != "" && !ok {
			return nil, fail(argv, 4, "Error: Connection activation failed: Master device '"+ctrl+"' unmanaged or not available for activation")
		}
		n.activate(args[3])
		return []byte(fmt.Sprintf("Connection successfully activated (D-Bus active path: /org/freedesktop/NetworkManager/ActiveConnection/%d)\n", len(n.active))), nil
	}
	return nil, fail(argv, 2, "Error: argument '"+strings.Join(args, " ")+"' not understood.")
}

// activate activates id as NetworkManager does: a port's controller first when it is not
// active, a controller's ports after it (each attached once more, even if it was).
func (n *nmcli) activate(id string) {
	if n.enslaved == nil {
		n.enslaved = map[string]int{}
	}
	ctrl := n.loaded[id]
	if ctrl != "" && !slices.Contains(n.active, ctrl) {
		n.activate(ctrl) // attaches id too
		return
	}
	n.active = append(slices.DeleteFunc(n.active, func(a string) bool { return a == id }), id)
	if ctrl != "" {
		n.enslaved[id]++
	}
	for _, p := range slices.Sorted(maps.Keys(n.loaded)) {
		if n.loaded[p] == id {
			n.active = append(slices.DeleteFunc(n.active, func(a string) bool { return a == p }), p)
			n.enslaved[p]++
		}
	}
}

func (n *nmcli) reload(root string) error {
	dir := filepath.Join(root, NMConnectionsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	n.loaded = map[string]string{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".nmconnection") {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		id, master := keyfileValue(b, "connection", "id"), keyfileValue(b, "connection", "master")
		if id != "" && keyfileValue(b, "connection", "type") != "" {
			n.loaded[id] = master
		}
	}
	return nil
}

// keyfileValue is key's value in group of a GLib key file (the keyfile format).
func keyfileValue(b []byte, group, key string) string {
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = line == "["+group+"]"
			continue
		}
		if k, v, ok := strings.Cut(line, "="); in && ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
