package drift

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The recorded list of what the machine-config-operator's own templates put on a single-node
// master. `go test ./test/drift -run TestMCOTemplateList -mco-git DIR` rewrites it from a git
// directory of openshift/machine-config-operator (testdata/README.md says how to get one).
var (
	mcoGit    = flag.String("mco-git", "", "rewrite testdata/mco-templates.txt from this machine-config-operator git directory")
	mcoCommit = flag.String("mco-commit", "7ff337a4ffac8e7562692181178ede61e4b2eec5", "with -mco-git: the commit to read")
)

const mcoList = "testdata/mco-templates.txt"

// mcoPlatformDirs are the template directories the MCO's template controller merges, in order,
// for a single-node cluster on platform None: machine-config-operator
// pkg/controller/template/render.go getPaths (_base, then the platform's own directory, then
// sno for the SingleReplica control-plane topology; on-prem and cloud-platform-alt-dns do not
// apply to platform None).
var mcoPlatformDirs = []string{"_base", "none", "sno"}

// mcoConstants resolves the one template constant a path uses: machine-config-operator
// pkg/constants/constants.go APIServerURLFile (render.go renderTemplate fills .Constants from it).
var mcoConstants = map[string]string{"{{.Constants.APIServerURLFile}}": "/etc/kubernetes/apiserver-url.env"}

// mcoEntry is one line of the recorded list.
type mcoEntry struct {
	Kind          string // file, unit (a unit with contents) or dropin
	Path          string
	Attr          string // file: its mode; unit: enabled=true|false|-, or mask
	MachineConfig string
	Template      string
	Conditional   bool // the whole template is inside {{if}}: some clusters get nothing from it
}

func (e mcoEntry) String() string {
	s := strings.Join([]string{e.Kind, e.Path, e.Attr, e.MachineConfig, e.Template}, "\t")
	if e.Conditional {
		s += "\tif"
	}
	return s
}

// TestMCOTemplateList reads the recorded list (and, with -mco-git, first regenerates it).
func TestMCOTemplateList(t *testing.T) {
	if *mcoGit != "" {
		entries, err := mcoTemplateEntries(*mcoGit, *mcoCommit)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeMCOList(mcoList, *mcoCommit, entries); err != nil {
			t.Fatal(err)
		}
	}
	list, err := readMCOList(mcoList)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]mcoEntry{}
	for _, e := range list {
		entries[e.Path] = e
	}
	// The files this check exists for must be on the list, each from its template.
	for p, tmpl := range map[string]string{
		"/var/lib/kubelet/config.json":                      "templates/common/_base/files/pull-secret.yaml",
		"/etc/kubernetes/apiserver-url.env":                 "templates/common/_base/files/apiserver-url-env.yaml",
		"/etc/mco/proxy.env":                                "templates/common/_base/files/etc-mco-proxy.yaml",
		"/etc/systemd/system/kubelet.service":               "templates/master/01-master-kubelet/_base/units/kubelet.service.yaml",
		"/etc/dnsmasq.conf":                                 "templates/common/sno/files/sno-dnsmasq.conf.yaml",
		"/etc/systemd/system/crio.service.d/01-kubens.conf": "templates/common/_base/units/crio.service-kubens.yaml",
	} {
		if e, ok := entries[p]; !ok || e.Template != tmpl {
			t.Errorf("%s: recorded %+v, want it from %s", p, e, tmpl)
		}
	}
}

// mcoTemplateEntries lists what templates/master/** and templates/common/** render for the
// master pool, imitating pkg/controller/template/render.go: GenerateMachineConfigsForRole
// makes one MachineConfig per directory under templates/master (00-master,
// 01-master-container-runtime, 01-master-kubelet) and adds templates/common to the first one
// only; generateMachineConfigForName walks the platform directories in order and a template
// of the same file name in a later directory replaces the earlier one (filterTemplates keys
// by file name; an empty template removes it).
func mcoTemplateEntries(gitDir, commit string) ([]mcoEntry, error) {
	out, err := exec.Command("git", "-C", gitDir, "ls-tree", "-r", "--name-only", commit, "templates/master", "templates/common").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the templates of %s at %s: %w", gitDir, commit, err)
	}
	all := strings.Fields(string(out))
	var names []string
	for _, p := range all {
		if parts := strings.Split(p, "/"); len(parts) > 2 && parts[1] == "master" && !slices.Contains(names, parts[2]) {
			names = append(names, parts[2])
		}
	}
	sort.Strings(names)
	var entries []mcoEntry
	for i, name := range names {
		var dirs []string
		if i == 0 {
			for _, d := range mcoPlatformDirs {
				dirs = append(dirs, "templates/common/"+d)
			}
		}
		for _, d := range mcoPlatformDirs {
			dirs = append(dirs, "templates/master/"+name+"/"+d)
		}
		chosen := chooseTemplates(all, dirs)
		for _, p := range sortedKeys(chosen) {
			body, err := exec.Command("git", "-C", gitDir, "show", commit+":"+chosen[p]).Output()
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", chosen[p], err)
			}
			entries = append(entries, templateEntries(name, chosen[p], string(body))...)
		}
	}
	return entries, nil
}

