package reconfigure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// The node's tools, standing in for what cannot run here. Each imitates the upstream tool
// it names, checks its input the way that tool does, changes the node's files under the
// root the way it would, and answers as steps.ExecRunner hands the tool's answer back:
// stdout only (a tool's stderr chatter, "Created symlink ..." and the like, is dropped), a
// failure as a *steps.CommandError carrying what the tool prints on stderr. Where the
// tool's answer can vary the stand-in gives the least convenient variant.
type tool func(c *commands, args []string) ([]byte, error)

// nodeTools are the stand-ins newHarness installs. Commands without one answer from
// commands.outputs, and so do busybox's ip -o addr/link show on the conformance OS, recorded from
// busybox networking/libiproute/ipaddress.c ipaddr_list_or_flush (one line per address,
// the rest of the entry after a literal backslash), and oc get, answered by oc below from
// objects recorded in the layout the API serves (a List, items in name order, every
// condition the operator sets).
func nodeTools() map[string]tool {
	return map[string]tool{"systemctl": systemctl, "nmstatectl": nmstatectl, "hostnamectl": hostnamectl,
		"ssh-keygen": sshKeygen, "update-ca-trust": updateCATrust, "update-ca-certificates": updateCACertificates, "podman": podman, "oc": oc, "curl": curl, "ip": busyboxIP, "hostname": busyboxHostname}
}

// fail is a command's failure as steps.ExecRunner reports it.
func fail(argv []string, code int, stderr string) error {
	return &steps.CommandError{Argv: argv, Err: fmt.Errorf("exit status %d", code), Stderr: stderr}
}

// unitDirs are where systemd finds unit files, the admin's first (systemd.unit(5)).
var unitDirs = []string{"/etc/systemd/system", "/usr/lib/systemd/system"}

func (c *commands) unitExists(unit string) bool {
	for _, d := range unitDirs {
		if _, err := os.Stat(filepath.Join(c.root, d, unit)); err == nil {
			return true
		}
	}
	return false
}

// systemctl imitates systemd's systemctl (src/systemctl/systemctl-enable.c
// verb_enable, systemctl-start-unit.c verb_start): enable makes the [Install] WantedBy
// link (every unit here is wanted by multi-user.target) and disable removes it; an unknown
// unit fails, with exit status 1 for enable and disable and 5 for start, restart and
// try-restart (LSB "program is not installed", as systemctl returns it: every start-type
// verb has the job logic check the unit's load state first: src/core/dbus-manager.c
// method_start_unit and its kin, src/core/dbus-unit.c bus_unit_queue_job).
func systemctl(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"systemctl"}, args...)
	if len(args) < 2 {
		return nil, fail(argv, 1, "Too few arguments.")
	}
	verb, units := args[0], slices.DeleteFunc(slices.Clone(args[1:]), func(a string) bool { return strings.HasPrefix(a, "--") })
	for _, u := range units {
		if !c.unitExists(u) {
			if verb == "enable" || verb == "disable" {
				return nil, fail(argv, 1, "Failed to "+verb+" unit: Unit file "+u+" does not exist.")
			}
			return nil, fail(argv, 5, "Failed to "+verb+" "+u+": Unit "+u+" not found.")
		}
		link := filepath.Join(c.root, "/etc/systemd/system/multi-user.target.wants", u)
		switch verb {
		case "enable":
			os.MkdirAll(filepath.Dir(link), 0o755)
			os.Remove(link)
			if err := os.Symlink("/etc/systemd/system/"+u, link); err != nil {
				return nil, fail(argv, 1, err.Error())
			}
		case "disable":
			os.Remove(link)
		case "restart", "start", "try-restart":
		default:
			return nil, fail(argv, 1, "Unknown command verb '"+verb+"'.")
		}
	}
	return nil, nil
}

