package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// fakeNode lays out the /proc and /sys files the reporter reads, and a regular file
// standing in for the port device.
func fakeNode(t *testing.T) (sysRoot, port string) {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/sys/kernel/random/boot_id", "0b1d\n")
	write("sys/class/virtio-ports/vport2p1/name", wire.DefaultPortName+"\n")
	write("sys/class/virtio-ports/vport2p2/name", "other\n")
	port = filepath.Join(root, "port")
	write("port", "")
	return root, port
}

func TestReporterSequencesConcurrentReports(t *testing.T) {
	sysRoot, port := fakeNode(t)
	r := Reporter{Port: port, StateDir: t.TempDir(), SysRoot: sysRoot}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Report(context.Background(), "phase", wire.StatusInfo, map[string]string{"k": "v"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(port)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := wire.NewDecoder(f)
	for want := uint64(1); want <= n; want++ {
		m, err := d.Next()
		if err != nil {
			t.Fatalf("message %d: %v", want, err)
		}
		if m.Seq != want || m.Boot != "0b1d" || m.Details["k"] != "v" {
			t.Fatalf("got %+v, want seq %d", m, want)
		}
	}
}

func TestResolvePort(t *testing.T) {
	sysRoot, port := fakeNode(t)
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{port, port, false},
		{"/dev/virtio-ports/" + wire.DefaultPortName, "/dev/vport2p1", false},
		{"other", "/dev/vport2p2", false},
		{"", "/dev/vport2p1", false},
		{"/dev/virtio-ports/missing", "", true},
	}
	for _, tt := range tests {
		got, err := ResolvePort(tt.in, sysRoot)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ResolvePort(%q) = %q, %v; want %q (err %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestFileDetails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := FileDetails("x", p)
	if err != nil {
		t.Fatal(err)
	}
	if d["x"] != "abc" || d["x.size"] != "3" || d["x.sha256"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("got %v", d)
	}
}

func TestIgnitionFileDetails(t *testing.T) {
	root := t.TempDir()
	// what an OpenShift config writes: public files, and secrets as 0600 files or
	// under the kubelet's and root's directories
	files := []struct {
		path     string
		mode     os.FileMode
		body     string
		withheld string // "" means the content is sent
	}{
		{"/etc/a", 0o644, "abc", ""},
		{"/etc/group-readable", 0o640, "g", ""},
		{"/etc/other-readable", 0o604, "o", ""},
		{"/etc/pull-secret.json", 0o600, `{"auths":{}}`, "private (mode 0600)"},
		{"/etc/exec-only", 0o711, "x", "private (mode 0711)"},
		{"/var/lib/kubelet/config.json", 0o644, `{"auths":{}}`, "under /var/lib/kubelet"},
		{"/root/.docker/config.json", 0o644, `{"auths":{}}`, "under /root"},
		{"/etc/kubernetes/kubeconfig", 0o644, "apiVersion: v1", "under /etc/kubernetes"},
		{"/etc/kubernetes-not/x", 0o644, "y", ""},
	}
	var listed []string
	for _, f := range files {
		full := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, f.mode); err != nil { // umask-proof
			t.Fatal(err)
		}
		listed = append(listed, fmt.Sprintf(`{"path":%q}`, f.path))
	}
	listed = append(listed, `{"path":"/etc/missing"}`)
	cfg := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(cfg, []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[`+strings.Join(listed, ",")+`]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := IgnitionFileDetails(cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		key := "file:" + f.path
		sum := sha256.Sum256([]byte(f.body))
		if d[key+".sha256"] != hex.EncodeToString(sum[:]) || d[key+".size"] != fmt.Sprint(len(f.body)) {
			t.Errorf("%s: sha256/size = %q/%q", f.path, d[key+".sha256"], d[key+".size"])
		}
		body, sent := d[key]
		switch {
		case f.withheld == "" && (!sent || body != f.body):
			t.Errorf("%s: content %q (sent %v), want %q", f.path, body, sent, f.body)
		case f.withheld != "" && sent:
			t.Errorf("%s: private content sent: %q", f.path, body)
		case d[key+".withheld"] != f.withheld:
			t.Errorf("%s: withheld = %q, want %q", f.path, d[key+".withheld"], f.withheld)
		}
	}
	if d["file:/etc/missing.error"] == "" {
		t.Errorf("a missing file is not reported: %v", d)
	}
	// the whole message still fits the protocol
	m := wire.Message{Version: wire.ProtocolVersion, Boot: "b", Seq: 1, Phase: "ignition", Status: wire.StatusOK, Details: d}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}
