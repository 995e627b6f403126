package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

func dryRun(t *testing.T, args ...string) []steps.Step {
	t.Helper()
	code, out, errOut := runMain(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan []steps.Step
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return plan
}

func stepIndex(plan []steps.Step, name string) int {
	return slices.IndexFunc(plan, func(s steps.Step) bool { return s.Name == name })
}

// The seal's dry run lists lifecycle-agent's order: the pull secret replaced through the
// API before anything is stopped or removed, kubelet stopped first, then containers,
// sandboxes, CRI-O, then the seed-time recert, and only then files.
func TestAgentSealDryRun(t *testing.T) {
	plan := dryRun(t, "agent", "seal", "--dry-run", "--target", "openshift", "-o", "json")
	order := []string{"pull-secret-placeholder", "pull-secret-rollout", "kubelet-stop", "kubelet-disable", "containers-stop",
		"sandboxes-remove", "crio-stop", "recert", "per-node-state", "pull-secret", "sealed"}
	last := -1
	for _, name := range order {
		i := stepIndex(plan, name)
		if i <= last {
			t.Fatalf("%s at %d, want after %d: %+v", name, i, last, plan)
		}
		last = i
	}
	if s := plan[stepIndex(plan, "kubelet-stop")]; strings.Join(s.Argv, " ") != "systemctl stop kubelet.service" {
		t.Errorf("kubelet-stop runs %q", s.Argv)
	}
	if s := plan[stepIndex(plan, "recert")]; !strings.Contains(strings.Join(s.Argv, " "), "RECERT_CONFIG=") {
		t.Errorf("recert step %q", s.Argv)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "seal", "--dry-run", "--target", "windows"}, `unknown target "windows": use openshift|coreos`},
		{[]string{"agent", "seal", "--dry-run"}, "--dry-run needs --target openshift|coreos"},
		{[]string{"agent", "reconfigure", "--dry-run", "--target", "windows"}, `unknown target "windows"`},
		{[]string{"agent", "reconfigure", "--dry-run"}, "--dry-run needs --target openshift|coreos"},
	} {
		code, _, stderr := runMain(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The reconfiguration's dry run shows recert's settings with the pull secret and the
// kubeadmin password hash, the cluster ID step and the readiness waits.
func TestAgentReconfigureDryRun(t *testing.T) {
	plan := dryRun(t, "agent", "reconfigure", "--dry-run", "--target", "openshift", "--root", t.TempDir(), "-o", "json")
	r := stepIndex(plan, "recert")
	if r < 0 || !strings.Contains(plan[r].Detail, "--pull-secret") || !strings.Contains(plan[r].Detail, "--kubeadmin-password-hash") {
		t.Fatalf("recert step %+v", plan)
	}
	last := r
	for _, name := range []string{"cluster-id", "wait-cluster-version", "wait-cluster-operators", "wait-node", "reconfigure-disable"} {
		i := stepIndex(plan, name)
		if i <= last {
			t.Fatalf("%s at %d, want after %d", name, i, last)
		}
		last = i
	}
	plan = dryRun(t, "agent", "reconfigure", "--dry-run", "--target", "openshift", "--root", t.TempDir(), "-o", "json",
		"--site-config", "../../seeds/site/siteconfig/testdata/site.yaml")
	b, _ := json.Marshal(plan)
	if strings.Contains(string(b), "auths") {
		t.Errorf("the dry run shows the pull secret: %s", b)
	}
}
