package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// A seal cancelled while containers stop starts no more stops, fails the step with the
// cancellation and runs nothing after it.
func TestSealContainersStopCancelled(t *testing.T) {
	n := newSealNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	n.onStop = func() { once.Do(cancel) }
	_, err := n.sealer().Seal(ctx)
	if err == nil || !strings.Contains(err.Error(), "containers-stop") || !errors.Is(err, context.Canceled) {
		t.Fatalf("seal = %v, want the containers-stop step cancelled", err)
	}
	if n.stopsSeen > lcaContainerStops {
		t.Errorf("%d stops started after the cancellation, at most %d were under way", n.stopsSeen, lcaContainerStops)
	}
	if n.index("crictl pods -q") >= 0 || n.index("systemctl stop crio.service") >= 0 {
		t.Error("the seal went on after it was cancelled")
	}
}

// A pull secret file a MachineConfig owns is never removed: it must hold the placeholder,
// and the seal refuses, naming the file and never its content, when it holds anything else.
func TestSealPullSecretFiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		target   string
		kubelet  string // the kubelet's file before the step
		owned    bool   // a currentconfig owns it and /etc/containers/auth.json
		wantErr  string
		wantKept []string
		wantGone []string
	}{
		{name: "openshift, placeholder", target: "openshift", kubelet: PlaceholderPullSecret + "\n", owned: true,
			wantKept: []string{kubeletAuthFile, "/etc/containers/auth.json"}, wantGone: []string{"/root/.docker/config.json"}},
		{name: "openshift, the build's secret", target: "openshift", kubelet: buildPullSecret + "\n", owned: true,
			wantErr: kubeletAuthFile + ", which a MachineConfig owns, holds a pull secret other than the placeholder", wantKept: []string{kubeletAuthFile}},
		{name: "coreos, no machine-config daemon", target: "coreos", kubelet: buildPullSecret,
			wantGone: []string{kubeletAuthFile, "/root/.docker/config.json", "/etc/containers/auth.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &sealNode{t: t, root: t.TempDir()}
			n.write(kubeletAuthFile[1:], tc.kubelet, 0o600)
			n.write("root/.docker/config.json", buildPullSecret, 0o600)
			n.write("etc/containers/auth.json", PlaceholderPullSecret, 0o600)
			if tc.owned {
				n.write(MCDCurrentConfig[1:], `{"spec":{"config":{"storage":{"files":[{"path":"/etc/containers/auth.json"},{"path":"`+kubeletAuthFile+`"}]}}}}`, 0o644)
			}
			s := Sealer{Root: n.root, Request: wire.SealRequest{Version: 1, Target: oskind.Kind(tc.target)}}
			_, err := s.removePullSecretFiles()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), buildSecretToken):
				t.Errorf("the error quotes the secret: %v", err)
			}
			for _, p := range tc.wantKept {
				if _, err := os.Stat(filepath.Join(n.root, p)); err != nil {
					t.Errorf("%s is gone: %v", p, err)
				}
			}
			for _, p := range tc.wantGone {
				if _, err := os.Stat(filepath.Join(n.root, p)); err == nil {
					t.Errorf("%s survived", p)
				}
			}
		})
	}
}

// The rollback step refuses what it cannot seal and leaves a lone booted deployment alone.
func TestSealRollbackDeployments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deps    []deployment
		wantErr string
		detail  string
	}{
		{name: "booted alone", deps: []deployment{{osname: "rhcos", checksum: checksum("b"), booted: true}}, detail: "none: only the booted deployment"},
		{name: "staged update", deps: []deployment{{osname: "rhcos", checksum: checksum("s"), staged: true}, {osname: "rhcos", checksum: checksum("b"), booted: true}},
			wantErr: "is staged (an OS update waits for a reboot)"},
		{name: "none booted", deps: []deployment{{osname: "rhcos", checksum: checksum("x")}}, wantErr: "no booted deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &sealNode{t: t, root: t.TempDir(), deployments: tc.deps}
			s := Sealer{Root: n.root, Run: n.run, Request: wire.SealRequest{Version: 1, Target: "openshift"}}
			detail, err := s.rollbackAction().do(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if n.index("ostree admin undeploy") >= 0 {
					t.Error("a deployment was undeployed before the refusal")
				}
				return
			}
			if err != nil || detail != tc.detail {
				t.Errorf("detail %q, err %v; want %q", detail, err, tc.detail)
			}
		})
	}
}

