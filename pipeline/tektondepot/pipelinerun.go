package tektondepot

import (
	"context"
	"fmt"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/snofactory/snofactory/pipeline/depot"
)

// Bounds on what is taken from an API answer into depot.json: a PipelineRun's status is
// written by whoever can write it, and the table prints it.
const (
	maxMessage = 2 << 10
	maxResult  = 1 << 10
)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// create makes a build's PipelineRun of the Pipeline named snofactory and returns its name.
func (r *runner) create(ctx context.Context, build, blueprint string) (string, error) {
	params := []any{
		map[string]any{"name": "BLUEPRINT", "value": blueprint},
		map[string]any{"name": "OUTPUT_DIR", "value": "builds/" + build},
		map[string]any{"name": "PROGRESS", "value": "json"},
	}
	if r.cfg.Image != "" {
		params = append(params, map[string]any{"name": "SNOFACTORY_IMAGE", "value": r.cfg.Image})
	}
	claim := func(name, sub string) any {
		return map[string]any{"name": name, "subPath": sub, "persistentVolumeClaim": map[string]any{"claimName": r.cfg.Claim}}
	}
	ws := []any{claim("source", "source"), claim("cache", "cache"), claim("output", "output")}
	if r.cfg.PushSecret != "" {
		ws = append(ws, map[string]any{"name": "dockerconfig", "secret": map[string]any{"secretName": r.cfg.PushSecret}})
	}
	if r.cfg.SigningSecret != "" {
		ws = append(ws, map[string]any{"name": "signing-key", "secret": map[string]any{"secretName": r.cfg.SigningSecret}})
	}
	pr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
		"metadata": map[string]any{"generateName": runPrefix(build), "namespace": r.cfg.Namespace,
			"labels": map[string]any{managedBy: managedByDepot, depotLabel: r.depotID, buildLabel: labelValue(build)}},
		"spec": map[string]any{"pipelineRef": map[string]any{"name": "snofactory"}, "params": params, "workspaces": ws},
	}}
	made, err := r.cfg.Client.Resource(pipelineRuns).Namespace(r.cfg.Namespace).Create(ctx, pr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating the PipelineRun of build %s in namespace %s: %w", build, r.cfg.Namespace, err)
	}
	return made.GetName(), nil
}

// wait watches a PipelineRun until its Succeeded condition is True or False; a watch the
// server ends is started again from the last version seen.
func (r *runner) wait(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	res := r.cfg.Client.Resource(pipelineRuns).Namespace(r.cfg.Namespace)
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	for {
		w, err := res.Watch(ctx, opts)
		if err != nil {
			return nil, errorf(name, "watching: %w", err)
		}
		// Read once the watch is open: a run that finished before it (a cache hit is quick)
		// sends no event a watch from a resourceVersion after it would see.
		if u, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil && finished(u) {
			w.Stop()
			return u, nil
		}
		u, err := r.next(ctx, w, name, &opts)
		w.Stop()
		if u != nil || err != nil {
			return u, err
		}
	}
}

// next reads one watch until the run finishes (returned), the watch ends (nil, nil) or
// the context does.
func (r *runner) next(ctx context.Context, w watch.Interface, name string, opts *metav1.ListOptions) (*unstructured.Unstructured, error) {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil, errorf(name, "%w", ctx.Err())
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil, nil
		}
		if ev.Type == watch.Error {
			opts.ResourceVersion = "" // expired: start at the current state
			return nil, nil
		}
		u, isU := ev.Object.(*unstructured.Unstructured)
		switch {
		case !isU || u.GetName() != name:
		case ev.Type == watch.Deleted:
			return nil, errorf(name, "deleted before it finished")
		case finished(u):
			return u, nil
		default:
			opts.ResourceVersion = u.GetResourceVersion()
		}
	}
}

func finished(u *unstructured.Unstructured) bool {
	s := succeeded(u)
	return s == "True" || s == "False"
}

