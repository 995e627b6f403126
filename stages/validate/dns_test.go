package validate

import (
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// The node's own resolver must answer the cluster's names with the node's address: what
// the single-node dnsmasq serves. Each wrong or missing answer fails, named.
func TestClusterDNS(t *testing.T) {
	ok := []wire.DNSFact{
		{Name: "console-openshift-console.apps.seed.example", Want: "192.168.127.10", Addresses: []string{"192.168.127.10"}},
		{Name: "api-int.seed.example", Want: "192.168.127.10", Addresses: []string{"192.168.127.10"}},
		{Name: "api.seed.example", Want: "192.168.127.10", Addresses: []string{"192.168.127.10"}},
	}
	for _, tc := range []struct {
		name   string
		dns    []wire.DNSFact
		status Status
		want   string
	}{
		{"all resolve", ok, StatusPass, "3 cluster names resolve to the node"},
		{"no records", nil, StatusFail, "no single-node dnsmasq records"},
		{"api-int does not resolve", []wire.DNSFact{ok[0], {Name: "api-int.seed.example", Want: "192.168.127.10", Error: "no such host"}, ok[2]},
			StatusFail, "api-int.seed.example does not resolve on the node: no such host"},
		{"apps elsewhere", []wire.DNSFact{{Name: ok[0].Name, Want: "192.168.127.10", Addresses: []string{"10.0.0.9"}}, ok[1], ok[2]},
			StatusFail, "console-openshift-console.apps.seed.example resolves to 10.0.0.9 on the node, not 192.168.127.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := checkClusterDNS(&wire.Facts{DNS: tc.dns})
			if o.status != tc.status || !strings.Contains(o.message, tc.want) {
				t.Errorf("= %s %q, want %s %q", o.status, o.message, tc.status, tc.want)
			}
		})
	}
	// A conformance OS (no OpenShift) has no cluster names to resolve.
	if o := hostChecks(Inputs{Facts: &wire.Facts{}})[CheckClusterDNS](); o.status != StatusSkip {
		t.Errorf("coreos: %s %q, want skip", o.status, o.message)
	}
}