// Every Changes entry of both plans is a node path or an API object, never prose: a drift
// check reads them (steps.Step Changes).
func TestSealPlanChangesArePrecise(t *testing.T) {
	apiObject := regexp.MustCompile(`^[A-Z][A-Za-z]+ [^ ]+$`)
	for _, target := range []string{"openshift", "coreos"} {
		plan := Sealer{BootDir: "/boot", Request: wire.SealRequest{Version: 1, Target: oskind.Kind(target), RecertImage: "<recert image>",
			EtcdImage: "<etcd image>", SiteIdentity: "x", SourceDateEpoch: 1}}.Plan()
		for _, st := range plan {
			for _, c := range st.Changes {
				if !strings.HasPrefix(c, "/") && !apiObject.MatchString(c) {
					t.Errorf("%s: step %s changes %q: neither a node path nor KIND NAME", target, st.Name, c)
				}
				if target == "openshift" && st.Name != "recert" && c == kubeletAuthFile {
					t.Errorf("step %s changes %s, which a MachineConfig owns", st.Name, c)
				}
			}
		}
	}
}

// The reconfiguration unit runs after the host keys exist (recert replaces them and stops
// when there are none) and after update-ca-trust, as lifecycle-agent's does.
func TestReconfigureUnitOrder(t *testing.T) {
	for _, line := range []string{"Wants=network-online.target sshd-keygen.target",
		"After=network-online.target coreos-update-ca-trust.service sshd-keygen.target"} {
		if !strings.Contains(ReconfigureUnit, "\n"+line+"\n") {
			t.Errorf("the unit lacks %q:\n%s", line, ReconfigureUnit)
		}
	}
}

// Each step's Changes covers every node file the step writes or removes: the steps run one
// by one on the stand-in node and the tree is compared before and after each. Exempt are
// the cluster's own writes: etcd's database (API objects, listed as such) and the files the
// MCO's daemon writes while the seal waits for its rollout.
func TestSealChangesListEveryPath(t *testing.T) {
	for _, target := range []oskind.Kind{oskind.OpenShift, oskind.CoreOS} {
		t.Run(string(target), func(t *testing.T) {
			n := newSealNode(t)
			s := n.sealer()
			s.Request.Target, s.BootDir = target, filepath.Join(n.root, "boot")
			n.write("boot/ignition/config.ign", "{}", 0o600)
			if target == oskind.CoreOS { // the conformance OS has no machine-config daemon
				if err := os.Remove(filepath.Join(n.root, MCDCurrentConfig)); err != nil {
					t.Fatal(err)
				}
				n.write("usr/lib/systemd/systemd", "ELF", 0o755) // so the hook's unit is installed
			}
			checkChangesListed(t, n, s.withDefaults())
		})
	}
}

func checkChangesListed(t *testing.T, n *sealNode, s Sealer) {
	ctx := context.Background()
	for _, a := range s.actions() {
		before := snapshot(t, n.root)
		if _, err := a.do(ctx); err != nil {
			t.Fatalf("step %s: %v", a.Name, err)
		}
		for _, p := range changedPaths(before, snapshot(t, n.root)) {
			if a.Name == "ignition-config" && p == "/boot/ignition/config.ign" {
				continue // a host path: the step lists the boot directory as the caller named it
			}
			if strings.HasPrefix(p, "/var/lib/etcd/") || a.Name == "pull-secret-rollout" {
				continue
			}
			if !slices.ContainsFunc(a.Changes, func(c string) bool { return covers(c, p) }) {
				t.Errorf("step %s changed %s, which its Changes %q do not list", a.Name, p, a.Changes)
			}
		}
	}
}

// snapshot maps each file and link under root (as a node path) to its mode and content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		b, _ := os.ReadFile(p)
		if d.Type()&fs.ModeSymlink != 0 {
			b = []byte(must(os.Readlink(p)))
		}
		rel, _ := filepath.Rel(root, p)
		out["/"+filepath.ToSlash(rel)] = fi.Mode().String() + "\x00" + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// changedPaths are the node paths added, removed or changed between two snapshots.
func changedPaths(before, after map[string]string) []string {
	var out []string
	for p, v := range after {
		if w, ok := before[p]; !ok || w != v {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// covers reads a Changes entry as steps.Step documents it.
func covers(c, p string) bool {
	switch {
	case !strings.HasPrefix(c, "/"):
		return false
	case strings.HasSuffix(c, "/"):
		return strings.HasPrefix(p, c)
	case strings.Contains(c, "/**/"):
		pre, base, _ := strings.Cut(c, "/**/")
		return strings.HasPrefix(p, pre+"/") && path.Base(p) == base
	}
	parts := strings.Split(p, "/")
	for i := len(parts); i > 1; i-- {
		if ok, _ := path.Match(c, strings.Join(parts[:i], "/")); ok {
			return true
		}
	}
	return false
}
