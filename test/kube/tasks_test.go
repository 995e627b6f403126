package kube

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/tekton"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/testbin"
)

// The snofactory-prepare Task, exactly as pipeline/tekton ships it, runs as a real TaskRun:
// the snofactory image (built like `make image`) in its step, as its non-root user with
// no capability, the demo blueprint (without its extra image: pods reach nothing off the
// bridge) in a read-only source workspace, the cache and output workspaces on a
// PersistentVolumeClaim. The build's record shows every stage up to precache ran.
func TestPrepareTaskOnRealCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute) // a ceiling for a loaded machine
	defer cancel()
	iso, err := conformance.Cached(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, archive, err := SnofactoryImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := Start(t)
	if err := c.ImportArchive(ctx, archive, SnofactoryRepo); err != nil {
		t.Fatal(err)
	}
	work, err := c.Volume(ctx, "default", "work", "source", "cache", "output")
	if err != nil {
		t.Fatal(err)
	}
	writeSource(t, filepath.Join(work, "source"), iso, nil)
	applyTask(t, c, "snofactory-prepare")

	tr := runTaskRun(t, c, `
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: prepare, namespace: default}
spec:
  taskRef: {name: snofactory-prepare}
  params:
  - {name: SNOFACTORY_IMAGE, value: `+ref+`}
  - {name: BLUEPRINT, value: blueprints/demo.yaml}
  workspaces:
  - {name: source, persistentVolumeClaim: {claimName: work}, subPath: source}
  - {name: cache, persistentVolumeClaim: {claimName: work}, subPath: cache}
  - {name: output, persistentVolumeClaim: {claimName: work}, subPath: output}
`)
	if got := conditionStatus(tr, "Succeeded"); got != "True" {
		t.Fatalf("TaskRun prepare did not succeed: %v\nstep log:\n%s", tr.Object["status"], stepLog(t, c, tr, "step-build"))
	}
	b, err := os.ReadFile(filepath.Join(work, "output", "snofactory-out", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := pipeline.ReadRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve", "render", "live-iso", "precache"}
	if len(rec.Stages) != len(want) {
		t.Fatalf("the build ran stages %+v, want %v", rec.Stages, want)
	}
	for i, s := range rec.Stages {
		if s.Name != want[i] || s.Cache != "miss" || len(s.Artifacts) == 0 {
			t.Errorf("stage %d: %+v, want %s run (a cache miss) with artifacts", i, s, want[i])
		}
	}
}

// writeSource fills the source workspace: the demo blueprint and its fragments, and the
// conformance ISO beside them. edits are more of CopyDemo's replacements.
func writeSource(t *testing.T, dir, iso string, edits map[string]string) {
	t.Helper()
	if err := copyFile(iso, filepath.Join(dir, "conformance.iso")); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		testbin.DemoISOLine: "path: ../conformance.iso",
		"  extraImages:\n    - " + testbin.DemoImage + "\n": "",
	}
	maps.Copy(all, edits)
	if _, err := testbin.CopyDemo(dir, all); err != nil {
		t.Fatal(err)
	}
}

// applyTask creates one of pipeline/tekton's Tasks in the default namespace.
func applyTask(t *testing.T, c *Cluster, name string) {
	t.Helper()
	applyFile(t, c, Tasks, tekton.TasksDir+"/"+name+".yaml")
}

// applyFile creates the object in one of pipeline/tekton's files (as gvr) in the default
// namespace, exactly as it ships.
func applyFile(t *testing.T, c *Cluster, gvr schema.GroupVersionResource, file string) {
	t.Helper()
	b, err := fs.ReadFile(tekton.Files(), file)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := c.Dynamic.Resource(gvr).Namespace("default").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s from %s: %v", u.GetKind(), file, err)
	}
}

// stepLog is the log of a TaskRun's step container, for a failure's message.
func stepLog(t *testing.T, c *Cluster, tr *unstructured.Unstructured, container string) string {
	pod, _, _ := unstructured.NestedString(tr.Object, "status", "podName")
	if pod == "" {
		return "(no pod)"
	}
	rc, err := c.Client.CoreV1().Pods(tr.GetNamespace()).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(t.Context())
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return strings.TrimSpace(string(b))
}
