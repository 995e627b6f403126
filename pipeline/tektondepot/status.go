package tektondepot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/depot"
)

// maxListed caps the PipelineRuns one status reads: a depot makes one per build, and an
// answer is not trusted to be small.
const maxListed = 1000

// Status reads the depot's record in dir and, when it ran on Tekton, its PipelineRuns'
// live state, which it records in dir's depot.json unless the depot still runs there (it
// records them itself). force asks for Tekton even when the record says nothing of it.
func Status(ctx context.Context, dir string, o Options, force bool, log *slog.Logger) (*depot.Summary, error) {
	sum, err := depot.ReadStatus(dir)
	if err != nil {
		return nil, badinput.Wrap(err)
	}
	if sum.Tekton == nil {
		if force {
			return nil, badinput.Errorf("depot status --tekton: the depot in %s did not run on Tekton (its depot.json names no PipelineRuns); drop --tekton", dir)
		}
		return sum, nil
	}
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = sum.Tekton.Kubeconfig
	}
	live, err := liveStatus(ctx, dir, sum, kubeconfig, o.Namespace, log)
	if err == nil || force || ctx.Err() != nil {
		return live, err
	}
	// Asked only for the depot's status: the record as saved is still an answer, with why
	// it is not live.
	log.Warn("showing the depot's record as saved, not its PipelineRuns' live state", "err", err)
	return sum, nil
}

// liveStatus is sum with the live state of its PipelineRuns in the cluster kubeconfig names.
func liveStatus(ctx context.Context, dir string, sum *depot.Summary, kubeconfig, namespace string, log *slog.Logger) (*depot.Summary, error) {
	dyn, _, err := Client(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the PipelineRuns of the depot in %s: %w (give --kubeconfig, or --tekton=false for the record as saved)", dir, err)
	}
	ns := sum.Tekton.Namespace
	if namespace != "" {
		ns = namespace
	}
	return cluster{client: dyn, namespace: ns}.status(ctx, dir, sum, log)
}

// status applies the PipelineRuns' state to sum, the record read from dir.
func (k cluster) status(ctx context.Context, dir string, sum *depot.Summary, log *slog.Logger) (*depot.Summary, error) {
	runs, err := k.depotRuns(ctx, sum.Tekton.Depot)
	if err != nil {
		return nil, err
	}
	lock, err := depot.Lock(dir)
	if busy := (*depot.BusyError)(nil); errors.As(err, &busy) {
		// Its runner records them: show the live state, write nothing.
		k.apply(ctx, sum, runs, func(i int, f func(*depot.Result)) { f(&sum.Builds[i]) })
		sum.Status = depot.StatusRunning
		return sum, nil
	}
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	rec, err := depot.NewRecord(dir, sum, log)
	if err != nil {
		return nil, err
	}
	k.apply(ctx, sum, runs, rec.Update)
	sum.Status = settled(sum)
	return sum, rec.Save()
}

// depotRuns lists the PipelineRuns labelled as the depot's, by name.
func (k cluster) depotRuns(ctx context.Context, id string) (map[string]*unstructured.Unstructured, error) {
	list, err := k.client.Resource(pipelineRuns).Namespace(k.namespace).List(ctx,
		metav1.ListOptions{LabelSelector: depotLabel + "=" + labelValue(id), Limit: maxListed})
	if err != nil {
		return nil, fmt.Errorf("listing the depot's PipelineRuns in namespace %s: %w", k.namespace, err)
	}
	runs := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if len(runs) == maxListed {
			break
		}
		runs[list.Items[i].GetName()] = &list.Items[i]
	}
	return runs, nil
}

// apply records each build's PipelineRun's state through update. A build whose run is gone
// keeps what was recorded if it had finished; one still unfinished is failed, naming it.
func (k cluster) apply(ctx context.Context, sum *depot.Summary, runs map[string]*unstructured.Unstructured, update func(int, func(*depot.Result))) {
	for i, b := range sum.Builds {
		if b.PipelineRun == "" {
			continue // never created: the record says why
		}
		pr, ok := runs[b.PipelineRun]
		if !ok {
			if b.Status != depot.StatusSucceeded && b.Status != depot.StatusFailed && b.Status != depot.StatusCancelled {
				update(i, func(r *depot.Result) {
					r.Status, r.Error = depot.StatusFailed, errorf(b.PipelineRun, "is no longer in namespace %s; it was deleted before it finished", k.namespace).Error()
				})
			}
			continue
		}
		out := k.outcome(ctx, pr)
		update(i, func(r *depot.Result) {
			r.Status, r.FailedStage, r.Error = out.Status, out.FailedStage, out.Error
			r.ImageURL, r.ImageDigest = out.ImageURL, out.ImageDigest
			if out.Status != depot.StatusRunning && out.Status != depot.StatusQueued && r.Finished.IsZero() {
				r.Finished = time.Now()
			}
		})
	}
}

// settled is a depot's status once its runner is gone: running while a PipelineRun runs,
// succeeded when every build did, failed when one failed, else interrupted (cancelled, or
// never created).
func settled(sum *depot.Summary) string {
	counts, _, _ := sum.Counts()
	switch {
	case counts[depot.StatusRunning] > 0:
		return depot.StatusRunning
	case counts[depot.StatusSucceeded] == len(sum.Builds):
		return depot.StatusSucceeded
	case counts[depot.StatusFailed] > 0:
		return depot.StatusFailed
	}
	return depot.StatusInterrupted
}
