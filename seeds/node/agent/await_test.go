package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/test/testbin"
)

// The guest asks, then reads the host's answer on the port it still holds open.
func TestAwait(t *testing.T) {
	seal := &wire.SealRequest{Version: wire.SealRequestVersion, Target: oskind.CoreOS}
	tests := []struct {
		name, answer, want, err string
	}{
		{"freeze", `{"version":1,"command":"freeze"}`, wire.CommandFreeze, ""},
		{"seal with its request", `{"version":1,"command":"seal","seal":{"version":1,"target":"coreos"}}`, wire.CommandSeal, ""},
		{"seal without a request", `{"version":1,"command":"seal"}`, "", "carries no seal request"},
		{"unknown command", `{"version":1,"command":"rm -rf /"}`, "", "unknown command"},
		{"unknown field", `{"version":1,"command":"thaw","also":"x"}`, "", "unknown field"},
		{"other version", `{"version":2,"command":"thaw"}`, "", "command version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, guest := testbin.PTY(t)
			sysRoot, _ := fakeNode(t)
			r := Reporter{Port: guest, StateDir: t.TempDir(), SysRoot: sysRoot}
			done := make(chan error, 1)
			var got wire.Command
			go func() {
				var err error
				got, err = r.Await(context.Background(), map[string]string{wire.DetailLast: "thaw:ok"})
				done <- err
			}()
			msg, err := wire.NewDecoder(host).Next()
			if err != nil {
				t.Fatal(err)
			}
			if msg.Phase != wire.PhaseAwaiting || !msg.Final() || msg.Details[wire.DetailLast] != "thaw:ok" {
				t.Fatalf("the guest asked with %+v", msg)
			}
			if _, err := host.WriteString(tt.answer + "\n"); err != nil {
				t.Fatal(err)
			}
			err = <-done
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("await: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("await: %v, want %q", err, tt.err)
			case tt.err == "" && got.Name != tt.want:
				t.Fatalf("got command %q, want %q", got.Name, tt.want)
			case tt.want == wire.CommandSeal && (got.Seal == nil || got.Seal.Target != seal.Target):
				t.Fatalf("seal request %+v", got.Seal)
			}
		})
	}
}
