package tektondepot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/snofactory/snofactory/pipeline/depot"
)

// controller stands in for Tekton's PipelineRun reconciler. What it imitates, from
// tektoncd/pipeline v1.6.0:
//   - the apiserver fills metadata.name from generateName (the fake tracker does not);
//   - a finished run's Succeeded condition is True, or False with a message that only
//     counts the failed tasks (pkg/reconciler/pipelinerun/resources/pipelinerunstate.go,
//     GetPipelineConditionStatus), so the failed task is found on its TaskRun, labelled
//     tekton.dev/pipelineRun and tekton.dev/pipelineTask (pkg/reconciler/pipelinerun/
//     pipelinerun.go, getTaskrunLabels);
//   - spec.status Cancelled ends the run with Succeeded False, reason Cancelled
//     (pkg/reconciler/pipelinerun/cancel.go, cancelPipelineRun); a finished run's reason
//     is Succeeded or Failed (pkg/apis/pipeline/v1/pipelinerun_types.go,
//     PipelineRunReasonSuccessful, PipelineRunReasonFailed);
//   - results come back as status.results [{name, value}].
//
// It holds runs back: it finishes the oldest unfinished run only once `hold` runs are
// unfinished at once or all `total` were created, the least convenient order for a depot
// that must keep its slots; it records the most unfinished runs it saw.
type controller struct {
	dyn          *dynfake.FakeDynamicClient
	hold, total  int
	fail, digest string // the build whose factory-vm fails; the IMAGE_DIGEST given
	never        bool   // runs never finish (until cancelled)

	mu                  sync.Mutex
	created, unfinished []string
	peak                int
	started             chan string
}

func newController(t *testing.T, c *controller) *controller {
	scheme := runtime.NewScheme()
	c.dyn = dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		pipelineRuns: "PipelineRunList", taskRuns: "TaskRunList", kinds["Task"]: "TaskList", kinds["Pipeline"]: "PipelineList"})
	c.started = make(chan string, 16)
	c.dyn.PrependReactor("create", "pipelineruns", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		c.mu.Lock()
		if u.GetName() == "" {
			u.SetName(fmt.Sprintf("%s%05d", u.GetGenerateName(), len(c.created)))
		}
		c.mu.Unlock()
		return false, nil, nil
	})
	w, err := c.dyn.Resource(pipelineRuns).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go c.loop(t, w)
	t.Cleanup(w.Stop)
	return c
}

func (c *controller) loop(t *testing.T, w watch.Interface) {
	for ev := range w.ResultChan() {
		u := ev.Object.(*unstructured.Unstructured)
		spec, _, _ := unstructured.NestedString(u.Object, "spec", "status")
		switch {
		case ev.Type == watch.Added:
			c.mu.Lock()
			c.created = append(c.created, u.GetName())
			c.unfinished = append(c.unfinished, u.GetName())
			c.peak = max(c.peak, len(c.unfinished))
			c.mu.Unlock()
			c.started <- u.GetName()
		case spec == "Cancelled" && succeeded(u) == "":
			c.finish(t, u.GetName(), "False", "Cancelled", "PipelineRun \""+u.GetName()+"\" was cancelled")
			continue
		default:
			continue
		}
		for !c.never {
			c.mu.Lock()
			if len(c.unfinished) == 0 || (len(c.unfinished) < c.hold && len(c.created) < c.total) {
				c.mu.Unlock()
				break
			}
			name := c.unfinished[0]
			c.mu.Unlock()
			c.complete(t, name)
		}
	}
}

// complete ends a run as Tekton would: failed at factory-vm for the failing build.
func (c *controller) complete(t *testing.T, name string) {
	if c.fail != "" && strings.Contains(name, c.fail) {
		tr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
			"metadata": map[string]any{"name": name + "-factory-vm", "namespace": "ns",
				"labels": map[string]any{"tekton.dev/pipelineRun": name, "tekton.dev/pipelineTask": "factory-vm"}},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": "False",
				"message": "\"step-build\" exited with code 1"}}}}}
		if _, err := c.dyn.Resource(taskRuns).Namespace("ns").Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
		c.finish(t, name, "False", "Failed", "Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 1")
		return
	}
	c.finish(t, name, "True", "Succeeded", "Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 0")
}

