package drift

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/test/testbin"
)

var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }

// allOwners is every MachineConfig claim on a single-node master of testdata/sno.yaml:
// render's and the installer's MachineConfigs, and the MCO's own templates.
func allOwners(t *testing.T) owners {
	t.Helper()
	all := renderedOwners(t, snofactoryBin).merge(mcoOwners(t))
	// The check proves nothing if a source went missing: render's dnsmasq config and the
	// MCO's kubelet must be among the claims.
	for p, mc := range map[string]string{
		"/usr/local/bin/dnsmasq_config.sh":    "50-master-dnsmasq-configuration",
		"/etc/systemd/system/kubelet.service": "01-master-kubelet",
	} {
		if !slices.ContainsFunc(all[p], func(o owner) bool { return o.MachineConfig == mc }) {
			t.Fatalf("%s: owners %+v, want MachineConfig %s among them", p, all[p], mc)
		}
	}
	return all
}

// TestNoMachineConfigDrift: nothing the seal or the site's hook writes, removes or leaves
// different is a file or unit a MachineConfig owns, unless an exception says, with its
// upstream reason, why the machine-config daemon never sees it. Drift degrades the
// MachineConfigPool (machine-config-operator pkg/daemon/on_disk_validation.go).
func TestNoMachineConfigDrift(t *testing.T) {
	drift, allowed, err := check(allOwners(t), dryRunPlans(t, snofactoryBin))
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) > 0 {
		t.Logf("allowed, the MCD never sees these:\n%s", report(allowed))
	}
	for _, f := range drift {
		t.Errorf("MachineConfig drift: %s\n  the MCD compares it with the MachineConfig and degrades the pool on a difference: "+
			"take the path out of the MachineConfig, leave it alone in the step, or add an exception in "+
			"exceptions_test.go citing why the MCD never sees it", f)
	}
}

// TestDriftIsReported: the check finds a drifting step, naming the plan, the step, the file
// and the MachineConfig that owns it, and an exception whose condition breaks stops hiding
// its finding. Each case is measured against the real plans' own findings, so it holds
// whatever those are.
func TestDriftIsReported(t *testing.T) {
	o := allOwners(t)
	real := dryRunPlans(t, snofactoryBin)
	base, _, err := check(o, real)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, plan string
		edit       func([]steps.Step) []steps.Step
		want       map[string][]string // each new finding's MachineConfig path, and what its report says
	}{
		{"a file", planSite, appendStep(steps.Step{Name: "synthetic", Changes: []string{"/etc/kubernetes/kubelet.conf"}}),
			map[string][]string{"/etc/kubernetes/kubelet.conf": {"site plan, step synthetic", "MachineConfig 01-master-kubelet", "templates/master/01-master-kubelet/_base/files/kubelet.yaml"}}},
		{"a cleared directory", planSeal, appendStep(steps.Step{Name: "synthetic", Changes: []string{"/etc/NetworkManager/dispatcher.d/pre-up.d"}}),
			map[string][]string{
				"/etc/NetworkManager/dispatcher.d/pre-up.d/30-snofactory-internal-ip": {"seal plan, step synthetic", "MachineConfig 90-master-snofactory-internal-ip", "render: config.ign"},
				"/etc/NetworkManager/dispatcher.d/pre-up.d/10-ofport-request.sh":      {"seal plan, step synthetic", "MachineConfig 00-master", "templates/common/_base/files/ofport-request.yaml"},
			}},
		{"a glob", planSeal, appendStep(steps.Step{Name: "synthetic", Changes: []string{"/usr/local/bin/dnsmasq_*"}}),
			map[string][]string{"/usr/local/bin/dnsmasq_config.sh": {"seal plan, step synthetic", "MachineConfig 50-master-dnsmasq-configuration"}}},
		{"a disabled unit", planSeal, appendStep(steps.Step{Name: "synthetic", Argv: []string{"systemctl", "disable", "node-valid-hostname.service"}, Changes: []string{"node-valid-hostname.service"}}),
			map[string][]string{systemdDir + "node-valid-hostname.service": {"seal plan, step synthetic", "MachineConfig 00-master", "checkUnitEnabled"}}},
		// The site's pull-secret step writes config.json (said here, whatever the plan lists)
		// and recert is no longer given the pull secret: nothing rewrites the MachineConfigs.
		{"a broken exception", planSite, edits(
			editStep("pull-secret", func(s *steps.Step) { s.Changes = []string{"/var/lib/kubelet/config.json"} }),
			editStep("recert", func(s *steps.Step) { s.Detail = strings.ReplaceAll(s.Detail, "--pull-secret", "--no-pull-secret") })),
			map[string][]string{"/var/lib/kubelet/config.json": {"site plan, step pull-secret", "MachineConfig 00-master", "templates/common/_base/files/pull-secret.yaml"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plans{planSeal: slices.Clone(real[planSeal]), planSite: slices.Clone(real[planSite])}
			p[tc.plan] = tc.edit(p[tc.plan])
			drift, _, err := check(o, p)
			if err != nil {
				t.Fatal(err)
			}
			added := newFindings(base, drift)
			if len(added) != len(tc.want) {
				t.Fatalf("%d new findings, want %d:\n%s", len(added), len(tc.want), report(added))
			}
			for _, f := range added {
				want, ok := tc.want[f.Path]
				if !ok {
					t.Errorf("unexpected finding %s", f)
				}
				for _, w := range want {
					if !strings.Contains(f.String(), w) {
						t.Errorf("the finding %q does not say %q", f, w)
					}
				}
			}
		})
	}
}

