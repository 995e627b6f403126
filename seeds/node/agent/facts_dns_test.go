package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Each record the single-node dnsmasq serves is resolved once, a name under *.apps for the
// wildcard, and the answer is kept beside the address the record names.
func TestDNSFacts(t *testing.T) {
	records := "address=/apps.seed.example/192.168.127.10\naddress=/api-int.seed.example/192.168.127.10\n# comment\naddress=/api.seed.example/192.168.127.10\n"
	var asked []string
	lookup := func(_ context.Context, host string) ([]string, error) {
		asked = append(asked, host)
		if strings.HasPrefix(host, "api-int.") {
			return nil, errors.New("no such host")
		}
		return []string{"192.168.127.10"}, nil
	}
	got := dnsFacts(context.Background(), strings.NewReader(records), lookup)
	if strings.Join(asked, " ") != "console-openshift-console.apps.seed.example api-int.seed.example api.seed.example" {
		t.Errorf("asked %q", asked)
	}
	if len(got) != 3 || got[1].Error != "no such host" || got[2].Want != "192.168.127.10" || got[2].Addresses[0] != "192.168.127.10" {
		t.Errorf("facts %+v", got)
	}
	if gatherDNS(context.Background(), t.TempDir()) != nil {
		t.Error("resolved names for a root that is not the running system")
	}
}