// validHostname is systemd's hostname_is_valid (src/basic/hostname-util.c): dot-separated
// labels of letters, digits and '-', at most 64 characters.
var validHostname = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$`)

// hostnamectl imitates systemd's hostnamectl set-hostname (src/hostname/hostnamectl.c
// set_hostname, through hostnamed's SetStaticHostname, which writes /etc/hostname).
func hostnamectl(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"hostnamectl"}, args...)
	if len(args) != 2 || args[0] != "set-hostname" {
		return nil, fail(argv, 1, "Unknown command verb.")
	}
	if len(args[1]) > 64 || !validHostname.MatchString(args[1]) {
		return nil, fail(argv, 1, "Could not set static hostname: Invalid static hostname '"+args[1]+"'")
	}
	return nil, os.WriteFile(filepath.Join(c.root, "/etc/hostname"), []byte(args[1]+"\n"), 0o644)
}

// sshKeygen imitates OpenSSH's ssh-keygen -A -f PREFIX (ssh-keygen.c
// do_gen_all_hostkeys): it makes each missing key type of RSA, ECDSA and Ed25519 in
// PREFIX/etc/ssh and fails when that directory does not exist.
func sshKeygen(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"ssh-keygen"}, args...)
	if !slices.Equal(args[:min(len(args), 2)], []string{"-A", "-f"}) || len(args) != 3 {
		return nil, fail(argv, 1, "usage: ssh-keygen ...")
	}
	dir := filepath.Join(args[2], "/etc/ssh")
	var made []string
	for _, t := range []string{"rsa", "ecdsa", "ed25519"} {
		k := filepath.Join(dir, "ssh_host_"+t+"_key")
		if _, err := os.Stat(k); err == nil {
			continue
		}
		if err := os.WriteFile(k, []byte("private "+t), 0o600); err != nil {
			return nil, fail(argv, 1, "ssh-keygen: generating new host keys: "+strings.ToUpper(t)+" Could not save your private key in "+k+": No such file or directory")
		}
		os.WriteFile(k+".pub", []byte("public "+t), 0o644)
		made = append(made, strings.ToUpper(t))
	}
	if len(made) == 0 {
		return nil, nil
	}
	return []byte("ssh-keygen: generating new host keys: " + strings.Join(made, " ") + " \n"), nil
}

// curl answers the standalone etcd's GET /health as etcd does when healthy
// (etcdserver/api/etcdhttp/health.go), and fails as curl --fail does when no etcd runs.
func curl(c *commands, args []string) ([]byte, error) {
	if !c.running[EtcdContainerName] {
		return nil, fail(append([]string{"curl"}, args...), 7, "curl: (7) Failed to connect to localhost port 2379: Connection refused")
	}
	return []byte(`{"health":"true","reason":""}`), nil
}

// EtcdContainerName is the standalone etcd's container, as the stand-ins track it.
const EtcdContainerName = "snofactory-recert-etcd"

// podman imitates podman run and stop (containers/podman cmd/podman/containers/run.go,
// stop.go): run --detach prints the new container's ID, stop prints the name and fails
// with exit status 125 for a container that is not there. A recert container runs the
// recert stand-in on the mounts it was given.
func podman(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"podman"}, args...)
	switch {
	case len(args) == 2 && args[0] == "stop":
		if !c.running[args[1]] {
			return nil, fail(argv, 125, fmt.Sprintf("Error: no container with name or ID %q found: no such container", args[1]))
		}
		delete(c.running, args[1])
		return []byte(args[1] + "\n"), nil
	case len(args) > 0 && args[0] == "run":
	default:
		return nil, fail(argv, 125, "Error: unrecognized command")
	}
	name, mounts, env := "", map[string]string{}, map[string]string{}
	// podman's own options end at the image; what follows is the container's command.
	for i := 1; i+1 < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		if !slices.Contains([]string{"--name", "-v", "--env", "--entrypoint"}, args[i]) {
			continue
		}
		switch args[i] {
		case "--name":
			name = args[i+1]
		case "-v":
			host, ctr, ok := strings.Cut(args[i+1], ":")
			if _, err := os.Stat(host); !ok || err != nil {
				return nil, fail(argv, 125, "Error: statfs "+host+": no such file or directory")
			}
			mounts[ctr] = host
		case "--env":
			k, v, _ := strings.Cut(args[i+1], "=")
			env[k] = v
		}
		i++
	}
	if name == EtcdContainerName {
		c.running[name] = true
		return []byte(strings.Repeat("e7", 32) + "\n"), nil
	}
	if name == "snofactory-recert" {
		return nil, c.recert(argv, mounts, env["RECERT_CONFIG"])
	}
	return nil, fail(argv, 125, "Error: no stand-in for container "+name)
}

// inContainer maps a path inside a container to the host file its mounts give, or "".
func inContainer(mounts map[string]string, p string) string {
	best := ""
	for ctr := range mounts {
		if (p == ctr || strings.HasPrefix(p, strings.TrimSuffix(ctr, "/")+"/")) && len(ctr) > len(best) {
			best = ctr
		}
	}
	if best == "" {
		return ""
	}
	return filepath.Join(mounts[best], strings.TrimPrefix(p, best))
}

// recertKeys are the RECERT_CONFIG keys recert knows (src/config.rs
// RecertConfig::parse_from_config_file, which refuses "unknown keys {:?} in config file").
var recertKeys = []string{"dry_run", "etcd_endpoint", "crypto_dirs", "crypto_files", "cluster_customization_dirs", "cluster_customization_files",
	"cn_san_replace_rules", "use_key_rules", "use_cert_rules", "extend_expiration", "force_expire", "cluster_rename", "hostname", "ip",
	"proxy", "install_config", "kubeadmin_password_hash", "pull_secret", "additional_trust_bundle", "user_ca_bundle", "proxy_trusted_ca_bundle", "chrony_config",
	"machine_network_cidr", "regenerate_server_ssh_keys", "summary_file", "summary_file_clean", "threads", "etcd_defrag", "postprocess_only"}

// recert imitates recert run from its RECERT_CONFIG file, seen through the container's
// mounts: every key known (src/config.rs), every path existing (ConfigPath), etcd
// reachable, then the pull secret and trust bundle written where recert writes them in the
// customization dirs (recertCustomizationDirs), the SSH host keys
// replaced type for type (src/server_ssh_keys.rs remove_old_keys, which fails on none, and
// write_new_keys), and the clean summary written.
func (c *commands) recert(argv []string, mounts map[string]string, configPath string) error {
	host := inContainer(mounts, configPath)
	b, err := os.ReadFile(host)
	if host == "" || err != nil {
		return fail(argv, 1, "Error: reading config file "+configPath+": No such file or directory (os error 2)")
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fail(argv, 1, "Error: parsing config file: "+err.Error())
	}
	for k := range cfg {
		if !slices.Contains(recertKeys, k) {
			return fail(argv, 1, fmt.Sprintf("Error: unknown keys [%q] in config file", k))
		}
	}
	// src/ocp_postprocess/additional_trust_bundle/params.rs parse_additional_trust_bundle: a
	// value without a newline is a path; the bundle holds certificates only, at least one.
	if b, ok := cfg["user_ca_bundle"].(string); ok {
		if !strings.Contains(b, "\n") || !strings.Contains(b, "-----BEGIN CERTIFICATE-----") || strings.Contains(b, "PRIVATE KEY") {
			return fail(argv, 1, "Error: additional_trust_bundle must contain only certificates")
		}
	}
	if msg := recertProxyParse(cfg); msg != "" {
		return fail(argv, 1, "Error: "+msg)
	}
	if !c.running[EtcdContainerName] {
		return fail(argv, 1, "Error: connecting to etcd at localhost:2379: tcp connect error: Connection refused")
	}
	if msg := recertProxyRename(cfg, mounts); msg != "" {
		return fail(argv, 1, "Error: "+msg)
	}
	var paths []string
	for _, k := range []string{"crypto_dirs", "crypto_files", "cluster_customization_dirs", "cluster_customization_files"} {
		l, _ := cfg[k].([]any)
		for _, p := range l {
			paths = append(paths, p.(string))
		}
	}
	for _, p := range paths {
		if h := inContainer(mounts, p); h == "" || !exists(h) {
			return fail(argv, 1, "Error: "+p+" must exist")
		}
	}
	if err := recertCustomizationDirs(cfg, mounts); err != nil {
		return fail(argv, 1, "Error: "+err.Error())
	}
	if dir, _ := cfg["regenerate_server_ssh_keys"].(string); dir != "" {
		if err := regenerateHostKeys(inContainer(mounts, dir), dir); err != nil {
			return fail(argv, 1, "Error: "+err.Error())
		}
	}
	if s, _ := cfg["summary_file_clean"].(string); s != "" {
		if h := inContainer(mounts, s); h == "" || os.WriteFile(h, []byte("summary: clean\n"), 0o644) != nil {
			return fail(argv, 1, "Error: writing summary "+s)
		}
	}
	return nil
}

// recertCustomizationDirs imitates what recert writes in each cluster_customization_dirs
// entry, and nowhere else: with pull_secret, every **/config.json of a directory named
// kubelet is overwritten whole (src/ocp_postprocess/pull_secret_rename.rs
// fix_dir_resources, pull_secret_rename/filesystem_rename.rs fix_filesystem_pull_secret);
// with user_ca_bundle, every **/anchors/openshift-config-user-ca-bundle.crt gets the bundle
// (additional_trust_bundle.rs fix_dir_resources, additional_trust_bundle/filesystem_rename.rs
// fix_filesystem_ca_trust_anchors). A file outside the dirs stays as it was, so a hook that
// leaves a directory out finds its old contents there.
func recertCustomizationDirs(cfg map[string]any, mounts map[string]string) error {
	ps, _ := cfg["pull_secret"].(string)
	bundle, _ := cfg["user_ca_bundle"].(string)
	dirs, _ := cfg["cluster_customization_dirs"].([]any)
	for _, d := range dirs {
		dir := d.(string)
		root := inContainer(mounts, dir)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case p != root && strings.HasPrefix(e.Name(), "."):
				return skipHidden(e) // globvec: require_literal_leading_dot
			case ps != "" && path.Base(dir) == "kubelet" && e.Name() == "config.json":
				return os.WriteFile(p, []byte(ps), 0o600)
			case bundle != "" && e.Name() == "openshift-config-user-ca-bundle.crt" && filepath.Base(filepath.Dir(p)) == "anchors":
				return os.WriteFile(p, []byte(bundle), 0o600)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("renaming in %s: %w", dir, err)
		}
	}
	return nil
}

func skipHidden(e os.DirEntry) error {
	if e.IsDir() {
		return filepath.SkipDir
	}
	return nil
}

// regenerateHostKeys replaces the SSH host keys in hostDir as recert's server_ssh_keys.rs
// does; ctrDir is the directory as recert names it in its messages.
func regenerateHostKeys(hostDir, ctrDir string) error {
	if fi, err := os.Stat(hostDir); hostDir == "" || err != nil || !fi.IsDir() {
		return errors.New("regenerate_server_ssh_keys must exist")
	}
	old, _ := filepath.Glob(filepath.Join(hostDir, "ssh_host_*_key*"))
	if len(old) == 0 {
		return fmt.Errorf("regenerating new server SSH keys: removing old server SSH keys: No SSH server keys found in %s", ctrDir)
	}
	for _, k := range old {
		if err := os.WriteFile(k, []byte("regenerated by recert: "+path.Base(k)), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// oc imitates the OpenShift client (openshift/oc, kubectl's cmd/apply and cmd/get): it
// needs its --kubeconfig, apply -f DIR refuses a manifest without apiVersion or kind as
// kubectl's client-side validation does and prints one "KIND/NAME created" line per object,
// and get answers from the recorded objects (commands.outputs).
func oc(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"oc"}, args...)
	if len(args) < 2 || args[0] != "--kubeconfig" {
		return nil, fail(argv, 1, "error: no configuration has been provided")
	}
	if !exists(args[1]) {
		return nil, fail(argv, 1, "error: stat "+args[1]+": no such file or directory")
	}
	if len(args) == 5 && args[2] == "apply" && args[3] == "-f" {
		return ocApply(argv, args[4])
	}
	if len(args) == 9 && args[2] == "patch" && args[3] == "node" {
		return c.ocPatchNode(argv, args)
	}
	return c.recorded(strings.Join(argv, " "))
}

// labelKeyRE is a label key as the API server takes it (apimachinery
// pkg/util/validation/validation.go IsQualifiedName).
var labelKeyRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// ocPatchNode imitates oc patch node NAME --type merge -p PATCH (kubectl
// pkg/cmd/patch/patch.go RunPatch): the node must be one the API lists, the patch JSON,
// each label key valid (else the API server's 422); it prints "node/NAME patched".
func (c *commands) ocPatchNode(argv, args []string) ([]byte, error) {
	name := args[4]
	if args[5] != "--type" || args[6] != "merge" || args[7] != "-p" {
		return nil, fail(argv, 1, "error: unknown flag")
	}
	nodes, err := c.recorded("oc --kubeconfig " + args[1] + " get nodes -o json")
	if err != nil || !strings.Contains(string(nodes), `"name":"`+name+`"`) {
		return nil, fail(argv, 1, `Error from server (NotFound): nodes "`+name+`" not found`)
	}
	var patch struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(args[8]), &patch); err != nil {
		return nil, fail(argv, 1, "error: unable to parse \""+args[8]+"\": "+err.Error())
	}
	for k := range patch.Metadata.Labels {
		if !labelKeyRE.MatchString(k) {
			return nil, fail(argv, 1, `The Node "`+name+`" is invalid: metadata.labels: Invalid value: "`+k+`": name part must consist of alphanumeric characters`)
		}
	}
	return []byte("node/" + name + " patched\n"), nil
}

func ocApply(argv []string, dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fail(argv, 1, "error: the path \""+dir+"\" does not exist")
	}
	var out bytes.Buffer
	for _, e := range entries {
		if ext := path.Ext(e.Name()); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		var obj struct {
			APIVersion string                `yaml:"apiVersion"`
			Kind       string                `yaml:"kind"`
			Metadata   struct{ Name string } `yaml:"metadata"`
		}
		if err := yaml.Unmarshal(b, &obj); err != nil || obj.APIVersion == "" || obj.Kind == "" {
			return out.Bytes(), fail(argv, 1, fmt.Sprintf("error: error validating %q: error validating data: [apiVersion not set, kind not set]; "+
				"if you choose to ignore these errors, turn validation off with --validate=false", filepath.Join(dir, e.Name())))
		}
		fmt.Fprintf(&out, "%s/%s created\n", strings.ToLower(obj.Kind), obj.Metadata.Name)
	}
	return out.Bytes(), nil
}

// busyboxIP imitates busybox ip on the conformance OS (networking/libiproute: iplink.c
// do_set with up, down and mtu, ipaddress.c ipaddr_modify, iproute.c iproute_modify with
// via, dev, metric and table): it refuses an object or verb it
// does not know, an address without its prefix length and a route destination that is
// neither "default" nor a prefix, as get_prefix does ("an inet prefix is expected rather
// than ..."); show answers from the recorded output.
func busyboxIP(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"ip"}, args...)
	a := slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "-o" || s == "-6" })
	if len(a) < 2 {
		return nil, fail(argv, 1, "ip: need at least 2 arguments")
	}
	switch obj, verb := a[0], a[1]; {
	case verb == "show":
		return c.recorded(strings.Join(argv, " "))
	case obj == "link" && verb == "set" && len(a) == 4 && (a[3] == "up" || a[3] == "down"):
	case obj == "link" && verb == "set" && len(a) == 6 && a[2] == "dev" && a[4] == "mtu":
		if n, err := strconv.Atoi(a[5]); err != nil || n < 0 {
			return nil, fail(argv, 1, "ip: invalid argument '"+a[5]+"' to 'mtu'")
		}
	case obj == "addr" && verb == "flush" && len(a) >= 4 && a[2] == "dev":
	case obj == "addr" && verb == "add" && len(a) == 5 && a[3] == "dev":
		if _, err := netip.ParsePrefix(a[2]); err != nil {
			return nil, fail(argv, 1, "ip: an inet prefix is expected rather than \""+a[2]+"\"")
		}
	case obj == "route" && verb == "replace" && len(a) >= 3:
		if _, err := netip.ParsePrefix(a[2]); err != nil && a[2] != "default" {
			return nil, fail(argv, 1, "ip: an inet prefix is expected rather than \""+a[2]+"\"")
		}
		for i := 3; i+1 < len(a); i += 2 {
			if a[i] == "via" {
				if _, err := netip.ParseAddr(a[i+1]); err != nil {
					return nil, fail(argv, 1, "ip: an inet address is expected rather than \""+a[i+1]+"\"")
				}
			} else if a[i] != "dev" && a[i] != "metric" && a[i] != "table" {
				return nil, fail(argv, 1, "ip: invalid argument '"+a[i]+"' to 'ip'")
			}
		}
	default:
		return nil, fail(argv, 1, "ip: invalid argument '"+verb+"' to 'ip'")
	}
	return nil, nil
}

// busyboxHostname imitates busybox hostname NAME (networking/hostname.c): sethostname(2),
// which refuses a name longer than 64 bytes.
func busyboxHostname(_ *commands, args []string) ([]byte, error) {
	if len(args) != 1 || len(args[0]) > 64 || args[0] == "" {
		return nil, fail(append([]string{"hostname"}, args...), 1, "hostname: sethostname: Invalid argument")
	}
	return nil, nil
}

// updateCATrust imitates RHEL's update-ca-trust, the shell script of the ca-certificates
// package (src.fedoraproject.org/rpms/ca-certificates, file update-ca-trust: no command or
// "extract" is an extract, anything else the usage and a failure; set -eu stops at the first
// failing extract). Its `p11-kit extract --format=pem-bundle --filter=ca-anchors --overwrite
// --purpose server-auth $DEST/pem/tls-ca-bundle.pem` writes the anchors, the system's and
// those under /etc/pki/ca-trust/source/anchors, into that file, and fails when its directory
// is missing (p11-kit trust/save.c p11_save_open_file: "couldn't create file").
func updateCATrust(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"update-ca-trust"}, args...)
	if len(args) > 1 || len(args) == 1 && args[0] != "extract" {
		return nil, fail(argv, 1, "Error: Invalid command line")
	}
	out := filepath.Join(c.root, TrustExtractedDir, "pem/tls-ca-bundle.pem")
	if _, err := os.Stat(filepath.Dir(out)); err != nil {
		return nil, fail(argv, 1, "p11-kit: couldn't create file: "+out+": No such file or directory")
	}
	var bundle []byte
	anchors := filepath.Join(c.root, "/etc/pki/ca-trust/source/anchors")
	entries, _ := os.ReadDir(anchors)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(anchors, e.Name()))
		bundle = append(bundle, b...)
	}
	return nil, os.WriteFile(out, bundle, 0o444)
}

