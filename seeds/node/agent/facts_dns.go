package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// gatherDNS resolves, through the node's own resolver, one name of each record the
// single-node dnsmasq serves (api, api-int, and a name under *.apps). Only on the running
// system (root /): elsewhere the resolver is not the node's.
func gatherDNS(ctx context.Context, root string) []wire.DNSFact {
	if root != "/" {
		return nil
	}
	f, err := os.Open(filepath.Join(root, wire.DNSRecordsFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	return dnsFacts(ctx, f, net.DefaultResolver.LookupHost)
}

// dnsFacts resolves with lookup one name of each address=/NAME/IP record read from r.
func dnsFacts(ctx context.Context, r io.Reader, lookup func(ctx context.Context, host string) ([]string, error)) []wire.DNSFact {
	var out []wire.DNSFact
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "address=/")
		if !ok {
			continue
		}
		name, ip, ok := strings.Cut(v, "/")
		if !ok || name == "" {
			continue
		}
		if strings.HasPrefix(name, "apps.") {
			name = "console-openshift-console." + name // any name under *.apps
		}
		fact := wire.DNSFact{Name: name, Want: ip}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := lookup(lctx, name)
		cancel()
		if err != nil {
			fact.Error = err.Error()
		}
		fact.Addresses = addrs
		out = append(out, fact)
	}
	return out
}
