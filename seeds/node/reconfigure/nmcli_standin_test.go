package reconfigure

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// nmcli is a stand-in for NetworkManager's nmcli over the profiles under the test root.
type nmcli struct {
	loaded map[string]string // profile id -> its controller ("" for none)
	active []string          // ids, in activation order
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
//     NMC_RESULT_ERROR_CON_ACTIVATION); success prints the D-Bus path line.
func (n *nmcli) run(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"nmcli"}, args...)
	switch {
	case slices.Equal(args, []string{"-t", "-f", "RUNNING", "general"}):
		return []byte("running\n"), nil
	case slices.Equal(args, []string{"connection", "reload"}):
		return nil, n.reload(c.root)
	case len(args) == 4 && args[0] == "connection" && args[1] == "up" && args[2] == "id":
		ctrl, ok := n.loaded[args[3]]
		if !ok {
			return nil, fail(argv, 10, fmt.Sprintf("Error: unknown connection '%s'.", args[3]))
		}
		if _, ok := n.loaded[ctrl]; ctrl != "" && !ok {
			return nil, fail(argv, 4, "Error: Connection activation failed: Master device '"+ctrl+"' unmanaged or not available for activation")
		}
		n.active = append(n.active, args[3])
		return []byte(fmt.Sprintf("Connection successfully activated (D-Bus active path: /org/freedesktop/NetworkManager/ActiveConnection/%d)\n", len(n.active))), nil
	}
	return nil, fail(argv, 2, "Error: argument '"+strings.Join(args, " ")+"' not understood.")
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
