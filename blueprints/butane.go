package blueprints

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/coreos/butane/config"
	"github.com/coreos/butane/config/common"
	"github.com/coreos/go-semver/semver"
	vreport "github.com/coreos/vcontext/report"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// maxButaneEntries bounds how many Butane findings are reported per fragment.
const maxButaneEntries = 20

// maxButaneFile bounds a Butane fragment file; configs embed small files, not payloads.
const maxButaneFile = 1 << 20

// fcosForIgnition names the Butane fcos version that emits each Ignition spec, for hints.
var fcosForIgnition = map[string]string{"3.3.0": "1.4.0", "3.4.0": "1.5.0", "3.5.0": "1.6.0"}

// checkButane translates each user fragment the way the render stage does (Butane with
// warnings as errors and no files directory) so that a broken fragment is reported by
// validate, at its position, instead of halfway through a build. Inline fragments written
// as literal blocks (inline: |) get positions inside the blueprint; file fragments name
// the line in their file.
func (d *decoder) checkButane(bp *v1alpha1.Blueprint, data []byte) {
	if len(bp.Spec.Butane) > v1alpha1.MaxButane {
		return // Validate reported the list as too long
	}
	for i, f := range bp.Spec.Butane {
		path := fmt.Sprintf("spec.butane[%d]", i)
		var src []byte
		var where func(line, col int64) (strictyaml.Position, string)
		switch {
		case f.File != "" && f.Inline == "":
			path += ".file"
			if d.Failed(path) {
				continue
			}
			b, err := smallfile.Read(bp.Resolved.Butane[i], maxButaneFile)
			if errors.Is(err, smallfile.ErrTooLarge) {
				d.AddAt(d.Locate(path), path, fmt.Sprintf("the Butane file %s is larger than %d bytes", bp.Resolved.Butane[i], maxButaneFile),
					"Butane embeds small files; ship large content as images or manifests")
				continue
			}
			if err != nil {
				continue // Validate has reported a missing or unreadable file
			}
			src = b
			pos := d.Locate(path)
			where = func(line, col int64) (strictyaml.Position, string) {
				if line > 0 {
					return pos, fmt.Sprintf("%s:%d:%d: ", f.File, line, col)
				}
				return pos, f.File + ": "
			}
		case f.Inline != "" && f.File == "":
			path += ".inline"
			if d.Failed(path) {
				continue
			}
			src = []byte(f.Inline)
			node := d.ValueNode(path)
			pos := d.Locate(path)
			literal := node != nil && node.Style == yaml.LiteralStyle
			indent := 0
			if literal {
				indent = blockIndent(data, node.Line)
			}
			where = func(line, col int64) (strictyaml.Position, string) {
				if literal && line > 0 {
					// A literal block's content starts on the line after the indicator,
					// indented; map the fragment's line and column into the blueprint.
					return strictyaml.Position{Line: node.Line + int(line), Col: indent + int(col)}, ""
				}
				if line > 0 {
					return pos, fmt.Sprintf("inline fragment line %d col %d: ", line, col)
				}
				return pos, ""
			}
		default:
			continue // Validate reports items without exactly one of file and inline
		}
		d.butaneProblems(bp, path, src, where)
	}
}

// butaneReport records one problem of a fragment at a line and column inside it (0 when
// unknown).
type butaneReport func(line, col int64, msg, hint string)

// butaneHead is the top of a Butane config, read before translating it.
type butaneHead struct {
	Variant string `yaml:"variant"`
	Version string `yaml:"version"`
}

func (d *decoder) butaneProblems(bp *v1alpha1.Blueprint, path string, src []byte, where func(line, col int64) (strictyaml.Position, string)) {
	report := func(line, col int64, msg, hint string) {
		pos, prefix := where(line, col)
		d.AddAt(pos, path, prefix+msg, hint)
	}
	head, ok := checkButaneHead(bp, src, report)
	if !ok {
		return
	}
	out, rep, err := translateButane(src)
	reportButane(bp, err, rep, report)
	if err != nil || len(rep.Entries) > 0 {
		return
	}
	switch bp.Spec.Target.Type {
	case oskind.CoreOS:
		checkEmittedSpec(bp, head, out, report)
	case oskind.OpenShift:
		checkOwnedFiles(src, out, report)
	}
}

// checkOwnedFiles reports each file or unit an openshift fragment's MachineConfig owns that
// the seal or the site hook changes, at the line of the fragment that names it.
func checkOwnedFiles(src, out []byte, report butaneReport) {
	nc, err := loadNodeChanges()
	if err != nil {
		report(0, 0, err.Error(), "")
		return
	}
	paths, err := ignitionPaths(out)
	if err != nil {
		report(0, 0, "Butane: "+err.Error(), "")
		return
	}
	var meta struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	_ = yaml.Unmarshal(src, &meta) // Butane has read it already; a missing name stays empty
	for _, p := range paths {
		by := nc.owners(p)
		if len(by) == 0 {
			continue
		}
		msg, hint := ownedProblem(suggest.Clip(meta.Metadata.Name), p, by)
		line, col := findLine(src, p)
		report(line, col, msg, hint)
	}
}

// spellings are the ways a MachineConfig spells out node path p, most precise first: the
// path, and for a unit or drop-in under /etc/systemd/system the names it is declared by.
func spellings(p string) []string {
	out := []string{p}
	if rest, ok := strings.CutPrefix(p, "/etc/systemd/system/"); ok {
		out = append(out, strings.TrimSuffix(path.Base(rest), ".d"), strings.Split(rest, ".d/")[0])
	}
	return out
}

