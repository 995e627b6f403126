package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeRoot writes files (path inside root → content; a value starting with "->" makes
// a symlink to the rest) under a new root.
func writeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(c, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const oneshot = "[Service]\nType=oneshot\nExecStart=/bin/true\n"

func TestEnabledUnits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"ignition preset enables, disables", map[string]string{
			"etc/systemd/system/a.service":                       oneshot,
			"etc/systemd/system/b.service":                       oneshot,
			"etc/systemd/system-preset/20-ignition.preset":       "enable a.service\ndisable b.service\n",
			"etc/systemd/system/multi-user.target.wants/.keep":   "",
			"etc/systemd/system/unrelated.timer":                 "[Timer]\n",
			"etc/systemd/system-preset/10-comment.preset":        "# enable b.service\n",
			"etc/systemd/system/multi-user.target.wants/x.timer": "->../x.timer",
		}, []string{".keep", "a.service"}[1:]},
		{"wants and requires links", map[string]string{
			"etc/systemd/system/w.service":                         oneshot,
			"etc/systemd/system/r.service":                         oneshot,
			"etc/systemd/system/multi-user.target.wants/w.service": "->../w.service",
			"etc/systemd/system/basic.target.requires/r.service":   "->/etc/systemd/system/r.service",
			"etc/systemd/system/not-enabled.service":               oneshot,
		}, []string{"r.service", "w.service"}},
		{"first preset file and first line win", map[string]string{
			"etc/systemd/system/a.service":              oneshot,
			"etc/systemd/system/b.service":              oneshot,
			"etc/systemd/system-preset/10-x.preset":     "disable a.service\nenable *.service\n",
			"etc/systemd/system-preset/20-y.preset":     "enable a.service\n",
			"usr/lib/systemd/system-preset/05-z.preset": "disable b.service\n",
		}, []string{}},
		{"a preset in /etc hides the same name in /usr", map[string]string{
			"etc/systemd/system/a.service":              oneshot,
			"etc/systemd/system-preset/50-p.preset":     "enable a.service\n",
			"usr/lib/systemd/system-preset/50-p.preset": "disable a.service\n",
		}, []string{"a.service"}},
		{"nothing", map[string]string{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			units, err := EnabledUnits(writeRoot(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, u := range units {
				got = append(got, u.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("enabled %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLoadUnit(t *testing.T) {
	root := writeRoot(t, map[string]string{
		"etc/systemd/system/a.service": "[Unit]\nExecStart=/not/a/service/key\n[Service]\n# comment\nType=oneshot\n" +
			"Environment=A=1 \"B=two words\"\nExecStartPre=-/bin/pre\nExecStart=/bin/one \\\n  --flag\nExecStart=/bin/two\n",
		"etc/systemd/system/a.service.d/10-reset.conf": "[Service]\nExecStart=\nExecStart=/bin/three\n",
		"etc/systemd/system/a.service.d/20-post.conf":  "[Service]\nExecStartPost=/bin/post\n",
		"usr/lib/systemd/system/t@.service":            "[Service]\nExecStart=/bin/templ\n",
	})
	u, err := loadUnit(root, "a.service")
	if err != nil {
		t.Fatal(err)
	}
	if u.Type != "oneshot" || !slices.Equal(u.ExecStart, []string{"/bin/three"}) || !slices.Equal(u.ExecStartPre, []string{"-/bin/pre"}) ||
		!slices.Equal(u.ExecStartPost, []string{"/bin/post"}) || !slices.Equal(u.Environment, []string{"A=1", "B=two words"}) {
		t.Errorf("unit %+v", u)
	}
	// An instance without its own file uses its template.
	if inst, _ := loadUnit(root, "t@x.service"); inst.Path != "/usr/lib/systemd/system/t@.service" || !slices.Equal(inst.ExecStart, []string{"/bin/templ"}) {
		t.Errorf("instance %+v", inst)
	}
	if missing, _ := loadUnit(root, "none.service"); missing.Path != "" {
		t.Errorf("missing unit has path %q", missing.Path)
	}
}

// The runner runs every command of a unit with sh, in the root, logs its output, stops
// at the first failure and names it; "-" ignores a failure; a service still running
// after the grace time counts as started.
func TestUnitRunner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unit    Unit
		status  UnitStatus
		errHas  string
		logHas  []string
		outFile string // a file the unit writes, relative to the root
	}{
		{"oneshot ok, in the root, with its environment", Unit{Name: "ok.service", Path: "x", Type: "oneshot", Environment: []string{"GREETING=hi"},
			ExecStartPre: []string{"-false"}, ExecStart: []string{"echo $GREETING > out", "echo to-log; echo err >&2"}, ExecStartPost: []string{"echo post"}},
			UnitOK, "", []string{"to-log", "err", "post", "+ echo $GREETING > out"}, "out"},
		{"oneshot fails", Unit{Name: "bad.service", Path: "x", Type: "oneshot", ExecStart: []string{"echo before; exit 3", "echo never"}},
			UnitFailed, "exit status 3", []string{"before"}, ""},
		{"pre fails", Unit{Name: "pre.service", Path: "x", ExecStartPre: []string{"exit 1"}, ExecStart: []string{"echo never"}},
			UnitFailed, "exit status 1", nil, ""},
		{"simple service keeps running", Unit{Name: "svc.service", Path: "x", ExecStart: []string{"echo started; sleep 30"}},
			UnitRunning, "", []string{"started"}, ""},
		{"simple service that dies at once", Unit{Name: "dies.service", Path: "x", Type: "simple", ExecStart: []string{"exit 7"}},
			UnitFailed, "exit status 7", nil, ""},
		{"no file", Unit{Name: "gone.service"}, UnitSkipped, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			r := UnitRunner{Root: root, LogDir: filepath.Join(root, "logs"), Grace: 300 * time.Millisecond}
			res, err := r.Run(context.Background(), []Unit{tc.unit})
			if len(res) != 1 || res[0].Status != tc.status {
				t.Fatalf("results %+v, want one %s", res, tc.status)
			}
			if (err != nil) != (tc.errHas != "") || (err != nil && (!strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), tc.unit.Name))) {
				t.Fatalf("error %v, want one naming %s and %q", err, tc.unit.Name, tc.errHas)
			}
			log, _ := os.ReadFile(res[0].Log)
			for _, s := range tc.logHas {
				if !strings.Contains(string(log), s) {
					t.Errorf("log %q lacks %q", log, s)
				}
			}
			if strings.Contains(string(log), "never") && !strings.Contains(string(log), "+ echo never") {
				t.Errorf("ran past a failure: %q", log)
			}
			if tc.outFile != "" {
				if b, _ := os.ReadFile(filepath.Join(root, tc.outFile)); string(b) != "hi\n" {
					t.Errorf("%s holds %q", tc.outFile, b)
				}
			}
		})
	}
}

// A root with its own /bin/sh is entered with chroot: the unit sees the root as /.
func TestUnitRunnerChroots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is missing: install the Debian package busybox-static (make deps)")
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	root := writeRoot(t, map[string]string{"etc/marker": "inside\n"})
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat"} {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	r := UnitRunner{Root: root, LogDir: filepath.Join(root, "logs")}
	res, err := r.Run(context.Background(), []Unit{{Name: "c.service", Path: "x", Type: "oneshot", ExecStart: []string{"cat /etc/marker"}}})
	if err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(res[0].Log); !strings.Contains(string(log), "inside") {
		t.Errorf("the unit did not see the root as /: %q", log)
	}
}

func TestTailLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString(strings.Repeat("x", i%7) + "line\n")
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	for _, tc := range []struct{ n, max, lines, bytes int }{{40, 1 << 20, 40, -1}, {200, 1 << 20, 100, -1}, {40, 50, -1, 50}} {
		got, err := TailLines(p, tc.n, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if tc.lines >= 0 && strings.Count(got, "\n")+1 != tc.lines {
			t.Errorf("n=%d: %d lines", tc.n, strings.Count(got, "\n")+1)
		}
		if tc.bytes >= 0 && len(got) != tc.bytes {
			t.Errorf("max=%d: %d bytes", tc.max, len(got))
		}
		if !strings.HasSuffix(got, "\nxline") {
			t.Errorf("tail does not end with the last line: %q", got[max(0, len(got)-20):])
		}
	}
	if _, err := TailLines(filepath.Join(t.TempDir(), "none"), 1, 1); err == nil {
		t.Error("a missing log gave no error")
	}
}
