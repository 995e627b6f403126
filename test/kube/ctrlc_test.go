package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/snofactory/snofactory/pipeline/depot"
	"github.com/snofactory/snofactory/pipeline/tektondepot"
)

// Ctrl-C on `depot run --tekton` (its cluster settings from the depot file's tekton
// section) as soon as its one PipelineRun runs, before any factory VM: the process exits
// 130, the PipelineRun is cancelled (spec.status Cancelled, then Succeeded False with
// reason Cancelled: tektoncd/pipeline pkg/reconciler/pipelinerun/cancel.go,
// cancelPipelineRun), its pods are deleted (pkg/reconciler/taskrun/taskrun.go,
// failTaskRun), depot.json records the build cancelled, and `depot status` reads the
// cancelled run from the cluster.
func checkDepotCtrlC(t *testing.T, e *pipelineEnv) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a ceiling for a loaded machine
	defer cancel()
	depotFile := writeCtrlCDepot(t, e)
	running := watchRunning(ctx, t, e.c)
	out := filepath.Join(t.TempDir(), "depot-out")
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, e.bin, "depot", "run", "--tekton", "--output-dir", out, depotFile)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent") // the depot file's, not the environment's
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name, ok := <-running
	if !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the depot's PipelineRun never ran\n%s", stdout.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("depot run --tekton after Ctrl-C: %v, want exit code 130\n%s", err, stdout.String())
	}
	pr, err := e.c.WaitObject(ctx, PipelineRuns, "default", name, func(u *unstructured.Unstructured) bool {
		return conditionStatus(u, "Succeeded") == "False"
	})
	if err != nil {
		t.Fatalf("PipelineRun %s never finished: %v", name, err)
	}
	if s, _, _ := unstructured.NestedString(pr.Object, "spec", "status"); s != "Cancelled" || conditionReason(pr) != "Cancelled" {
		t.Errorf("PipelineRun %s: spec.status %q, Succeeded reason %q; want both Cancelled", name, s, conditionReason(pr))
	}
	waitNoPods(ctx, t, e.c, name)
	sum, err := depot.ReadStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Builds) != 1 || sum.Builds[0].Status != depot.StatusCancelled || sum.Builds[0].PipelineRun != name || sum.Status != depot.StatusInterrupted {
		t.Errorf("depot.json: %+v, want interrupted with one build cancelled, PipelineRun %s", sum, name)
	}
	status, err := exec.CommandContext(ctx, e.bin, "depot", "status", "--kubeconfig", e.c.Kubeconfig, out).CombinedOutput()
	if !regexp.MustCompile(`(?m)^\S+\s+cancelled\s`).Match(status) || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("depot status: %v, want the build cancelled and exit code 1 (interrupted)\n%s", err, status)
	}
}

// writeCtrlCDepot writes a depot file of one blueprint (the demo's, warm in the cache)
// whose tekton section says where it runs.
func writeCtrlCDepot(t *testing.T, e *pipelineEnv) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(e.src, "blueprints", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.src, "blueprints", "ctrlc.yaml"), demo, 0o644); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`apiVersion: snofactory.io/v1alpha1
kind: Depot
metadata: {name: ctrlc}
spec:
  blueprints: [blueprints/ctrlc.yaml]
  tekton:
    kubeconfig: %s
    namespace: default
    claim: build
    image: %s
    pushSecret: seed-push
    signingSecret: depot-signing
`, e.c.Kubeconfig, e.ref)
	f := filepath.Join(e.src, "ctrlc-depot.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// watchRunning sends the name of the first depot PipelineRun that Tekton reports running
// (Succeeded Unknown, reason Running: pkg/reconciler/pipelinerun/resources/
// pipelinerunstate.go, GetPipelineConditionStatus), from the PipelineRuns' own watch; the
// earlier cases' runs have all finished. It closes the channel if none does.
func watchRunning(ctx context.Context, t *testing.T, c *Cluster) <-chan string {
	t.Helper()
	lw := depotRuns(ctx, c)
	running := make(chan string, 1)
	go func() {
		defer close(running)
		ev, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
			u, ok := ev.Object.(*unstructured.Unstructured)
			return ok && conditionStatus(u, "Succeeded") == "Unknown" && conditionReason(u) == "Running", nil
		})
		if err != nil {
			t.Errorf("watching the depot's PipelineRuns: %v", err)
			return
		}
		running <- ev.Object.(*unstructured.Unstructured).GetName()
	}()
	return running
}

// waitNoPods waits, on the pods' watch, until no pod of the PipelineRun is left.
func waitNoPods(ctx context.Context, t *testing.T, c *Cluster, pipelineRun string) {
	t.Helper()
	sel := "tekton.dev/pipelineRun=" + pipelineRun
	pods := c.Client.CoreV1().Pods("default")
	lw := bySelector(ctx, sel, pods.List, pods.Watch)
	left := map[string]bool{}
	// Gone before the watch began: the informer's list is empty and no event follows.
	none := func(store cache.Store) (bool, error) { return len(store.List()) == 0, nil }
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, none, func(ev watch.Event) (bool, error) {
		if m, ok := ev.Object.(metav1.Object); ok {
			left[m.GetName()] = ev.Type != watch.Deleted
		}
		for _, l := range left {
			if l {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("pods of the cancelled PipelineRun %s still there: %v (%v)", pipelineRun, err, left)
	}
}

// conditionReason is the reason of the Succeeded condition, "" when absent.
func conditionReason(obj *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Succeeded" {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

// depotRuns lists and watches the depot runner's PipelineRuns in the namespace the cases use.
func depotRuns(ctx context.Context, c *Cluster) *cache.ListWatch {
	res := c.Dynamic.Resource(PipelineRuns).Namespace("default")
	return bySelector(ctx, tektondepot.Selector, res.List, res.Watch)
}

// bySelector lists and watches, with list and watch, what the label selector sel selects.
func bySelector[L runtime.Object](ctx context.Context, sel string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return list(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return watchFn(ctx, o)
		},
	}
}
