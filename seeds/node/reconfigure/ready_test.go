package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

func co(name, avail, prog, degraded string, since time.Time) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"status":{"conditions":[{"type":"Available","status":%q},{"type":"Degraded","status":%q,"message":"etcd members down"},
		{"type":"Progressing","status":%q,"lastTransitionTime":%q}]}}`, name, avail, degraded, prog, since.Format(time.RFC3339))
}

// Each readiness judge passes only a settled cluster and names what is not.
func TestReadinessJudges(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	r := &run{}
	r.o.OpenShift.SettleWindow = 30 * time.Second
	for _, tc := range []struct {
		name  string
		judge judge
		out   string
		ok    bool
		why   string
	}{
		{"operators settled", r.operatorsSettled, `{"items":[` + co("etcd", "True", "False", "False", now.Add(-time.Minute)) + `]}`, true, ""},
		{"operator just stopped progressing", r.operatorsSettled, `{"items":[` + co("etcd", "True", "False", "False", now.Add(-10*time.Second)) + `]}`, false,
			"ClusterOperator etcd stopped progressing 10s ago, less than the 30s settle window"},
		{"operator progressing", r.operatorsSettled, `{"items":[` + co("console", "True", "True", "False", now.Add(-time.Hour)) + `]}`, false, "ClusterOperator console is Progressing"},
		{"operator degraded", r.operatorsSettled, `{"items":[` + co("etcd", "True", "False", "True", now.Add(-time.Hour)) + `]}`, false, "ClusterOperator etcd is Degraded: etcd members down"},
		{"operator not available", r.operatorsSettled, `{"items":[` + co("ingress", "False", "False", "False", now.Add(-time.Hour)) + `]}`, false, "ClusterOperator ingress is not Available"},
		{"no operators", r.operatorsSettled, `{"items":[]}`, false, "no ClusterOperators yet"},
		{"cluster version available", clusterVersionReady, `{"metadata":{"name":"version"},"status":{"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"False"}]}}`, true, ""},
		{"cluster version left unavailable by recert", clusterVersionReady, `{"metadata":{"name":"version"},"status":{"conditions":[{"type":"Available","status":"False","message":"Cluster version status unknown"}]}}`, false,
			"ClusterVersion version is Available=False, want True (Cluster version status unknown)"},
		{"cluster version failing", clusterVersionReady, `{"metadata":{"name":"version"},"status":{"conditions":[{"type":"Available","status":"True"},{"type":"Failing","status":"True"},{"type":"Progressing","status":"False"}]}}`, false,
			"ClusterVersion version is Failing=True, want False"},
		{"node ready", nodesReady, `{"items":[{"metadata":{"name":"sno"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}]}`, true, ""},
		{"node not ready", nodesReady, `{"items":[{"metadata":{"name":"sno"},"status":{"conditions":[{"type":"Ready","status":"False","message":"PLEG is not healthy"}]}}]}`, false,
			"Node sno is not Ready (PLEG is not healthy)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why, err := tc.judge([]byte(tc.out), now)
			if err != nil || ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("= %v, %q, %v; want %v, %q", ok, why, err, tc.ok, tc.why)
			}
		})
	}
}

// A wait gives up after its timeout and names the last reason; an operator that moves
// from Progressing to settled passes once the settle window has gone by.
func TestWaitReady(t *testing.T) {
	h := newHarness(t)
	o, err := h.options(oskind.OpenShift, "").withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{o: o}
	start := h.clock.T
	calls := 0
	r.o.Run = func(context.Context, string, ...string) ([]byte, error) {
		calls++
		if calls < 3 { // progressing for the first two polls, then settled from that moment
			return []byte(`{"items":[` + co("etcd", "True", "True", "False", start) + `]}`), nil
		}
		return []byte(`{"items":[` + co("etcd", "True", "False", "False", start.Add(20*time.Second)) + `]}`), nil
	}
	d, err := r.waitReady(context.Background(), "ClusterOperators", []string{"oc"}, h.clock, r.operatorsSettled)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.clock.T.Sub(start.Add(20 * time.Second)); got < 30*time.Second {
		t.Errorf("passed %s after the operator settled, inside the settle window (%v)", got, d)
	}
	r.o.Run = func(context.Context, string, ...string) ([]byte, error) {
		return []byte(`{"items":[` + co("etcd", "True", "False", "True", start) + `]}`), nil
	}
	_, err = r.waitReady(context.Background(), "ClusterOperators", []string{"oc"}, h.clock, r.operatorsSettled)
	if err == nil || !strings.Contains(err.Error(), "did not settle within 1h") || !strings.Contains(err.Error(), "ClusterOperator etcd is Degraded") {
		t.Errorf("wait = %v", err)
	}
}

