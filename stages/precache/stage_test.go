package precache

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/test/check"
	"github.com/snofactory/snofactory/test/registry"
)

// lockStage stands in for resolve: it writes a lock.json naming images and its record.
func lockStage(images []Image) pipeline.Stage {
	return pipeline.Stage{Name: handoff.StageResolve, Version: "test", Options: images, Run: func(ctx context.Context, env *pipeline.Env) error {
		b, _ := json.Marshal(map[string]any{"schemaVersion": 1, "images": images})
		if err := os.WriteFile(filepath.Join(env.Out, lockfile.File), b, 0o644); err != nil {
			return err
		}
		return handoff.Write(env, handoff.Resolve{Lock: lockfile.File})
	}}
}

func TestStageKey(t *testing.T) {
	no := false
	base := Options{Registry: registries.Config{Insecure: []string{"127.0.0.1:5000"}}}
	tests := []struct {
		name    string
		change  func(o *Options)
		sameKey bool
	}{
		{"jobs and retries are not part of the key", func(o *Options) { o.Jobs, o.Attempts, o.RetryBase = 32, 3, 1 }, true},
		{"no data disk", func(o *Options) { o.Disk = &no }, false},
		{"mirrors", func(o *Options) {
			o.Registry.Mirrors = []registries.Mirror{{Source: "quay.io", Mirrors: []string{"m"}}}
		}, false},
		{"arch", func(o *Options) { o.Arch = "aarch64" }, false},
	}
	cache := &pipeline.Cache{Dir: t.TempDir()}
	key := func(o Options) string {
		g := &pipeline.Graph{Blueprint: "k", Stages: []pipeline.Stage{lockStage(nil), New(o)}}
		plan, err := pipeline.Plan(context.Background(), g, cache, nil, pipeline.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		// The upstream stage has not run, so the plan carries no final key; the inputs it
		// would be keyed on are what the options change.
		return plan[1].Inputs.Key()
	}
	k0 := key(base)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			if got := key(o) == k0; got != tc.sameKey {
				t.Errorf("same key = %v, want %v", got, tc.sameKey)
			}
		})
	}
	s := New(Options{Registry: registries.Config{RegistriesConf: "/etc/containers/registries.conf", PolicyFile: "/p.json", PullSecret: "pull-secret"}})
	if s.Deps[0] != "resolve" || s.Files["registries.conf"] == "" || s.Files["policy.json"] == "" || s.Secrets[0] != "pull-secret" {
		t.Errorf("stage = deps %v files %v secrets %v", s.Deps, s.Files, s.Secrets)
	}
}

func TestStageBuild(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 2)
	cache := &pipeline.Cache{Dir: t.TempDir()}
	out := t.TempDir()
	authFile := filepath.Join(t.TempDir(), "auth.json")
	os.WriteFile(authFile, []byte(`{"auths":{}}`), 0o600)
	// The pull secret goes to the run's scratch directory: with no usable system temp
	// directory the stage still runs.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	g := &pipeline.Graph{Blueprint: "b", Stages: []pipeline.Stage{lockStage(images), New(Options{Registry: registries.Config{Insecure: []string{reg.Addr()}, PullSecret: "pull-secret"}})}}
	rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: out, Secrets: secretFiles{"pull-secret": authFile}})
	if err != nil {
		t.Fatal(err)
	}
	var rep StageReport
	b, err := os.ReadFile(filepath.Join(out, Name, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &rep)
	if rep.Images != 2 || rep.BlobsFetched != rep.Blobs || rep.DiskBytes == 0 || rep.Layout.BytesCopied != 0 {
		t.Errorf("report = %+v", rep)
	}
	// The layout's blobs are the store's files.
	blobs, _ := filepath.Glob(filepath.Join(out, Name, LayoutDir, "blobs", "sha256", "*"))
	for _, p := range blobs {
		a, _ := os.Stat(p)
		s, err := os.Stat(filepath.Join(cache.Dir, "shared", SharedStore, "sha256", filepath.Base(p)))
		if err != nil || !os.SameFile(a, s) {
			t.Errorf("%s is not a hardlink into the shared store (%v)", filepath.Base(p), err)
		}
	}
	var arts []string
	for _, a := range rec.Stages[1].Artifacts {
		arts = append(arts, a.Path)
	}
	for _, want := range []string{ReportFile, DiskFile, LayoutDir + "/index.json"} {
		found := false
		for _, a := range arts {
			found = found || a == want
		}
		if !found {
			t.Errorf("run record artifacts %v lack %s", arts, want)
		}
	}
}

// precache reads the lock through the shared lock format: one image per pinned reference,
// and a lock it does not understand is refused.
func TestReadImages(t *testing.T) {
	etcd := lockfile.LockedImage{Name: "etcd", Ref: "quay.io/ocp/etcd@sha256:" + strings.Repeat("1", 64), Digest: "sha256:" + strings.Repeat("1", 64), Source: lockfile.SourceRelease}
	extra := etcd
	extra.Name, extra.Source = etcd.Ref, lockfile.SourceExtra
	tests := []struct {
		name    string
		lock    lockfile.Lock
		want    []Image
		wantErr string
	}{
		{"same image twice", lockfile.Lock{SchemaVersion: lockfile.SchemaVersion, Images: []lockfile.LockedImage{etcd, extra}},
			[]Image{{Name: extra.Name, Ref: etcd.Ref, Digest: etcd.Digest}}, ""},
		{"newer schema", lockfile.Lock{SchemaVersion: lockfile.SchemaVersion + 1, Images: []lockfile.LockedImage{etcd}}, nil, "schema version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), lockfile.File)
			if err := lockfile.WriteLock(path, &tc.lock); err != nil {
				t.Fatal(err)
			}
			got, err := ReadImages(path)
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("images = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The agent on the data disk is keyed by its content, not its path, and the disk carries it
// where the node's reader expects it.
func TestStageAgent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, sameAsA, other := write("a", "agent v1"), write("b", "agent v1"), write("c", "agent v2")
	cache := &pipeline.Cache{Dir: t.TempDir()}
	key := func(agent string) string {
		g := &pipeline.Graph{Blueprint: "k", Stages: []pipeline.Stage{lockStage(nil), New(Options{Agent: agent})}}
		plan, err := pipeline.Plan(context.Background(), g, cache, nil, pipeline.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		return plan[1].Inputs.Key()
	}
	if key(a) != key(sameAsA) {
		t.Error("the agent's path changed the key")
	}
	if key(a) == key(other) || key(a) == key("") {
		t.Error("the agent's content is not part of the key")
	}

	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 1)
	out := t.TempDir()
	g := &pipeline.Graph{Blueprint: "b", Stages: []pipeline.Stage{lockStage(images), New(Options{Registry: registries.Config{Insecure: []string{reg.Addr()}}, Agent: other})}}
	if _, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, Name, DiskFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := precachedisk.Extract(context.Background(), f, t.TempDir())
	if err != nil || len(got) != 1 {
		t.Fatalf("extract = %v, %v", got, err)
	}
	b, err := os.ReadFile(filepath.Join(out, Name, LayoutDir, precachedisk.AgentEntry))
	if err != nil || string(b) != "agent v2" {
		t.Errorf("layout agent = %q, %v", b, err)
	}
}
