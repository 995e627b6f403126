package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
	write("sys/class/virtio-ports/vport2p1/name", DefaultPortName+"\n")
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
			if _, err := r.Report(context.Background(), "phase", StatusInfo, map[string]string{"k": "v"}); err != nil {
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
	d := NewDecoder(f)
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
		{"/dev/virtio-ports/" + DefaultPortName, "/dev/vport2p1", false},
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
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/a"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(cfg, []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/a"},{"path":"/etc/missing"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := IgnitionFileDetails(cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	if d["file:/etc/a"] != "abc" || d["file:/etc/a.size"] != "3" || d["file:/etc/missing.error"] == "" {
		t.Fatalf("got %v", d)
	}
}
