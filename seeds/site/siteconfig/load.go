package siteconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// MaxFileSize bounds a site config file; real ones are a few KiB (with inlined files, a few
// hundred).
const MaxFileSize = 4 << 20

// Load reads, decodes and validates the site config at path, and reads the files it
// references (relative to its directory) into Spec.PullSecret and Spec.Manifests. An
// image-based installer image-based-config.yaml (with the install-config.yaml beside it)
// is converted. When the
// input is at fault it returns a *strictyaml.ValidationErrors listing every problem.
func Load(path string) (*SiteConfig, error) {
	data, err := smallfile.Read(path, MaxFileSize)
	if err != nil {
		return nil, strictyaml.FileProblem(path, fmt.Sprintf("cannot read site config: %v", unwrapPathError(err)))
	}
	if isImageBasedConfig(data) {
		return parseImageBasedConfig(data, path, filepath.Dir(path))
	}
	return Parse(data, path, filepath.Dir(path))
}

// Parse decodes and validates a site config held in memory; name names it in messages.
// File references resolve against dir; dir "" means the config must be self-contained (as
// on a medium) and any file reference is a problem.
func Parse(data []byte, name, dir string) (sc *SiteConfig, err error) {
	defer func() {
		// Hostile input must never crash the caller (the hook runs at boot).
		if r := recover(); r != nil {
			sc, err = nil, strictyaml.FileProblem(name, fmt.Sprintf("internal error reading the site config (a bug in snofactory): %v", r))
		}
	}()
	if len(data) > MaxFileSize {
		return nil, strictyaml.FileProblem(name, fmt.Sprintf("file is larger than %d bytes", MaxFileSize))
	}
	if notSiteConfig(data) {
		// Another file (a password file, say) is not quoted back key by key.
		return nil, strictyaml.FileProblem(name, "is not a site config: it has neither apiVersion nor kind; a site config starts with apiVersion: "+APIVersion+" and kind: "+Kind)
	}
	d := strictyaml.NewDecoder(name, "site config", []string{APIVersion}, reflect.TypeOf(SiteConfig{}))
	d.SetUnsupported(unsupportedNMState)
	root, ok := d.Parse(data)
	if !ok {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	sc = &SiteConfig{dir: dir}
	d.Decode(root, sc)
	if d.Aborted() {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	c := &checker{dir: dir, present: func(p string) bool { return d.ValueNode(p) != nil }}
	sc.validate(c)
	for _, fe := range c.Errs {
		if !d.Report(fe.Path, fe.Message, fe.Hint) {
			return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// notSiteConfig tells a YAML mapping with neither apiVersion nor kind at its top: some
// other file, whose content the problems must not echo.
func notSiteConfig(data []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil || top == nil {
		return false // a syntax error or a non-mapping: the decoder reports it by position
	}
	_, hasVersion := top["apiVersion"]
	_, hasKind := top["kind"]
	return !hasVersion && !hasKind
}

// nmstate keys this version leaves out on purpose, by where they appear.
var (
	indexRE         = regexp.MustCompile(`\[\d+\]`)
	unsupportedHere = map[string]bool{"spec.network": true, "spec.network.interfaces[]": true, "spec.network.interfaces[].ipv4": true, "spec.network.interfaces[].ipv6": true,
		"spec.network.interfaces[].link-aggregation": true, "spec.network.interfaces[].vlan": true, "spec.network.routes": true, "spec.network.routes.config[]": true, "spec.network.dns-resolver": true}
	unsupportedFeature = map[string]string{"bridge": "Linux bridges", "ovs-db": "OVS", "ovn": "OVN bridge mappings", "route-rules": "route rules", "ethtool": "ethtool settings", "ports-config": "per-port bond settings"}
)

// unsupportedNMState explains an unknown key under spec.network: nmstate has it, this
// version does not apply it.
func unsupportedNMState(path string) (string, string) {
	parent, key := strictyaml.Parent(path), path[strings.LastIndex(path, ".")+1:]
	if !unsupportedHere[indexRE.ReplaceAllString(parent, "[]")] {
		return "", ""
	}
	what := unsupportedFeature[key]
	if what == "" {
		what = fmt.Sprintf("the nmstate setting %q", key)
	}
	return what + " " + notSupported, supportedHint
}

const (
	notSupported  = "not supported by the reconfiguration hook in this version"
	supportedHint = "supported: ethernet, bond (link-aggregation mode, port, options) and vlan (base-iface, id, protocol) interfaces with state, mac-address, mtu and " +
		"ipv4/ipv6 (enabled, dhcp, autoconf, address); routes.config (destination, next-hop-address, next-hop-interface, metric, table-id); dns-resolver.config (server, search)"
)

var errTooLarge = errors.New("file too large")

// unwrapPathError drops the path from a file error: the messages built on it name the file
// the way the user wrote it.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