// recertProxyParse refuses what recert's config parser refuses in the proxy keys
// (src/config.rs RecertConfig::parse_from_config_file): a proxy that is not six parts split
// at '|' (src/ocp_postprocess/proxy_rename/args.rs Proxy::parse), a proxy_trusted_ca_bundle
// without a ':' or with a bundle that is no path and not certificates only
// (src/ocp_postprocess/additional_trust_bundle/params.rs ProxyAdditionalTrustBundle::parse,
// parse_additional_trust_bundle). "" when it accepts them.
func recertProxyParse(cfg map[string]any) string {
	if v, ok := cfg["proxy"].(string); ok {
		if n := len(strings.Split(v, "|")); n != 6 {
			return fmt.Sprintf("proxy %s: expected six parts separated by '|' in proxy argument, i.e. "+
				"'<http_proxy>|<https_proxy>|<no_proxy>|<status_http_proxy>|<status_https_proxy>|<status_no_proxy>', found %d", v, n)
		}
	}
	v, ok := cfg["proxy_trusted_ca_bundle"].(string)
	if !ok {
		return ""
	}
	_, bundle, found := strings.Cut(v, ":")
	switch {
	case !found:
		return "proxy_trusted_ca_bundle " + v + ": expected two parts separated by ':' in proxy additional trust bundle argument, found 1"
	case bundle == "":
		return ""
	case !strings.Contains(bundle, "\n"):
		return "proxy_trusted_ca_bundle: parsing additional trust bundle: additional_trust_bundle must exist"
	case strings.Contains(bundle, "PRIVATE KEY"):
		return "proxy_trusted_ca_bundle: parsing additional trust bundle: additional_trust_bundle must contain only certificates"
	case !strings.Contains(bundle, "-----BEGIN CERTIFICATE-----"):
		return "proxy_trusted_ca_bundle: parsing additional trust bundle: additional_trust_bundle must contain at least one certificate"
	}
	return ""
}

