package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Unit is one enabled systemd service found under an installed root, with what the
// unit runner needs of it. Paths are inside the root.
type Unit struct {
	Name string
	// Path is the unit file, or "" when the unit is enabled but has no file (a preset
	// for a service this OS does not ship).
	Path string
	// Type is the service type; empty in the file means "simple".
	Type string
	// ExecStartPre, ExecStart and ExecStartPost are the command lines, in order, with
	// systemd's prefixes ("-", "@", "+", "!", "!!", ":") still on them.
	ExecStartPre, ExecStart, ExecStartPost []string
	// Environment holds the unit's Environment= assignments (KEY=VALUE), in order.
	Environment []string
}

// unitDirs and presetDirs are where an installed root keeps units and presets, the
// first place first, as systemd looks for them.
func unitDirs() []string {
	return []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}
}

func presetDirs() []string {
	return []string{"/etc/systemd/system-preset", "/usr/lib/systemd/system-preset", "/lib/systemd/system-preset"}
}

// EnabledUnits lists the services enabled under root, sorted by name: those a preset
// enables (Ignition writes "enable NAME" to /etc/systemd/system-preset/20-ignition.preset
// for `enabled: true`) and those linked from a *.wants or *.requires directory. Only
// .service units are listed: this OS has no timers, sockets or mounts to start.
func EnabledUnits(root string) ([]Unit, error) {
	names := map[string]bool{}
	if err := wantedUnits(root, names); err != nil {
		return nil, err
	}
	if err := presetUnits(root, names); err != nil {
		return nil, err
	}
	sorted := make([]string, 0, len(names))
	for n, on := range names {
		if on && strings.HasSuffix(n, ".service") {
			sorted = append(sorted, n)
		}
	}
	sort.Strings(sorted)
	units := make([]Unit, 0, len(sorted))
	for _, n := range sorted {
		u, err := loadUnit(root, n)
		if err != nil {
			return nil, err
		}
		units = append(units, u)
	}
	return units, nil
}

// wantedUnits marks every unit linked from a .wants/ or .requires/ directory.
func wantedUnits(root string, names map[string]bool) error {
	for _, dir := range unitDirs() {
		for _, kind := range []string{"*.wants", "*.requires"} {
			links, err := filepath.Glob(filepath.Join(root, dir, kind, "*"))
			if err != nil {
				return fmt.Errorf("finding wanted units under %s: %w", root, err)
			}
			for _, l := range links {
				names[filepath.Base(l)] = true
			}
		}
	}
	return nil
}

// presetUnits applies the preset files: files sorted by name across the preset
// directories (a name in /etc hides the same name further down), and within them the
// first line whose pattern matches a unit decides it. Only units a preset enables are
// added; a preset's "disable" does not undo a .wants link, as in systemd.
func presetUnits(root string, names map[string]bool) error {
	files := map[string]string{}
	dirs := presetDirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		ps, err := filepath.Glob(filepath.Join(root, dirs[i], "*.preset"))
		if err != nil {
			return fmt.Errorf("finding presets under %s: %w", root, err)
		}
		for _, p := range ps {
			files[filepath.Base(p)] = p
		}
	}
	bases := make([]string, 0, len(files))
	for b := range files {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	decided := map[string]bool{}
	known, err := unitFiles(root)
	if err != nil {
		return err
	}
	for _, b := range bases {
		rules, err := readPreset(files[b])
		if err != nil {
			return err
		}
		for _, r := range rules {
			for _, n := range r.match(known) {
				if !decided[n] {
					decided[n] = true
					if r.enable {
						names[n] = true
					}
				}
			}
		}
	}
	return nil
}

type presetRule struct {
	enable  bool
	pattern string
}

// match returns the units the rule applies to: the known unit files its glob matches,
// or the literal name (a preset may enable a unit that has no file here).
func (r presetRule) match(known []string) []string {
	if !strings.ContainsAny(r.pattern, "*?[") {
		return []string{r.pattern}
	}
	var out []string
	for _, k := range known {
		if ok, _ := path.Match(r.pattern, k); ok {
			out = append(out, k)
		}
	}
	return out
}

func readPreset(p string) ([]presetRule, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading preset: %w", err)
	}
	defer f.Close()
	var rules []presetRule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "enable":
			rules = append(rules, presetRule{enable: true, pattern: fields[1]})
		case "disable":
			rules = append(rules, presetRule{pattern: fields[1]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading preset %s: %w", p, err)
	}
	return rules, nil
}

// unitFiles lists the unit file names present under root.
func unitFiles(root string) ([]string, error) {
	var out []string
	for _, dir := range unitDirs() {
		es, err := os.ReadDir(filepath.Join(root, dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing units under %s: %w", root, err)
		}
		for _, e := range es {
			if !e.IsDir() {
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// findUnitFile returns the path inside root of name's unit file (for an instance
// foo@bar.service, its template foo@.service if there is no instance file), or "".
func findUnitFile(root, name string) string {
	cands := []string{name}
	if at := strings.IndexByte(name, '@'); at > 0 {
		cands = append(cands, name[:at+1]+path.Ext(name))
	}
	for _, c := range cands {
		for _, dir := range unitDirs() {
			p := path.Join(dir, c)
			if st, err := os.Stat(filepath.Join(root, p)); err == nil && st.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}

// loadUnit reads name's unit file and its drop-ins (NAME.d/*.conf, in name order; an
// empty ExecStart= clears the list, as in systemd).
func loadUnit(root, name string) (Unit, error) {
	u := Unit{Name: name, Path: findUnitFile(root, name)}
	if u.Path == "" {
		return u, nil
	}
	files := []string{filepath.Join(root, u.Path)}
	for _, dir := range unitDirs() {
		drop, err := filepath.Glob(filepath.Join(root, dir, name+".d", "*.conf"))
		if err != nil {
			return u, fmt.Errorf("unit %s drop-ins: %w", name, err)
		}
		sort.Strings(drop)
		files = append(files, drop...)
	}
	for _, f := range files {
		if err := u.parse(f); err != nil {
			return u, err
		}
	}
	return u, nil
}

// parse applies the [Service] settings of one unit file or drop-in to u.
func (u *Unit) parse(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("unit %s: %w", u.Name, err)
	}
	section := ""
	lines := strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n")
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = strings.Trim(line, "[]")
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || section != "Service" {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "Type":
			u.Type = val
		case "ExecStartPre":
			u.ExecStartPre = appendOrReset(u.ExecStartPre, val)
		case "ExecStart":
			u.ExecStart = appendOrReset(u.ExecStart, val)
		case "ExecStartPost":
			u.ExecStartPost = appendOrReset(u.ExecStartPost, val)
		case "Environment":
			u.Environment = append(u.Environment, splitEnvironment(val)...)
		}
	}
	return nil
}

func appendOrReset(list []string, val string) []string {
	if val == "" {
		return nil
	}
	return append(list, val)
}

// splitEnvironment splits an Environment= value into its assignments: separated by
// spaces, each optionally in double quotes.
func splitEnvironment(val string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range val {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