// cancel asks Tekton to stop a PipelineRun (spec.status Cancelled: its TaskRuns' pods are
// deleted) and says whether it could; the depot's context is gone, so this call has its own.
func (r *runner) cancel(name string) bool {
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	patch := []byte(`{"spec":{"status":"Cancelled"}}`)
	_, err := r.cfg.Client.Resource(pipelineRuns).Namespace(r.cfg.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		r.cfg.Log.Warn("could not cancel the PipelineRun", "pipelineRun", name, "error", err.Error())
		return false
	}
	r.cfg.Log.Info("PipelineRun cancelled", "pipelineRun", name)
	return true
}

// succeeded is the status of a run's Succeeded condition ("" while it has none).
func succeeded(u *unstructured.Unstructured) string {
	s, _ := condition(u)
	return s
}

func condition(u *unstructured.Unstructured) (status, message string) {
	m := succeededCondition(u)
	status, _ = m["status"].(string)
	message, _ = m["message"].(string)
	return status, message
}

func reason(u *unstructured.Unstructured) string {
	r, _ := succeededCondition(u)["reason"].(string)
	return r
}

func succeededCondition(u *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if t, _ := m["type"].(string); t == "Succeeded" {
			return m
		}
	}
	return nil
}

// cluster is where a depot's PipelineRuns are.
type cluster struct {
	client    dynamic.Interface
	namespace string
}

// outcome is what depot.json records of a finished PipelineRun.
type outcome struct {
	Status, FailedStage, Error string
	ImageURL, ImageDigest      string
}

// outcome reads a PipelineRun's state: running (no verdict yet, or its finally tasks run),
// queued (pending), cancelled (Succeeded False, reason Cancelled: tektoncd/pipeline v1.6.0
// pkg/reconciler/pipelinerun/resources/pipelinerunstate.go, GetPipelineConditionStatus,
// and pkg/reconciler/pipelinerun/cancel.go, cancelPipelineRun), failed with the failed
// task, or succeeded with its checked results.
func (k cluster) outcome(ctx context.Context, pr *unstructured.Unstructured) outcome {
	name := pr.GetName()
	status, msg := condition(pr)
	switch {
	case status != "True" && status != "False":
		if spec, _, _ := unstructured.NestedString(pr.Object, "spec", "status"); spec == "PipelineRunPending" {
			return outcome{Status: depot.StatusQueued}
		}
		return outcome{Status: depot.StatusRunning}
	case status == "False" && reason(pr) == "Cancelled":
		return outcome{Status: depot.StatusCancelled, Error: errorf(name, "cancelled: %s", clip(msg, maxMessage)).Error()}
	case status == "False":
		o := outcome{Status: depot.StatusFailed, Error: errorf(name, "%s", clip(msg, maxMessage)).Error()}
		o.FailedStage, o.Error = k.failedTask(ctx, name, o.Error)
		return o
	}
	results := map[string]string{}
	list, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	for _, x := range list {
		m, _ := x.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		results[n] = v
	}
	o := outcome{Status: depot.StatusSucceeded, ImageURL: results["IMAGE_URL"], ImageDigest: results["IMAGE_DIGEST"]}
	switch {
	case o.ImageURL == "" || len(o.ImageURL) > maxResult:
		return outcome{Status: depot.StatusFailed, Error: errorf(name, "succeeded without an IMAGE_URL result of at most %d bytes", maxResult).Error()}
	case !digestRE.MatchString(o.ImageDigest):
		return outcome{Status: depot.StatusFailed, Error: errorf(name, "its IMAGE_DIGEST result %q is not a sha256 digest", clip(o.ImageDigest, 80)).Error()}
	}
	return o
}

// failedTask names the pipeline task whose TaskRun failed (the depot's failed stage) and
// gives its message; Tekton's PipelineRun message only counts the failures.
func (k cluster) failedTask(ctx context.Context, name, fallback string) (string, string) {
	list, err := k.client.Resource(taskRuns).Namespace(k.namespace).List(ctx,
		metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + name, Limit: 50})
	if err != nil {
		return "", fallback
	}
	for i := range list.Items {
		tr := &list.Items[i]
		if s, msg := condition(tr); s == "False" {
			task := clip(tr.GetLabels()["tekton.dev/pipelineTask"], 63)
			return task, errorf(name, "task %s (TaskRun %s): %s", task, clip(tr.GetName(), 253), clip(msg, maxMessage)).Error()
		}
	}
	return "", fallback
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