// recertProxyRename imitates recert's customizations for the proxy: the user-ca-bundle name
// takes no bundle and needs user_ca_bundle (src/ocp_postprocess.rs
// additional_trust_bundle_rename); /etc/mco/proxy.env among the customization files gets the
// status proxy's non-empty variables in place of its old ones
// (src/ocp_postprocess/proxy_rename/filesystem_rename.rs rename_proxy_env_file,
// utils.rs rename_proxy_env_file_contents).
func recertProxyRename(cfg map[string]any, mounts map[string]string) string {
	if v, _ := cfg["proxy_trusted_ca_bundle"].(string); v != "" {
		name, bundle, _ := strings.Cut(v, ":")
		_, userBundle := cfg["user_ca_bundle"].(string)
		switch {
		case name == "user-ca-bundle" && bundle != "":
			return "user-ca-bundle configmap name requires ca-bundle to be empty"
		case name == "user-ca-bundle" && !userBundle:
			return "proxy user-ca-bundle configmap name requires user-ca-bundle to be set"
		}
	}
	v, _ := cfg["proxy"].(string)
	files, _ := cfg["cluster_customization_files"].([]any)
	if v == "" || !slices.Contains(files, any("/etc/mco/proxy.env")) {
		return ""
	}
	parts := strings.Split(v, "|")
	h := inContainer(mounts, "/etc/mco/proxy.env")
	old, err := os.ReadFile(h)
	if err != nil {
		return "renaming proxy: reading proxy.env: " + err.Error()
	}
	var lines, oldLines []string
	if len(old) > 0 { // Rust's "".lines() yields no line, Go's Split one empty one
		oldLines = strings.Split(strings.TrimSuffix(string(old), "\n"), "\n")
	}
	for _, l := range oldLines {
		if !strings.HasPrefix(l, "HTTP_PROXY=") && !strings.HasPrefix(l, "HTTPS_PROXY=") && !strings.HasPrefix(l, "NO_PROXY=") {
			lines = append(lines, l)
		}
	}
	for i, k := range []string{"HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY="} {
		if parts[3+i] != "" {
			lines = append(lines, k+parts[3+i])
		}
	}
	if err := os.WriteFile(h, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "renaming proxy: writing proxy.env: " + err.Error()
	}
	return ""
}

