package recert

import (
	"bufio"
	_ "embed"
	"encoding/pem"
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
		case "proxy":
			if n := len(strings.Split(v, "|")); n != 6 {
				errs = append(errs, fmt.Errorf("%s: recert wants six parts separated by '|' (HTTP|HTTPS|NO|STATUS_HTTP|STATUS_HTTPS|STATUS_NO), found %d", flag, n))
			}
		case "trustbundle":
			if err := checkProxyTrustBundle(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flag, err))
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

// checkProxyTrustBundle holds a proxy_trusted_ca_bundle to recert's parser
// (src/ocp_postprocess/additional_trust_bundle/params.rs ProxyAdditionalTrustBundle::parse,
// parse_additional_trust_bundle): NAME:BUNDLE split at the first ':', the bundle empty, or
// PEM holding certificates only, at least one (a value without a newline would be a path,
// which this project never passes).
func checkProxyTrustBundle(v string) error {
	_, bundle, ok := strings.Cut(v, ":")
	switch {
	case !ok:
		return errors.New("recert wants two parts separated by ':' (CONFIGMAP:BUNDLE), found 1")
	case bundle == "":
		return nil
	case !strings.Contains(bundle, "\n"):
		return errors.New("recert takes a bundle without a newline as a path to a file")
	}
	rest, n := []byte(bundle), 0
	for {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return errors.New("additional_trust_bundle must contain only certificates")
		}
		n++
	}
	if n == 0 {
		return errors.New("additional_trust_bundle must contain at least one certificate")
	}
	return nil
}