func (c *controller) finish(t *testing.T, name, status, reason, msg string) {
	res := c.dyn.Resource(pipelineRuns).Namespace("ns")
	u, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	st := map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": status, "reason": reason, "message": msg}}}
	if status == "True" {
		st["results"] = []any{map[string]any{"name": "IMAGE_URL", "value": "registry.example/seed:1"},
			map[string]any{"name": "IMAGE_DIGEST", "value": c.digest}}
	}
	u.Object["status"] = st
	c.mu.Lock()
	for i, n := range c.unfinished {
		if n == name {
			c.unfinished = append(c.unfinished[:i], c.unfinished[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

var goodDigest = "sha256:" + strings.Repeat("ab", 32)

func testConfig(t *testing.T, c *controller, n, slots int) Config {
	src := t.TempDir()
	var builds []depot.Build
	for i := range n {
		p := filepath.Join(src, "bp", fmt.Sprintf("b%d.yaml", i))
		builds = append(builds, depot.Build{Name: fmt.Sprintf("b%d", i), Blueprint: p})
	}
	return Config{Client: c.dyn, Namespace: "ns", Claim: "snofactory", SourceDir: src, Builds: builds, Slots: slots,
		OutputDir: filepath.Join(t.TempDir(), "out"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, fail, digest string
		want               map[string]string // build: status (and failed stage after a slash)
	}{
		{"all succeed", "", goodDigest, map[string]string{"b0": "succeeded", "b1": "succeeded", "b2": "succeeded", "b3": "succeeded"}},
		{"one fails at factory-vm", "b2", goodDigest, map[string]string{"b0": "succeeded", "b1": "succeeded", "b2": "failed/factory-vm", "b3": "succeeded"}},
		{"a digest that is not one", "", "sha256:zz\x1b[2J", map[string]string{"b0": "failed", "b1": "failed", "b2": "failed", "b3": "failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newController(t, &controller{hold: 2, total: 4, fail: tc.fail, digest: tc.digest})
			cfg := testConfig(t, c, 4, 2)
			sum, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.peak != 2 {
				t.Errorf("%d PipelineRuns were unfinished at once, want 2 (the slots)", c.peak)
			}
			read, err := depot.ReadStatus(cfg.OutputDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range append(sum.Builds, read.Builds...) {
				got := b.Status
				if b.FailedStage != "" {
					got += "/" + b.FailedStage
				}
				if got != tc.want[b.Name] {
					t.Errorf("build %s: %s (%s), want %s", b.Name, got, b.Error, tc.want[b.Name])
				}
				if got == "succeeded" && (b.ImageDigest != goodDigest || b.PipelineRun == "" || b.ImageURL == "") {
					t.Errorf("build %s recorded %+v, want its PipelineRun and results", b.Name, b)
				}
				if got != "succeeded" && !strings.Contains(b.Error, "PipelineRun snofactory-"+b.Name+"-") {
					t.Errorf("build %s: error %q does not name its PipelineRun", b.Name, b.Error)
				}
			}
		})
	}
}

// Ctrl-C cancels the PipelineRuns the depot started, and the depot says it was interrupted.
func TestRunCancelled(t *testing.T) {
	c := newController(t, &controller{never: true, total: 3})
	cfg := testConfig(t, c, 3, 2)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-c.started
		<-c.started // both slots taken
		cancel()
	}()
	sum, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	list, err := c.dyn.Resource(pipelineRuns).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("PipelineRuns: %v (%d), want the 2 started", err, len(list.Items))
	}
	for _, pr := range list.Items {
		if s, _, _ := unstructured.NestedString(pr.Object, "spec", "status"); s != "Cancelled" {
			t.Errorf("PipelineRun %s has spec.status %q, want Cancelled", pr.GetName(), s)
		}
	}
	if sum.Status != depot.StatusInterrupted {
		t.Errorf("depot status %s, want interrupted", sum.Status)
	}
	read, err := depot.ReadStatus(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{depot.StatusCancelled, depot.StatusCancelled, depot.StatusInterrupted} // the third never started
	for i, b := range read.Builds {
		if b.Status != want[i] {
			t.Errorf("depot.json: build %s is %s, want %s", b.Name, b.Status, want[i])
		}
	}
	if read.Tekton == nil || read.Tekton.Namespace != "ns" || read.Tekton.Depot == "" {
		t.Errorf("depot.json names no depot on Tekton: %+v", read.Tekton)
	}
	for _, pr := range list.Items {
		if pr.GetLabels()[depotLabel] != read.Tekton.Depot {
			t.Errorf("PipelineRun %s is labelled %v, want %s=%s", pr.GetName(), pr.GetLabels(), depotLabel, read.Tekton.Depot)
		}
	}
}

// A blueprint outside the source directory would not be in the claim's source subPath.
func TestBlueprintOutsideSource(t *testing.T) {
	c := newController(t, &controller{})
	cfg := testConfig(t, c, 1, 1)
	cfg.Builds[0].Blueprint = filepath.Join(os.TempDir(), "elsewhere.yaml")
	if _, err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Run: %v, want the blueprint refused as outside the source directory", err)
	}
}