// The machine config wait passes only updated pools and a node the MCD has checked, and
// stops at once on a degraded pool or node, naming the pool, the condition's reason and the
// MCD's message, as the node controller (pkg/controller/node/status.go calculateStatus) and
// the MCD (pkg/daemon/on_disk_validation.go) write them.
func TestMachineConfigSettled(t *testing.T) {
	updated, degraded := readTestdata(t, "machineconfigpools-updated.json"), readTestdata(t, "machineconfigpools-degraded.json")
	mismatch := `unexpected on-disk state validating against rendered-master-5f1c3a9e2b7d4c8f0a6e1d2b3c4f5a6b: content mismatch for file "/etc/default/sno_dnsmasq_configuration_overrides"`
	for _, tc := range []struct {
		name, pools, nodes string
		ok                 bool
		why, err           string
	}{
		{"settled", updated, nodeList("sno-0042", "Done", ""), true, "", ""},
		{"pool degraded", degraded, nodeList("sno-0042", "Degraded", mismatch), false, "",
			`MachineConfigPool master is Degraded: NodeDegraded: 1 nodes are reporting degraded status on sync: Node sno-0042 is reporting: "unexpected on-disk state validating against rendered-master-5f1c3a9e2b7d4c8f0a6e1d2b3c4f5a6b: content mismatch for file \"/etc/default/sno_dnsmasq_configuration_overrides\""`},
		{"node degraded, pool not yet", updated, nodeList("sno-0042", "Degraded", mismatch), false, "",
			`Node sno-0042: the machine-config daemon reports "unexpected on-disk state validating against rendered-master-5f1c3a9e2b7d4c8f0a6e1d2b3c4f5a6b: content mismatch for file \"/etc/default/sno_dnsmasq_configuration_overrides\""`},
		{"daemon still working", updated, nodeList("sno-0042", "Working", ""), false, `the machine-config daemon has not checked Node sno-0042 yet (state "Working"`, ""},
		{"renamed node not annotated yet", updated, `{"items":[{"metadata":{"name":"sno-0042"}}]}`, false, "has not checked Node sno-0042 yet", ""},
		{"no pools", `{"items":[]}`, nodeList("sno-0042", "Done", ""), false, "no MachineConfigPool yet", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why, err := machineConfigSettled([]byte(tc.pools), []byte(tc.nodes))
			if tc.err != "" {
				if !errors.Is(err, errPoolDegraded) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("= %v, %q, %v; want %v, %q", ok, why, err, tc.ok, tc.why)
			}
		})
	}
}

// A degraded pool fails the site's run at the wait-machine-config step on its first look,
// without waiting for the timeout, and says what to look at.
func TestOpenShiftDegradedPoolFailsFast(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	kc := filepath.Join(h.root, DefaultKubeConfig)
	h.cmds.outputs["oc --kubeconfig "+kc+" get machineconfigpools.machineconfiguration.openshift.io -o json"] = readTestdata(t, "machineconfigpools-degraded.json")
	_, err := Run(context.Background(), h.options(oskind.OpenShift, medium(t, "site.yaml", nil)))
	var se *StepError
	if !errors.As(err, &se) || se.Step != "wait-machine-config" || !strings.Contains(err.Error(), `content mismatch for file \"/etc/default/sno_dnsmasq_configuration_overrides\"`) ||
		!strings.Contains(err.Error(), "does not heal by waiting") {
		t.Fatalf("err = %v", err)
	}
	polls := 0
	for _, l := range h.cmds.lines {
		if strings.Contains(l, "get machineconfigpools") {
			polls++
		}
	}
	if polls != 1 {
		t.Errorf("looked at the pools %d times, want once", polls)
	}
}
