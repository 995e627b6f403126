package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bootGraph is install → validate → seal as the engine sees them: each holds one VM, and
// each takes over the VM an earlier stage handed on, or boots its own. boots counts the
// sessions started, closed those closed, with the last stage that owned each.
type bootGraph struct {
	opt    map[string]string
	fail   map[string]bool
	boots  []string // stage that started each session
	closed []string // session IDs, in the order they closed
	dirs   []string
}

func (bg *bootGraph) graph() *Graph {
	mk := func(name string, deps ...string) Stage {
		return Stage{
			Name: name, Version: "1", Options: map[string]string{"v": bg.opt[name]}, Deps: deps,
			Resources: Resources{VMs: 1}, Session: "factory-vm",
			Run: func(ctx context.Context, env *Env) error {
				s := env.TakeSession()
				if s == nil {
					var err error
					if s, err = env.StartSession(); err != nil {
						return err
					}
					bg.boots = append(bg.boots, name)
					bg.dirs = append(bg.dirs, s.Dir)
					id := s.ID
					s.OnClose(func(context.Context) error {
						bg.closed = append(bg.closed, id)
						return nil
					})
				}
				if fi, err := os.Stat(s.Dir); err != nil || fi.Mode().Perm() != 0o700 {
					t := "missing"
					if err == nil {
						t = fi.Mode().String()
					}
					return errors.New("session directory " + t)
				}
				if bg.fail[name] {
					return errors.New(name + " failed")
				}
				env.HandOn(s)
				return os.WriteFile(filepath.Join(env.Out, "out"), []byte(name+bg.opt[name]), 0o644)
			},
		}
	}
	return &Graph{Blueprint: "boot", Stages: []Stage{mk("install"), mk("validate", "install"), mk("seal", "validate")}}
}

func sessionsOf(r *Record) string {
	var s []string
	for _, st := range r.Stages {
		s = append(s, st.Name+"="+st.Session)
	}
	return strings.Join(s, " ")
}

func TestSessionHandedOnThroughTheBuild(t *testing.T) {
	cache := t.TempDir()
	opts := func() BuildOptions {
		o := buildOpts(t, cache)
		// One VM in the whole pool: a stage taking over the session must not ask for
		// another, or the build would wait forever.
		o.Slots = NewPool(Resources{VMs: 1})
		return o
	}
	bg := &bootGraph{opt: map[string]string{"install": "1", "validate": "1", "seal": "1"}, fail: map[string]bool{}}

	// A cold build boots once: install's session runs validate and seal too, and is
	// closed once, at the build's end (seal hands it on; nothing takes it).
	plan, err := Plan(context.Background(), bg.graph(), opts().Cache, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		if p.Session != "factory-vm-1" {
			t.Errorf("plan: %s in session %q, want factory-vm-1", p.Name, p.Session)
		}
	}
	rec, err := Build(context.Background(), bg.graph(), opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionsOf(rec); got != "install=factory-vm-1 validate=factory-vm-1 seal=factory-vm-1" {
		t.Errorf("records: %s", got)
	}
	if !slices.Equal(bg.boots, []string{"install"}) || !slices.Equal(bg.closed, []string{"factory-vm-1"}) {
		t.Errorf("boots %v, closed %v; want one boot by install, closed once", bg.boots, bg.closed)
	}
	for _, d := range bg.dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("session directory %s left behind", d)
		}
	}

	// Resume after install is cached: validate boots the disk from the cache and hands
	// its session on to seal; install's cache entry is used as it is.
	bg.boots, bg.closed = nil, nil
	bg.opt["validate"] = "2"
	plan, _ = Plan(context.Background(), bg.graph(), opts().Cache, nil, Selection{})
	if plan[0].Session != "" || plan[1].Session != "factory-vm-1" || plan[2].Session != "factory-vm-1" {
		t.Errorf("plan after a change to validate: %+v", plan)
	}
	rec, err = Build(context.Background(), bg.graph(), opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionsOf(rec); got != "install= validate=factory-vm-1 seal=factory-vm-1" || cacheStates(rec) != "install=hit validate=miss seal=miss" {
		t.Errorf("records: %s (%s)", got, cacheStates(rec))
	}
	if !slices.Equal(bg.boots, []string{"validate"}) {
		t.Errorf("boots %v, want validate's", bg.boots)
	}

	// A stage that fails closes the session it holds at once; nothing is handed on.
	bg.boots, bg.closed = nil, nil
	bg.opt["install"], bg.fail["validate"] = "2", true
	rec, err = Build(context.Background(), bg.graph(), opts())
	if err == nil {
		t.Fatal("validate's failure was not reported")
	}
	if got := sessionsOf(rec); got != "install=factory-vm-1 validate=factory-vm-1" {
		t.Errorf("records: %s", got)
	}
	if !slices.Equal(bg.closed, []string{"factory-vm-1"}) {
		t.Errorf("closed %v", bg.closed)
	}

	// --until install: the session install handed on ends with the build.
	bg.boots, bg.closed, bg.fail = nil, nil, map[string]bool{}
	bg.opt["install"] = "3"
	o := opts()
	o.Selection = Selection{Until: "install"}
	if _, err := Build(context.Background(), bg.graph(), o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bg.boots, []string{"install"}) || !slices.Equal(bg.closed, []string{"factory-vm-1"}) {
		t.Errorf("--until install: boots %v, closed %v", bg.boots, bg.closed)
	}
	// The pool is whole again: a request for its one VM is granted at once.
	release, err := o.Slots.(*Pool).Acquire(context.Background(), "after", Resources{VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	release()
}

// Ctrl-C while a session is handed on still closes it.
func TestSessionClosedOnInterrupt(t *testing.T) {
	bg := &bootGraph{opt: map[string]string{}, fail: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	g := bg.graph()
	run := g.Stages[1].Run
	g.Stages[1].Run = func(c context.Context, env *Env) error {
		cancel()
		return run(c, env)
	}
	if _, err := Build(ctx, g, buildOpts(t, t.TempDir())); err == nil {
		t.Fatal("an interrupted build succeeded")
	}
	if len(bg.boots) != 1 || !slices.Equal(bg.closed, []string{"factory-vm-1"}) {
		t.Errorf("boots %v, closed %v", bg.boots, bg.closed)
	}
}
