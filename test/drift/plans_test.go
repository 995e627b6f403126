package drift

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// The two node-side sequences that change a seed outside the MCO: the seal at the factory and
// the site's reconfiguration hook.
const (
	planSeal = "seal"
	planSite = "site"
)

// plans are the sequences by name.
type plans map[string][]steps.Step

// dryRunPlans asks the built binary for both plans, as an engineer reviewing them would: the
// seal of an OpenShift seed and the site's reconfiguration with the placeholders of a site
// config (every step shows; nothing is touched).
func dryRunPlans(t *testing.T, bin string) plans {
	t.Helper()
	return plans{
		planSeal: dryRun(t, bin, "agent", "seal", "--dry-run", "--target", "openshift", "-o", "json"),
		planSite: dryRun(t, bin, "agent", "reconfigure", "--dry-run", "--target", "openshift", "--root", t.TempDir(), "-o", "json"),
	}
}

func dryRun(t *testing.T, bin string, args ...string) []steps.Step {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("snofactory %s: %v", strings.Join(args, " "), err)
	}
	var plan []steps.Step
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("snofactory %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if len(plan) == 0 {
		t.Fatalf("snofactory %s: an empty plan", strings.Join(args, " "))
	}
	return plan
}

// change is what one entry of a step's Changes touches on the node's disk.
type change struct {
	Paths []string // node paths, globs or directories (a directory covers what is under it)
	Unit  string   // a systemd unit whose enabled state the step sets
}

var unitName = regexp.MustCompile(`^[A-Za-z0-9@._-]+\.(service|socket|target|timer|mount|path)$`)

// namedNodeChanges are the entries that name node files in words, with the paths they mean.
var namedNodeChanges = map[string][]string{
	// nmstate persists the profiles it applies through NetworkManager, whose keyfile plugin
	// keeps them here: machine-config-operator templates/common/_base/files/NetworkManager-keyfiles.yaml.
	"NetworkManager connections": {"/etc/NetworkManager/system-connections"},
}

// apiChange matches entries that are cluster objects, as seeds/node/steps documents them
// (KIND NAME or KIND NAMESPACE/NAME, * for all, etcd: ...): the MCD compares the disk, and an
// object the MCO renders from reaches the disk only through a new rendered config the MCD
// writes itself. Prose does not match, so a new kind of entry is looked at first.
var apiChange = regexp.MustCompile(`^(etcd: .*|[A-Z][A-Za-z]+ (\*|[a-z0-9.*-]+)(/(\*|[a-z0-9.*-]+))?)$`)

// classify says what a Changes entry touches on disk; an entry it cannot place is an error,
// so a new kind of change is looked at before the check can pass.
func classify(entry string) (change, error) {
	switch {
	case strings.HasPrefix(entry, "/"):
		return change{Paths: []string{entry}}, nil
	case unitName.MatchString(entry):
		return change{Unit: entry}, nil
	case namedNodeChanges[entry] != nil:
		return change{Paths: namedNodeChanges[entry]}, nil
	case apiChange.MatchString(entry):
		return change{}, nil
	}
	return change{}, fmt.Errorf("changes entry %q is neither a node path, a unit, nor a cluster object this check knows: add it to namedNodeChanges or apiChange", entry)
}

// unitVerb is what a step's command does to unit's enabled state: "enable", "disable",
// "mask", "unmask" or "" when its argv does not say.
func unitVerb(s steps.Step, unit string) string {
	a := s.Argv
	if len(a) >= 3 && a[0] == "systemctl" && slices.Contains(a[2:], unit) {
		return a[1]
	}
	return ""
}

func stepIndex(plan []steps.Step, name string) int {
	return slices.IndexFunc(plan, func(s steps.Step) bool { return s.Name == name })
}
