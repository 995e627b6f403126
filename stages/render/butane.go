package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/coreos/butane/config"
	"github.com/coreos/butane/config/common"
	"github.com/coreos/vcontext/report"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// ButaneError is a Butane config that did not translate cleanly. Its message names the
// config and gives each problem as NAME:LINE:COL, the way compilers do.
type ButaneError struct {
	// Name is the fragment's label (or "fragments[i] (inline)") or the generated config's name.
	Name   string
	Err    error
	Report report.Report
}

func (e *ButaneError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "butane config %s: %v", e.Name, e.Err)
	for _, en := range e.Report.Entries {
		b.WriteString("\n  ")
		b.WriteString(e.Name)
		if l, c := en.Marker.Start(); l > 0 {
			fmt.Fprintf(&b, ":%d:%d", l, c)
		}
		fmt.Fprintf(&b, ": %s", en.Kind.String())
		if len(en.Context.Path) > 0 {
			fmt.Fprintf(&b, " at %s", en.Context.String())
		}
		fmt.Fprintf(&b, ": %s", en.Message)
	}
	return b.String()
}

func (e *ButaneError) Unwrap() error { return e.Err }

// yamlLine finds the "line N" that YAML syntax errors carry, to give them the same shape.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// butaneHeader is the part of a Butane config render looks at before translating it.
type butaneHeader struct {
	Variant  string    `yaml:"variant"`
	Version  string    `yaml:"version"`
	Metadata *struct{} `yaml:"metadata"`
}

// loadFragment reads the i-th fragment f and its header; name is how errors refer to it.
func loadFragment(opts Options, f Fragment, i int) (name string, src []byte, h butaneHeader, err error) {
	name = f.name(i)
	if src, err = readFragment(opts, f); err != nil {
		return name, nil, h, err
	}
	h, err = readHeader(name, src)
	return name, src, h, err
}

func readHeader(name string, src []byte) (butaneHeader, error) {
	var h butaneHeader
	if err := yaml.Unmarshal(src, &h); err != nil {
		return h, syntaxError(name, err)
	}
	if h.Variant == "" || h.Version == "" {
		return h, &ButaneError{Name: name, Err: errors.New("variant and version are required at the top (e.g. variant: fcos, version: 1.4.0)")}
	}
	return h, nil
}

func syntaxError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		// yaml.v3 reports lines but not columns for syntax errors.
		return &ButaneError{Name: name + ":" + m[1], Err: fmt.Errorf("YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))}
	}
	return &ButaneError{Name: name, Err: fmt.Errorf("YAML syntax: %s", msg)}
}

// translate runs Butane on src. raw asks for the bare Ignition config even from the openshift
// variant (which otherwise yields a MachineConfig as YAML). Butane's warnings fail the
// translation too (as `butane --strict` does): an unknown key is nearly always a typo that
// would otherwise vanish silently. Local file references are refused because no files
// directory is given: everything a config embeds must be in the config, so it is keyed.
func translate(name string, src []byte, raw bool) ([]byte, error) {
	out, r, err := config.TranslateBytes(src, common.TranslateBytesOptions{Raw: raw})
	if err != nil {
		var ue common.ErrUnmarshal
		if errors.As(err, &ue) {
			return nil, syntaxError(name, errors.New(ue.Detail))
		}
		return nil, &ButaneError{Name: name, Err: err, Report: r}
	}
	if len(r.Entries) > 0 {
		return nil, &ButaneError{Name: name, Err: errors.New("warnings are errors here"), Report: r}
	}
	return out, nil
}

// butaneOpenShiftVersion maps a release version (x.y or x.y.z) to the Butane openshift
// variant version for it (x.y.0).
func butaneOpenShiftVersion(release string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(release, "v"), ".")
	if len(parts) < 2 || parts[0] != "4" {
		return "", fmt.Errorf("%q: want an OpenShift 4 release such as 4.16 or 4.16.3", release)
	}
	v := parts[0] + "." + parts[1] + ".0"
	probe := fmt.Sprintf("variant: openshift\nversion: %s\nmetadata: {name: probe, labels: {machineconfiguration.openshift.io/role: master}}\n", v)
	if _, _, err := config.TranslateBytes([]byte(probe), common.TranslateBytesOptions{Raw: true}); err != nil {
		return "", fmt.Errorf("%q: the pinned Butane has no openshift %s variant: %w", release, v, err)
	}
	return v, nil
}

// MaxButaneFragment bounds a Butane fragment file, as blueprints' validation does.
const MaxButaneFragment = 1 << 20

// readFragment returns a fragment's Butane text.
func readFragment(opts Options, f Fragment) ([]byte, error) {
	if f.Inline != "" {
		return []byte(f.Inline), nil
	}
	b, err := smallfile.Read(opts.HostFiles[f.File], MaxButaneFragment)
	if err != nil {
		return nil, fmt.Errorf("reading Butane fragment %s: %w", f.File, err)
	}
	return b, nil
}
