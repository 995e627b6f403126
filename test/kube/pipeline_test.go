package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/siteboot"
)

// pipelineEnv is what TestPipelineRunOnRealCluster's runs share.
type pipelineEnv = Demo

// pipeline/tekton's Pipeline, exactly as it ships, runs the demo blueprint as a real
// PipelineRun: prepare, factory-vm (qemu under TCG: the node has no /dev/kvm) and publish,
// each step the snofactory image (built like `make image`) as its non-root user with no
// capability, with the blueprint (without its extra image: pods reach nothing off the
// bridge), the cache and the output on one volume (a subPath each), the push credentials
// and the depot's signing key as Secrets, and the seed pushed, signed and attested to a
// registry with basic auth on the cluster's bridge. The prepare task itself ran every stage
// up to precache (its step's events say so: the cache was empty). The seed pulls under a
// policy that requires the depot's key and is refused under one that requires another key;
// the verified pull boots with the demo's site medium and reconfigures. A second
// PipelineRun is a cache hit for every stage but publish (which always runs), and pushes
// the same seed. It marks the registry's directory, which names its process: the test's
// cleanup must remove both.
func checkPipelineRun(t *testing.T, e *pipelineEnv) {
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute) // a ceiling for a loaded machine
	defer cancel()

	first := e.run(t, "demo-1")
	e.checkPrepareRan(t, "demo-1")
	rec := e.record(t, "demo-1")
	want := []string{"resolve", "render", "live-iso", "precache", "install", "validate", "seal", "publish"}
	if got := stageNames(rec); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the build's record has stages %v, want %v", got, want)
	}
	for _, s := range rec.Stages[:4] { // prepare's
		if len(s.Artifacts) == 0 {
			t.Errorf("stage %s recorded no artifacts", s.Name)
		}
	}
	if s := rec.Stages[len(rec.Stages)-1]; s.Cache != "miss" {
		t.Errorf("publish: %+v, want it run", s)
	}
	url, digest := first["IMAGE_URL"], first["IMAGE_DIGEST"]
	if url != e.wantSeed || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("the PipelineRun's results are IMAGE_URL=%q IMAGE_DIGEST=%q, want %s and a digest", url, digest, e.wantSeed)
	}
	pulled := e.pullVerified(ctx, t, url)
	// The demo's VM has 512 MiB; the seed boots in as little.
	took := siteboot.Reconfigured(t, siteboot.Boot{Bin: e.bin, Seed: pulled, MemoryMiB: 512})
	t.Logf("the pulled seed took %s from power-on to reconfigured", took.Round(time.Second))

	second := e.run(t, "demo-2")
	for _, s := range e.record(t, "demo-2").Stages {
		if s.Name != "publish" && s.Cache != "hit" {
			t.Errorf("second PipelineRun: stage %s was a cache %s, want a hit", s.Name, s.Cache)
		}
	}
	if second["IMAGE_DIGEST"] != digest {
		t.Errorf("the second PipelineRun pushed %s, the first %s: the same blueprint must give the same seed", second["IMAGE_DIGEST"], digest)
	}
}

// checkPrepareRan reads the events the PipelineRun's prepare step printed (--progress
// json) and checks it ran, not found cached, each stage up to precache and no other.
func (e *pipelineEnv) checkPrepareRan(t *testing.T, pipelineRun string) {
	t.Helper()
	list, err := e.c.Dynamic.Resource(TaskRuns).Namespace("default").List(t.Context(),
		metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + pipelineRun + ",tekton.dev/pipelineTask=prepare"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the PipelineRun's prepare TaskRun: %v (%d found)", err, len(list.Items))
	}
	var ran []string
	for _, line := range strings.Split(stepLog(t, e.c, &list.Items[0], "step-build"), "\n") {
		var ev pipeline.Event // each a JSON text sequence record (RFC 7464): RS, JSON, LF
		if json.Unmarshal([]byte(strings.TrimPrefix(line, "\x1e")), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case pipeline.EventStageDone:
			ran = append(ran, ev.Stage)
		case pipeline.EventStageHit:
			t.Errorf("prepare found stage %s cached in an empty cache", ev.Stage)
		}
	}
	if want := "resolve render live-iso precache"; strings.Join(ran, " ") != want {
		t.Errorf("the prepare task ran stages %v, want %s", ran, want)
	}
}

// startPipelineEnv builds and loads the image, starts the registry, fills
// the volumes, makes the Secrets and creates the Tasks and the Pipeline.
func startPipelineEnv(ctx context.Context, t *testing.T, c *Cluster, mark func(string)) *pipelineEnv {
	t.Helper()
	e, err := SetUpDemo(ctx, c, t.TempDir(), func(reg *registry.Registry) {
		mark(filepath.Dir(reg.StorageDir())) // its directory is in its process's command line
		t.Cleanup(func() {
			if err := reg.Stop(); err != nil {
				t.Errorf("stop test registry: %v", err)
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// run starts a PipelineRun of the demo with its own output directory, waits for it to
// succeed and returns its results.
func (e *pipelineEnv) run(t *testing.T, name string) map[string]string {
	t.Helper()
	results, err := e.Run(t.Context(), name, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// record reads the run record the PipelineRun's last task left in its output directory.
func (e *pipelineEnv) record(t *testing.T, name string) *pipeline.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.out, name, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := pipeline.ReadRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func stageNames(rec *pipeline.Record) []string {
	var names []string
	for _, s := range rec.Stages {
		names = append(names, s.Name)
	}
	return names
}

// pullVerified pulls the seed on the host as a site's depot would, under a trust policy
// that requires the depot's key, and checks a policy requiring another key refuses it. It
// returns the directory of the verified pull.
func (e *pipelineEnv) pullVerified(ctx context.Context, t *testing.T, ref string) string {
	t.Helper()
	var verified string
	for _, tc := range []struct {
		key  string
		want bool
	}{{"depot.pub", true}, {"other.pub", false}} {
		flags := e.policy(t, filepath.Join(e.keys, tc.key))
		dir := filepath.Join(t.TempDir(), "seed")
		args := append(flags, "seed", "pull", ref, dir)
		cmd := exec.CommandContext(ctx, e.bin, args...)
		cmd.Env = append(os.Environ(), "REGISTRY_AUTH_FILE="+filepath.Join(e.keys, "auth.json"))
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.want {
			t.Fatalf("seed pull under a policy requiring %s: %v, want success %v\n%s", tc.key, err, tc.want, out)
		}
		if tc.want {
			verified = dir
		}
	}
	return verified
}

// policy writes a trust policy accepting only seeds under the registry's "demo"
// namespace signed by pub, and the registries.d saying the registry keeps sigstore
// signatures as attachments; it returns the flags naming both (the registry is plain
// HTTP on a private address).
func (e *pipelineEnv) policy(t *testing.T, pub string) []string {
	t.Helper()
	dir := t.TempDir()
	policy, regd := filepath.Join(dir, "policy.json"), filepath.Join(dir, "registries.d")
	p := fmt.Sprintf(`{"default":[{"type":"reject"}],"transports":{"docker":{%q:[{"type":"sigstoreSigned","keyPath":%q}]}}}`,
		e.reg.Addr()+"/demo", pub)
	if err := os.WriteFile(policy, []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(regd, 0o755); err != nil {
		t.Fatal(err)
	}
	d := fmt.Sprintf("docker:\n  %s:\n    use-sigstore-attachments: true\n", e.reg.Addr())
	if err := os.WriteFile(filepath.Join(regd, "depot.yaml"), []byte(d), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--policy", policy, "--registries.d", regd, "--tls-verify=false"}
}