// chooseTemplates maps "files/NAME" and "units/NAME" to the template that wins, the last
// directory holding that name.
func chooseTemplates(all, dirs []string) map[string]string {
	chosen := map[string]string{}
	for _, d := range dirs {
		for _, p := range all {
			rest, ok := strings.CutPrefix(p, d+"/")
			if !ok || path.Base(rest) == "OWNERS" {
				continue
			}
			if kind, _, _ := strings.Cut(rest, "/"); kind == "files" || kind == "units" {
				chosen[kind+"/"+path.Base(rest)] = p
			}
		}
	}
	return chosen
}

var (
	topPath    = regexp.MustCompile(`(?m)^path:\s*"?([^"\s]+)"?`)
	topMode    = regexp.MustCompile(`(?m)^mode:\s*(\d+)`)
	topName    = regexp.MustCompile(`(?m)^name:\s*"?([^"\s]+)"?`)
	topEnabled = regexp.MustCompile(`(?m)^enabled:\s*(true|false)`)
	topMask    = regexp.MustCompile(`(?m)^mask:\s*true`)
	topContent = regexp.MustCompile(`(?m)^contents:`)
	dropinName = regexp.MustCompile(`(?m)^\s*-\s*name:\s*"?([^"\s]+)"?`)
)

// templateEntries reads one template's top-level keys (the MCO's templates are YAML with Go
// template actions, so they are read by line, not parsed). A unit's file is listed only when
// the template has contents: checkV3Unit returns before looking at an empty unit.
func templateEntries(mc, tmpl, body string) []mcoEntry {
	cond := strings.HasPrefix(strings.TrimSpace(stripComments(body)), "{{")
	if strings.Contains(tmpl, "/files/") {
		m := topPath.FindStringSubmatch(body)
		if m == nil {
			return nil
		}
		p := m[1]
		if c, ok := mcoConstants[p]; ok {
			p = c
		}
		mode := "0644" // the MCO's defaultFilePermissions when a template gives none
		if mm := topMode.FindStringSubmatch(body); mm != nil {
			mode = mm[1]
		}
		return []mcoEntry{{"file", p, mode, mc, tmpl, cond}}
	}
	m := topName.FindStringSubmatch(body)
	if m == nil {
		return nil
	}
	unit := m[1]
	var out []mcoEntry
	if topContent.MatchString(body) {
		attr := "enabled=-"
		if e := topEnabled.FindStringSubmatch(body); e != nil {
			attr = "enabled=" + e[1]
		}
		if topMask.MatchString(body) {
			attr = "mask"
		}
		out = append(out, mcoEntry{"unit", "/etc/systemd/system/" + unit, attr, mc, tmpl, cond})
	}
	if _, dropins, ok := strings.Cut(body, "\ndropins:"); ok {
		for _, d := range dropinName.FindAllStringSubmatch(dropins, -1) {
			out = append(out, mcoEntry{"dropin", "/etc/systemd/system/" + unit + ".d/" + d[1], "-", mc, tmpl, cond})
		}
	}
	return out
}

func stripComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func writeMCOList(file, commit string, entries []mcoEntry) error {
	var b strings.Builder
	fmt.Fprintf(&b, `# What machine-config-operator %s's own templates put on a single-node master
# (platform None, SingleReplica topology): templates/common and templates/master, directories
# %s in that order, the last template of a name winning (pkg/controller/template/render.go).
# Written by: go test ./test/drift -run TestMCOTemplateList -mco-git DIR (testdata/README.md).
# Columns: kind (file | unit | dropin), node path, mode or unit state, MachineConfig, template,
# and "if" when the whole template is conditional (some clusters get nothing from it).
`, commit, strings.Join(mcoPlatformDirs, ", "))
	for _, e := range entries {
		b.WriteString(e.String() + "\n")
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// readMCOList reads the recorded list.
func readMCOList(file string) ([]mcoEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mcoEntry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) < 5 || len(c) > 6 {
			return nil, fmt.Errorf("%s:%d: want 5 or 6 tab-separated columns: %q", file, n, line)
		}
		out = append(out, mcoEntry{Kind: c[0], Path: c[1], Attr: c[2], MachineConfig: c[3], Template: c[4], Conditional: len(c) == 6})
	}
	return out, sc.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
