package tektondepot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/pipeline/tekton"
)

// Tekton's v1 resources: without Tekton's webhook (which converts) only v1 is stored.
var (
	pipelineRuns = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelineruns"}
	taskRuns     = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	kinds        = map[string]schema.GroupVersionResource{
		"Task":     {Group: "tekton.dev", Version: "v1", Resource: "tasks"},
		"Pipeline": {Group: "tekton.dev", Version: "v1", Resource: "pipelines"},
	}
)

// MaxKubeconfig bounds the kubeconfig read: real ones are a few KiB (certificates
// included); a larger file is not one.
const MaxKubeconfig = 1 << 20

// Client reads the kubeconfig at path (empty: $KUBECONFIG, else ~/.kube/config) and
// returns a client of its current context, and that context's namespace.
func Client(path string) (dynamic.Interface, string, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, "", fmt.Errorf("no --kubeconfig, no $KUBECONFIG and no home directory: %w", err)
		}
		path = filepath.Join(home, ".kube", "config")
	}
	b, err := smallfile.Read(path, MaxKubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cc := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
	rest, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dyn, err := dynamic.NewForConfig(rest)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return dyn, ns, nil
}

// Install creates, or updates to what this binary embeds, the Tasks and the Pipeline in
// namespace: a depot always runs the tasks of the snofactory it is.
func Install(ctx context.Context, dyn dynamic.Interface, namespace string) error {
	files, err := fs.Glob(tekton.Files(), path.Join(tekton.TasksDir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range append(files, tekton.PipelineFile) {
		if err := apply(ctx, dyn, namespace, f); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, dyn dynamic.Interface, namespace, file string) error {
	b, err := fs.ReadFile(tekton.Files(), file)
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	gvr, ok := kinds[u.GetKind()]
	if !ok {
		return fmt.Errorf("%s: kind %q is neither Task nor Pipeline", file, u.GetKind())
	}
	u.SetNamespace(namespace)
	res := dyn.Resource(gvr).Namespace(namespace)
	old, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = res.Create(ctx, u, metav1.CreateOptions{})
	case err == nil:
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && apierrors.IsNotFound(err) {
			return fmt.Errorf("installing %s %s in namespace %s: %w (is Tekton Pipelines installed?)", u.GetKind(), u.GetName(), namespace, err)
		}
		return fmt.Errorf("installing %s %s in namespace %s: %w", u.GetKind(), u.GetName(), namespace, err)
	}
	return nil
}
