package kube

import (
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/snofactory/snofactory/pipeline/tekton"
	"github.com/snofactory/snofactory/test/testbin"
)

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
