package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clarketm/json"
	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ignition/v2/config/merge"
	"github.com/coreos/ignition/v2/config/util"
	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v33 "github.com/coreos/ignition/v2/config/v3_3"
	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/vcontext/report"
)

// spec is one Ignition spec version: how to parse it strictly, how to parse an older config
// up into it, and which Butane fcos version emits it.
type spec struct {
	version string
	// fcos is the Butane fcos variant version whose output is this spec.
	fcos string
	// parse accepts exactly this version; compatible also translates older 3.x configs up.
	parse      func([]byte) (any, report.Report, error)
	compatible func([]byte) (any, report.Report, error)
}

func wrap[T any](f func([]byte) (T, report.Report, error)) func([]byte) (any, report.Report, error) {
	return func(b []byte) (any, report.Report, error) {
		c, r, err := f(b)
		return c, r, err
	}
}

// specs are the spec versions render emits. 3.2.0 is what openshift-install writes.
var specs = map[string]spec{
	"3.2.0": {"3.2.0", "1.3.0", wrap(v32.Parse), wrap(v32.ParseCompatibleVersion)},
	"3.3.0": {"3.3.0", "1.4.0", wrap(v33.Parse), wrap(v33.ParseCompatibleVersion)},
	"3.4.0": {"3.4.0", "1.5.0", wrap(v34.Parse), wrap(v34.ParseCompatibleVersion)},
	"3.5.0": {"3.5.0", "1.6.0", wrap(v35.Parse), wrap(v35.ParseCompatibleVersion)},
}

func specVersions() []string {
	var v []string
	for k := range specs {
		v = append(v, k)
	}
	slices.Sort(v)
	return v
}

// ReportError is an Ignition or Butane validation failure with every problem's path and
// position, as the libraries report them.
type ReportError struct {
	What   string // what was being validated, e.g. "ignition/config.ign"
	Err    error
	Report report.Report
}

func (e *ReportError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.What, e.Err)
	if s := strings.TrimSpace(e.Report.String()); s != "" {
		msg += "\n" + indent(s)
	}
	return msg
}

func (e *ReportError) Unwrap() error { return e.Err }

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// configVersion returns the spec version a raw Ignition config declares.
func configVersion(raw []byte) (string, error) {
	v, _, err := util.GetConfigVersion(raw)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// validateIgnition parses raw strictly as the spec version it declares, which must be one
// render knows, and fails with every error the library reports. With strict, warnings fail
// too (render's own configs leave the stage clean); otherwise they are returned, one line
// each, for the caller to log (openshift-install's own configs carry some, e.g. an enabled
// unit without an [Install] section).
func validateIgnition(what string, raw []byte, strict bool) (version string, warnings []string, err error) {
	version, err = configVersion(raw)
	if err != nil {
		return "", nil, &ReportError{What: what, Err: err}
	}
	s, ok := specs[version]
	if !ok {
		return "", nil, &ReportError{What: what, Err: fmt.Errorf("ignition spec %s is not one render validates (%s)", version, strings.Join(specVersions(), ", "))}
	}
	_, r, err := s.parse(raw)
	if err != nil {
		return "", nil, &ReportError{What: what, Err: err, Report: r}
	}
	if strict && len(r.Entries) > 0 {
		return "", nil, &ReportError{What: what, Err: fmt.Errorf("ignition %s config has warnings", version), Report: r}
	}
	for _, e := range r.Entries {
		warnings = append(warnings, e.String())
	}
	return version, warnings, nil
}

// ignitionMerger merges Ignition configs, in order, in one target spec version.
type ignitionMerger struct {
	spec   spec
	merged any
}

func newMerger(version string) (*ignitionMerger, error) {
	s, ok := specs[version]
	if !ok {
		return nil, fmt.Errorf("ignition spec %q: want one of %s", version, strings.Join(specVersions(), ", "))
	}
	return &ignitionMerger{spec: s}, nil
}

// add merges raw on top of what was added before (later entries win where Ignition's merge
// rules say a child replaces a parent's). raw may be an older 3.x spec; a newer one is an error.
func (m *ignitionMerger) add(what string, raw []byte) error {
	v, err := configVersion(raw)
	if err != nil {
		return &ReportError{What: what, Err: err}
	}
	if semver.New(m.spec.version).LessThan(*semver.New(v)) {
		return &ReportError{What: what, Err: fmt.Errorf("ignition spec %s is newer than the target's %s", v, m.spec.version)}
	}
	cfg, r, err := m.spec.compatible(raw)
	if err != nil {
		return &ReportError{What: what, Err: err, Report: r}
	}
	if m.merged == nil {
		m.merged = cfg
		return nil
	}
	out, _ := merge.MergeStructTranscribe(m.merged, cfg)
	m.merged = out
	return nil
}

// bytes returns the merged config as compact JSON, validated. Field order follows the
// structs and empty sections are left out (clarketm/json honours omitempty on structs, as
// Butane does), so the same input gives the same bytes.
func (m *ignitionMerger) bytes(what string) ([]byte, error) {
	if m.merged == nil {
		m.merged, _, _ = m.spec.parse([]byte(`{"ignition":{"version":"` + m.spec.version + `"}}`))
	}
	b, err := json.Marshal(m.merged)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", what, err)
	}
	if _, _, err := validateIgnition(what, b, true); err != nil {
		return nil, err
	}
	return b, nil
}