// findLine is the 1-based line and column where a fragment names node path p, a unit's
// path by the unit's name; 0, 0 when it does not spell it out.
func findLine(src []byte, p string) (int64, int64) {
	for _, n := range spellings(p) {
		for i, line := range strings.Split(string(src), "\n") {
			if j := strings.Index(line, n); j >= 0 {
				return int64(i + 1), int64(j + 1)
			}
		}
	}
	return 0, 0
}

// checkButaneHead reads the fragment's variant and version and checks that the variant can
// configure the target; it reports false when translating would only add noise.
func checkButaneHead(bp *v1alpha1.Blueprint, src []byte, report butaneReport) (butaneHead, bool) {
	var head butaneHead
	if err := yaml.Unmarshal(src, &head); err != nil {
		line, msg := yamlErrorLine(err)
		report(line, 1, "Butane: invalid YAML: "+msg, "")
		return head, false
	}
	kind := bp.Spec.Target.Type
	switch {
	case head.Variant == "" || head.Version == "":
		report(0, 0, "Butane: variant and version are required at the top", butaneHint(bp))
		return head, false
	case kind == oskind.OpenShift && head.Variant != "openshift":
		report(0, 0, fmt.Sprintf("Butane variant %s cannot configure an OpenShift node", suggest.Clip(head.Variant)), "use variant: openshift with the release's version, e.g. 4.16.0")
		return head, false
	case kind == oskind.CoreOS && head.Variant == "openshift":
		report(0, 0, "Butane variant openshift makes MachineConfigs, not a CoreOS config", butaneHint(bp))
		return head, false
	}
	return head, true
}

// reportButane reports Butane's error and its findings, in line order and at most
// maxButaneEntries of them.
func reportButane(bp *v1alpha1.Blueprint, err error, rep vreport.Report, report butaneReport) {
	if err != nil {
		var ue common.ErrUnmarshal
		switch {
		case errors.As(err, &ue):
			report(0, 0, "Butane: invalid YAML: "+ue.Detail, "")
		case len(rep.Entries) > 0:
			// The entries below say what is wrong and where; "config is invalid" adds nothing.
		case strings.Contains(err.Error(), "version") || strings.Contains(err.Error(), "variant"):
			report(0, 0, "Butane: "+err.Error(), butaneHint(bp))
		default:
			report(0, 0, "Butane: "+err.Error(), "")
		}
	}
	entries := rep.Entries
	sort.SliceStable(entries, func(i, j int) bool { return markerLine(entries[i]) < markerLine(entries[j]) })
	if len(entries) > maxButaneEntries {
		report(0, 0, fmt.Sprintf("Butane reports %d problems; the first %d follow", len(entries), maxButaneEntries), "")
		entries = entries[:maxButaneEntries]
	}
	for _, e := range entries {
		var line, col int64
		if e.Marker.StartP != nil {
			line, col = e.Marker.StartP.Line, e.Marker.StartP.Column
		}
		msg := e.Message
		if e.Context.Len() > 0 {
			msg = e.Context.String() + ": " + msg
		}
		hint := ""
		if strings.Contains(e.Message, "files directory") {
			hint = "fragments are translated without a files directory: put the content inline (contents.inline) or fetch it from a URL (contents.source)"
		}
		// Butane's warnings fail the render too (as butane --strict): nearly always a typo.
		report(line, col, "Butane "+e.Kind.String()+": "+msg, hint)
	}
}

// checkEmittedSpec reports a coreos fragment whose Ignition output is newer than the spec
// the target's Ignition reads.
func checkEmittedSpec(bp *v1alpha1.Blueprint, head butaneHead, out []byte, report butaneReport) {
	var ign struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	want := bp.Spec.Target.IgnitionVersion
	if json.Unmarshal(out, &ign) != nil || want == "" {
		return
	}
	got, gerr := semver.NewVersion(ign.Ignition.Version)
	max, merr := semver.NewVersion(want)
	if gerr == nil && merr == nil && max.LessThan(*got) {
		report(0, 0, fmt.Sprintf("Butane %s %s emits Ignition spec %s, newer than the target's %s", suggest.Clip(head.Variant), suggest.Clip(head.Version), got, want), butaneHint(bp))
	}
}

// translateButane runs Butane, turning a panic on hostile input into an error.
func translateButane(src []byte) (out []byte, rep vreport.Report, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Butane failed on this fragment: %v", r)
		}
	}()
	return config.TranslateBytes(src, common.TranslateBytesOptions{Raw: true})
}

func butaneHint(bp *v1alpha1.Blueprint) string {
	if bp.Spec.Target.Type == oskind.CoreOS {
		if v, ok := fcosForIgnition[bp.Spec.Target.IgnitionVersion]; ok {
			return fmt.Sprintf("for Ignition %s start the fragment with variant: fcos and version: %s (or older)", bp.Spec.Target.IgnitionVersion, v)
		}
	}
	return "start the fragment with variant: and version:"
}

// blockIndent is the indentation of a literal block whose indicator is on the 1-based line
// given: YAML takes it from the first non-blank content line.
func blockIndent(data []byte, indicatorLine int) int {
	rest := string(data)
	for i := 0; i < indicatorLine; i++ {
		j := strings.IndexByte(rest, '\n')
		if j < 0 {
			return 0
		}
		rest = rest[j+1:]
	}
	for rest != "" {
		line, next, _ := strings.Cut(rest, "\n")
		if t := strings.TrimLeft(line, " "); t != "" {
			return len(line) - len(t)
		}
		rest = next
	}
	return 0
}

// yamlErrorLine splits "yaml: line N: msg" into N and msg.
func yamlErrorLine(err error) (int64, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int64
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			return line, rest
		}
	}
	return 0, msg
}

func markerLine(e vreport.Entry) int64 {
	if e.Marker.StartP == nil {
		return 0
	}
	return e.Marker.StartP.Line
}
