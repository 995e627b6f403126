package install

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// The install request comes from the lock (and SOURCE_DATE_EPOCH): the same lock makes the
// same request in another build, another lock another one.
func TestInstallRequest(t *testing.T) {
	dir := t.TempDir()
	lock := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := lock("a.lock.json", `{"schemaVersion":1}`), lock("b.lock.json", `{"schemaVersion":1,"arch":"amd64"}`)
	opts := Options{SourceDateEpoch: "1700000000"}
	request := func(lock string) []byte {
		t.Helper()
		env := &pipeline.Env{Scratch: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
		d, err := installRequest(context.Background(), lock, opts, env)
		if err != nil {
			t.Fatal(err)
		}
		if d.Serial != wire.InstallDiskSerial || !d.ReadOnly || d.Format != "raw" {
			t.Errorf("request disk %+v", d)
		}
		out, err := os.ReadFile(d.Path)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := request(a)
	uuid, seed := wire.FSIdentity(digest.FromString(`{"schemaVersion":1}`).String())
	want, err := wire.EncodeInstallRequest(wire.InstallRequest{RootUUID: uuid, HashSeed: seed, MkfsTime: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, want) {
		t.Errorf("request %q, want %q", bytes.TrimRight(first, "\x00"), bytes.TrimRight(want, "\x00"))
	}
	if !bytes.Equal(request(a), first) {
		t.Error("one lock made two requests")
	}
	if bytes.Equal(request(b), first) {
		t.Error("two locks made one request")
	}
	opts.SourceDateEpoch = ""
	if bytes.Contains(request(a), []byte("mkfs_time=")) {
		t.Error("a mkfs time without SOURCE_DATE_EPOCH")
	}
	// A blueprint's container-storage partition reaches the installer.
	opts.ContainerStorage = &wire.InstallPartition{Number: 5, Label: "var-lib-containers", StartMiB: 960}
	if got := request(a); !bytes.Contains(got, []byte("cs_number=5\ncs_label=var-lib-containers\ncs_start_mib=960\n")) {
		t.Errorf("request %q names no container-storage partition", bytes.TrimRight(got, "\x00"))
	}
	// ... and its GPT's GUIDs and file system come from the lock: one lock, one layout.
	if got := request(a); !bytes.Contains(got, []byte("gpt_disk_guid="+wire.NewGPTIdentity(digest.FromString(`{"schemaVersion":1}`).String()).Disk+"\n")) || !bytes.Equal(got, request(a)) || bytes.Equal(got, request(b)) {
		t.Errorf("request %q has no GPT identity from the lock", bytes.TrimRight(got, "\x00"))
	}
}
