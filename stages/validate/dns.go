package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// checkClusterDNS checks what the node's own resolver answered for api, api-int and a name
// under *.apps: the single-node dnsmasq's records, pointing at the node.
func checkClusterDNS(f *wire.Facts) outcome {
	if len(f.DNS) == 0 {
		return fail("the node resolves none of the cluster's names: no single-node dnsmasq records in " + wire.DNSRecordsFile +
			" (is render's 50-master-dnsmasq-configuration MachineConfig applied?)")
	}
	var problems, ev []string
	for _, d := range f.DNS {
		ev = append(ev, fmt.Sprintf("%s -> %s (want %s)", d.Name, strings.Join(d.Addresses, ","), d.Want))
		switch {
		case d.Error != "":
			problems = append(problems, fmt.Sprintf("%s does not resolve on the node: %s", d.Name, d.Error))
		case !slices.Contains(d.Addresses, d.Want):
			problems = append(problems, fmt.Sprintf("%s resolves to %s on the node, not %s", d.Name, strings.Join(d.Addresses, ","), d.Want))
		}
	}
	return failures(problems, fmt.Sprintf("%d cluster names resolve to the node", len(f.DNS)), ev...)
}
