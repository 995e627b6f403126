package resolve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/stages/internal/registries"
)

// Describe (`release info`) reads its auth file and registries.conf through smallfile
// before any registry is asked: a FIFO, /dev/zero, a directory, a huge or a missing file
// is bad input naming the file (and the cap, where it is too large), and the registry
// sees no request.
func TestDescribeRefusesSpecialInputs(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	kinds := []struct {
		name string
		make func(p string, limit int64) error
		want string
	}{
		{"fifo", func(p string, _ int64) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"/dev/zero", func(p string, _ int64) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"directory", func(p string, _ int64) error { return os.Mkdir(p, 0o700) }, "not a regular file"},
		{"over the cap", func(p string, limit int64) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(p, limit+1)
		}, "larger than %d bytes"},
		{"missing", func(string, int64) error { return nil }, "no such file"},
	}
	inputs := []struct {
		name  string
		limit int64
		req   func(p string) InfoRequest
	}{
		{"--authfile", pipeline.MaxSecretFile, func(p string) InfoRequest { return InfoRequest{AuthFile: p} }},
		{"--registries-conf", registries.MaxRegistriesConf, func(p string) InfoRequest { return InfoRequest{RegistriesConf: p} }},
	}
	for _, in := range inputs {
		for _, k := range kinds {
			t.Run(in.name+"/"+k.name, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "input")
				if err := k.make(p, in.limit); err != nil {
					t.Fatal(err)
				}
				req := in.req(p)
				req.Ref, req.Insecure = host+"/ocp/release:4.16", []string{host}
				_, err := Describe(t.Context(), req)
				want := k.want
				if strings.Contains(want, "%d") {
					want = fmt.Sprintf(want, in.limit)
				}
				if !badinput.Is(err) || !strings.Contains(fmt.Sprint(err), p) || !strings.Contains(fmt.Sprint(err), want) {
					t.Errorf("Describe = %v; want bad input naming %s and saying %q", err, p, want)
				}
			})
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the registry was asked %d times before the inputs were refused", n)
	}
}
