package recert

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

//go:embed cli-contract.txt
var cliContract string

type flagSpec struct{ kind, format string }

// contract parses cli-contract.txt: recert's flags and its groups of exclusive flags.
func contract() (map[string]flagSpec, map[string][]string) {
	flags, groups := map[string]flagSpec{}, map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(cliContract))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 3 && fs[0] == "flag":
			flags[fs[1]] = flagSpec{fs[2], strings.Join(fs[3:], "")}
		case len(fs) >= 3 && fs[0] == "group":
			groups[fs[1]] = fs[2:]
		}
	}
	return flags, groups
}

// Check holds a recert command line against recert's CLI definition: only flags it
// defines, a value where it takes one, single flags once, one flag per group, values in
// the formats its parsers accept, and (when exists is not nil) paths that exist. It
// returns every problem at once.
func Check(args []string, exists func(string) bool) error {
	flags, groups := contract()
	var errs []error
	seen := map[string]int{}
	for i := 0; i < len(args); i++ {
		f, ok := flags[args[i]]
		if !ok {
			errs = append(errs, fmt.Errorf("recert defines no flag %q", args[i]))
			continue
		}
		seen[args[i]]++
		if f.kind == "bool" {
			continue
		}
		if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
			errs = append(errs, fmt.Errorf("%s takes a value", args[i]))
			continue
		}
		flag, v := args[i], args[i+1]
		i++
		switch f.format {
		case "pair":
			sep := ":"
			if strings.Contains(v, ",") {
				sep = ","
			}
			if strings.Count(v, sep) != 1 {
				errs = append(errs, fmt.Errorf("%s %q: recert wants exactly one %q", flag, v, sep))
			}
		case "rename":
			if n := len(strings.Split(v, ":")); n != 2 && n != 3 {
				errs = append(errs, fmt.Errorf("%s %q: recert wants NAME:DOMAIN[:INFRA_ID]", flag, v))
			}
		case "path":
			if exists != nil && !exists(v) {
				errs = append(errs, fmt.Errorf("%s %s: recert refuses a path that does not exist", flag, v))
			}
		}
	}
	for flag, n := range seen {
		if flags[flag].kind != "many" && n > 1 {
			errs = append(errs, fmt.Errorf("%s given %d times; recert takes it once", flag, n))
		}
	}
	for name, members := range groups {
		var given []string
		for _, m := range members {
			if seen[m] > 0 {
				given = append(given, m)
			}
		}
		if len(given) > 1 {
			errs = append(errs, fmt.Errorf("recert group %s: %v exclude each other", name, given))
		}
	}
	return errors.Join(errs...)
}