func appendStep(s steps.Step) func([]steps.Step) []steps.Step {
	return func(plan []steps.Step) []steps.Step { return append(plan, s) }
}

func edits(fs ...func([]steps.Step) []steps.Step) func([]steps.Step) []steps.Step {
	return func(plan []steps.Step) []steps.Step {
		for _, f := range fs {
			plan = f(plan)
		}
		return plan
	}
}

func editStep(name string, edit func(*steps.Step)) func([]steps.Step) []steps.Step {
	return func(plan []steps.Step) []steps.Step {
		i := stepIndex(plan, name)
		if i < 0 {
			panic("no step " + name)
		}
		edit(&plan[i])
		return plan
	}
}

// newFindings are the findings of after that before does not have.
func newFindings(before, after []finding) []finding {
	seen := map[string]bool{}
	for _, f := range before {
		seen[f.String()] = true
	}
	var out []finding
	for _, f := range after {
		if !seen[f.String()] {
			out = append(out, f)
		}
	}
	return out
}

// TestClassify: every kind of Changes entry lands where it should, and one the check cannot
// place stops it.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  change
		bad   bool
	}{
		{entry: "/etc/ssh/ssh_host_*", want: change{Paths: []string{"/etc/ssh/ssh_host_*"}}},
		{entry: "kubelet.service", want: change{Unit: "kubelet.service"}},
		{entry: "NetworkManager connections", want: change{Paths: []string{"/etc/NetworkManager/system-connections"}}},
		{entry: "Secret openshift-config/pull-secret"},
		{entry: "etcd: every certificate and key"},
		{entry: "ImageContentSourcePolicy *"},
		{entry: "CatalogSource openshift-marketplace/*"},
		{entry: "Lease */*"},
		{entry: "every ImageContentSourcePolicy and ImageDigestMirrorSet", bad: true},
		{entry: "MachineConfig rendered-* that no pool references", bad: true},
		{entry: "the node's firmware", bad: true},
	} {
		got, err := classify(tc.entry)
		if tc.bad != (err != nil) || !slices.Equal(got.Paths, tc.want.Paths) || got.Unit != tc.want.Unit {
			t.Errorf("classify(%q) = %+v, %v", tc.entry, got, err)
		}
	}
}
