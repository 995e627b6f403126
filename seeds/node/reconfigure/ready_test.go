package reconfigure

import (
	"context"
	"fmt"
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
