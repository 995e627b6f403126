package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"
)

// TektonNamespace is where Tekton's controller reads its config maps (SYSTEM_NAMESPACE).
const TektonNamespace = "tekton-pipelines"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Tasks, TaskRuns and PipelineRuns, always sent as v1: without Tekton's webhook nothing converts.
var (
	Tasks        = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "tasks"}
	TaskRuns     = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	Pipelines    = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelines"}
	PipelineRuns = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelineruns"}
)

// startTekton installs Tekton's CRDs and config maps and runs its controller as a host
// process, with the flags and environment of its Deployment (config/controller.yaml),
// the images pointing at the local ones. The webhook does not run: it only defaults,
// validates and converts, and objects are sent as v1.
func (c *Cluster) startTekton(ctx context.Context) error {
	if err := c.applyTektonObjects(ctx); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	env := []string{"SYSTEM_NAMESPACE=" + TektonNamespace, "KUBERNETES_MIN_VERSION=v1.28.0",
		"CONFIG_DEFAULTS_NAME=config-defaults", "CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability", "CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller", "CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline",
		// Its servers default to fixed ports (8080, 8008, 9090) other programs may hold.
		fmt.Sprintf("PROBES_PORT=%d", ports[0]), fmt.Sprintf("PROFILING_PORT=%d", ports[1]),
		fmt.Sprintf("METRICS_PROMETHEUS_PORT=%d", ports[2]), "METRICS_PROMETHEUS_HOST=127.0.0.1"}
	return c.add(startProc(c.Dir, "tekton-controller", filepath.Join(c.bins.tekton, "controller"), env,
		"-kubeconfig", c.Kubeconfig, "-disable-ha",
		"-entrypoint-image", entrypointImage, "-nop-image", nopImage,
		// Results come from termination messages (feature-flags results-from), so the
		// sidecar-logs image is never run; the flag is required.
		"-sidecarlogresults-image", nopImage, "-workingdirinit-image", workingDirInitImage,
		"-shell-image", BusyboxImage, "-shell-image-win", BusyboxImage))
}

func (c *Cluster) applyTektonObjects(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TektonNamespace}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", TektonNamespace, err)
	}
	configs, _ := filepath.Glob(filepath.Join(c.bins.tekton, "config", "*.yaml"))
	for _, f := range configs {
		var cm corev1.ConfigMap
		if err := readYAML(f, &cm); err != nil {
			return err
		}
		cm.Namespace = TektonNamespace
		if _, err := c.Client.CoreV1().ConfigMaps(TektonNamespace).Create(ctx, &cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Tekton's config map %s: %w", cm.Name, err)
		}
	}
	crds, _ := filepath.Glob(filepath.Join(c.bins.tekton, "crds", "*.yaml"))
	for _, f := range crds {
		var m map[string]any
		if err := readYAML(f, &m); err != nil {
			return err
		}
		crd, err := c.Dynamic.Resource(crdGVR).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Tekton's CRD from %s: %w", filepath.Base(f), err)
		}
		if err := c.WaitFor(ctx, crdGVR, "", crd.GetName(), established); err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	return conditionStatus(crd, "Established") == "True"
}

// conditionStatus is the status of a condition in status.conditions, "" when absent.
func conditionStatus(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// WaitFor watches one object until cond holds, and returns it; it ends early with ctx or
// when a server of the cluster exits.
func (c *Cluster) WaitFor(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, cond func(*unstructured.Unstructured) bool) error {
	_, err := c.WaitObject(ctx, gvr, ns, name, cond)
	return err
}

// WaitObject is WaitFor returning the object that met cond.
func (c *Cluster) WaitObject(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, cond func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, error) {
	res := c.Dynamic.Resource(gvr)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return res.Namespace(ns).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return res.Namespace(ns).Watch(ctx, o)
		},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.cancelOnExit(ctx, cancel)
	ev, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		return ok && cond(u), nil
	})
	if err != nil {
		if e := c.exitedServer(); e != nil {
			return nil, e
		}
		return nil, err
	}
	return ev.Object.(*unstructured.Unstructured), nil
}
