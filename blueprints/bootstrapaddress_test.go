package blueprints

import (
	"strings"
	"testing"
)

// The bootstrap etcd of a bootstrap-in-place install must take the internal node IP:
// cluster-etcd-operator's render keeps the first machine network of the primary family
// (pkg/cmd/render/render.go getMachineCIDR, preferIPv6) and getBootstrapIP
// (pkg/cmd/render/bootstrap_ip.go) the first address inside it. validate reports a
// blueprint that breaks this at the field to change, with every other problem.
func TestBootstrapAddressRule(t *testing.T) {
	dir := fixtureDir(t)
	for _, tc := range []struct {
		name, extra string
		want        []string // "LINE:COL PATH: message fragment"; none when accepted
	}{
		{"default machine network", "", nil},
		{"node IP of the other family than the first service network",
			"    serviceNetwork: [fd02::/112]\n    machineNetwork:\n      - cidr: fd00:127::/64\n      - cidr: 192.168.127.0/24\n  relocation:\n    nodeIP: 192.168.127.10/24\n",
			[]string{"17:13 spec.relocation.nodeIP: 192.168.127.10/24 is not of the cluster's primary family (the first service network, fd02::/112)"}},
		{"not in the first machine network of its family",
			"    machineNetwork:\n      - cidr: 192.168.1.0/24\n      - cidr: 192.168.127.0/24\n",
			[]string{"13:15 spec.openshift.machineNetwork[0].cidr: 192.168.1.0/24, the first machine network of its family, does not contain the internal node address 192.168.127.10"}},
		{"an IPv6 machine network first does not count for IPv4",
			"    machineNetwork:\n      - cidr: fd00::/64\n      - cidr: 192.168.127.0/24\n", nil},
		{"machine network holds the factory VM's address",
			"    machineNetwork:\n      - cidr: 10.0.0.0/16\n  relocation:\n    nodeIP: 10.0.9.10/16\n",
			[]string{"13:15 spec.openshift.machineNetwork[0].cidr: 10.0.0.0/16 contains the factory VM's own address 10.0.2.15"}},
		{"node IP outside every machine network is reported once",
			"    machineNetwork:\n      - cidr: 10.1.0.0/16\n",
			[]string{"13:7 spec.openshift.machineNetwork: no machine network contains the internal node IP 192.168.127.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, openshift(tc.extra))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("rejected:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", openshift(tc.extra))
			}
			ps := problems(t, err)
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tc.want), err)
			}
			for i, p := range ps {
				got := itoa(p.Line) + ":" + itoa(p.Col) + " " + p.Path + ": " + p.Message
				if !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("problem %d:\n got %s\nwant %s...", i, got, tc.want[i])
				}
				if p.Hint == "" {
					t.Errorf("problem %d has no hint: %v", i, p)
				}
			}
		})
	}
}
