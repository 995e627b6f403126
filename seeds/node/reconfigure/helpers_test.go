package reconfigure

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
)

// recorder is a Reporter that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []wire.Message
}

func (r *recorder) Report(_ context.Context, phase string, st wire.Status, d map[string]string) (wire.Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := wire.Message{Version: wire.ProtocolVersion, Boot: "test", Seq: uint64(len(r.msgs) + 1), Phase: phase, Status: st, Details: d}
	if err := m.Validate(); err != nil {
		return m, err
	}
	r.msgs = append(r.msgs, m)
	return m, nil
}

// step returns the last message about step name with status st, if any.
func (r *recorder) step(name string, st wire.Status) (wire.Message, bool) {
	for i := len(r.msgs) - 1; i >= 0; i-- {
		m := r.msgs[i]
		if m.Phase == wire.PhaseReconfigureStep && m.Details["step"] == name && m.Status == st {
			return m, true
		}
	}
	return wire.Message{}, false
}

func (r *recorder) final() wire.Message {
	for _, m := range r.msgs {
		if m.Final() {
			return m
		}
	}
	return wire.Message{}
}

// commands records command lines; failOn makes the first command starting with that line
// fail; tools are the stand-ins for the node's tools (standins_test.go), which work on the
// files under root; outputs answers the other commands, and oc's get, by their line's
// prefix (the longest prefix that matches).
type commands struct {
	lines   []string
	argv    [][]string
	failOn  string
	outputs map[string]string
	root    string
	tools   map[string]tool
	running map[string]bool // containers podman runs
}

func (c *commands) run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	c.lines = append(c.lines, line)
	c.argv = append(c.argv, append([]string{name}, args...))
	if c.failOn != "" && strings.HasPrefix(line, c.failOn) {
		c.failOn = ""
		return nil, fail(append([]string{name}, args...), 1, "simulated failure")
	}
	if t := c.tools[name]; t != nil {
		return t(c, args)
	}
	return c.recorded(line)
}

// recorded answers line from outputs: the longest matching prefix, so that one answer for
// "oc get" and a more precise one never depend on the map's order.
func (c *commands) recorded(line string) ([]byte, error) {
	best, found := "", false
	for prefix := range c.outputs {
		if strings.HasPrefix(line, prefix) && len(prefix) >= len(best) {
			best, found = prefix, true
		}
	}
	if !found {
		return nil, nil
	}
	return []byte(c.outputs[best]), nil
}

// medium writes the site config file src (testdata of siteconfig) onto a medium, with
// edit applied first.
func medium(t *testing.T, src string, edit func(*siteconfig.SiteConfig)) string {
	t.Helper()
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(sc)
	}
	p := filepath.Join(t.TempDir(), "site.iso")
	if err := siteconfig.Write(context.Background(), sc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// rawMedium writes an ISO labelled label holding content as the site config, bypassing
// every check, as a hand-made medium would.
func rawMedium(t *testing.T, label, content string) string {
	t.Helper()
	return isotest.Write(t, filepath.Join(t.TempDir(), "raw.iso"), label, map[string]string{siteconfig.ConfigFileName: content})
}

// harness is one test node: a root, recorded commands and messages, a console.
type harness struct {
	root, resolv string
	cmds         *commands
	rep          *recorder
	console      bytes.Buffer
	clock        *clocktest.Clock
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{root: t.TempDir(), resolv: filepath.Join(t.TempDir(), "resolv.conf"),
		rep: &recorder{}, clock: clocktest.New(time.Unix(1e9, 0))}
	h.cmds = &commands{outputs: map[string]string{}, root: h.root, tools: nodeTools(), running: map[string]bool{}}
	return h
}

func (h *harness) options(kind oskind.Kind, medium string) Options {
	return Options{Root: h.root, Target: kind, Medium: medium, Console: &h.console, Reporter: h.rep,
		ResolvConf: h.resolv, Run: h.cmds.run, Clock: h.clock}
}

func (h *harness) read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