// updateCACertificates imitates Debian's update-ca-certificates, the shell script of the
// ca-certificates package (salsa.debian.org/debian/ca-certificates, sbin/update-ca-certificates):
// an option it does not know prints the usage and exits 0 having done nothing; under set -e
// it stops when it cannot cd to /etc/ssl/certs; every *.crt found under
// /usr/local/share/ca-certificates (and no other name) is appended to
// /etc/ssl/certs/ca-certificates.crt, which is replaced; it prints its progress on stdout.
func updateCACertificates(c *commands, args []string) ([]byte, error) {
	for _, a := range args {
		if a != "--fresh" && a != "-f" && a != "--verbose" && a != "-v" {
			return []byte("update-ca-certificates: [--verbose] [--fresh]\n"), nil
		}
	}
	etc := filepath.Join(c.root, "/etc/ssl/certs")
	if _, err := os.Stat(etc); err != nil {
		return nil, fail(append([]string{"update-ca-certificates"}, args...), 2, "/usr/sbin/update-ca-certificates: 1: cd: can't cd to /etc/ssl/certs")
	}
	var bundle []byte
	added := 0
	local := filepath.Join(c.root, "/usr/local/share/ca-certificates")
	filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			b, _ := os.ReadFile(p)
			bundle, added = append(bundle, b...), added+1
		}
		return nil
	})
	out := fmt.Sprintf("Updating certificates in /etc/ssl/certs...\n%d added, 0 removed; done.\nRunning hooks in /etc/ca-certificates/update.d...\ndone.\n", added)
	return []byte(out), os.WriteFile(filepath.Join(etc, "ca-certificates.crt"), bundle, 0o644)
}
