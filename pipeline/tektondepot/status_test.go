package tektondepot

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snofactory/snofactory/pipeline/depot"
)

// pipelineRun is a depot's PipelineRun as Tekton leaves it: labelled as the runner labels
// it, its Succeeded condition (status, reason) as pipelinerunstate.go's
// GetPipelineConditionStatus sets it, "" for none yet.
func pipelineRun(name, depotID, status, reason string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
		"metadata": map[string]any{"name": name, "namespace": "ns",
			"labels": map[string]any{managedBy: managedByDepot, depotLabel: depotID}},
		"spec": map[string]any{"pipelineRef": map[string]any{"name": "snofactory"}}}}
	if status != "" {
		st := map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": status, "reason": reason, "message": reason + " message"}}}
		if status == "True" {
			st["results"] = []any{map[string]any{"name": "IMAGE_URL", "value": "registry.example/seed:1"},
				map[string]any{"name": "IMAGE_DIGEST", "value": goodDigest}}
		}
		u.Object["status"] = st
	}
	return u
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name      string
		runs      map[string][2]string // PipelineRun: its condition's status and reason
		held      bool                 // a runner still holds the depot's lock
		want      map[string]string    // build: status (and failed stage after a slash)
		wantDepot string
	}{
		{"runner gone, one still running", map[string][2]string{"pr-0": {"True", "Succeeded"}, "pr-1": {"False", "Failed"}, "pr-2": {"Unknown", "Running"}},
			false, map[string]string{"b0": "succeeded", "b1": "failed/factory-vm", "b2": "running", "b3": "failed", "b4": "interrupted"}, depot.StatusRunning},
		{"runner gone, cancelled", map[string][2]string{"pr-0": {"True", "Succeeded"}, "pr-1": {"False", "Cancelled"}, "pr-2": {"False", "Cancelled"}, "pr-3": {"True", "Succeeded"}},
			false, map[string]string{"b0": "succeeded", "b1": "cancelled", "b2": "cancelled", "b3": "succeeded", "b4": "interrupted"}, depot.StatusInterrupted},
		{"runner alive", map[string][2]string{"pr-0": {"True", "Succeeded"}, "pr-1": {"", ""}, "pr-2": {"Unknown", "CancelledRunningFinally"}, "pr-3": {"False", "PipelineRunTimeout"}},
			true, map[string]string{"b0": "succeeded", "b1": "running", "b2": "running", "b3": "failed", "b4": "queued"}, depot.StatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newController(t, &controller{never: true})
			dir := writeRecord(t, "d1")
			for name, cond := range tc.runs {
				create(t, c, pipelineRun(name, "d1", cond[0], cond[1]))
			}
			// Another depot's run of the same build name, and a stray of this depot's no
			// build names, are not this depot's builds.
			create(t, c, pipelineRun("pr-3-other", "d2", "True", "Succeeded"))
			create(t, c, pipelineRun("pr-stray", "d1", "False", "Failed"))
			failTask(t, c, "pr-1", "factory-vm")
			before, _ := os.ReadFile(filepath.Join(dir, depot.StatusFile))
			if tc.held {
				lock, err := depot.Lock(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Close()
			}
			rec, err := depot.ReadStatus(dir)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := cluster{client: c.dyn, namespace: "ns"}.status(t.Context(), dir, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			checkBuilds(t, "printed", sum, tc.want, tc.wantDepot)
			after, _ := os.ReadFile(filepath.Join(dir, depot.StatusFile))
			if tc.held {
				if string(after) != string(before) {
					t.Errorf("depot.json was written while its runner holds the lock")
				}
				return
			}
			var saved depot.Summary
			if err := json.Unmarshal(after, &saved); err != nil {
				t.Fatal(err)
			}
			checkBuilds(t, "depot.json", &saved, tc.want, tc.wantDepot)
		})
	}
}

func checkBuilds(t *testing.T, where string, sum *depot.Summary, want map[string]string, wantDepot string) {
	t.Helper()
	if sum.Status != wantDepot {
		t.Errorf("%s: depot %s, want %s", where, sum.Status, wantDepot)
	}
	for _, b := range sum.Builds {
		got := b.Status
		if b.FailedStage != "" {
			got += "/" + b.FailedStage
		}
		if got != want[b.Name] {
			t.Errorf("%s: build %s is %s (%s), want %s", where, b.Name, got, b.Error, want[b.Name])
		}
		if got == depot.StatusSucceeded && b.ImageDigest != goodDigest {
			t.Errorf("%s: build %s has digest %q", where, b.Name, b.ImageDigest)
		}
		if (got == depot.StatusFailed || got == depot.StatusCancelled) && !strings.Contains(b.Error, b.PipelineRun) {
			t.Errorf("%s: build %s: error %q does not name its PipelineRun", where, b.Name, b.Error)
		}
	}
}

// writeRecord leaves what a depot on Tekton whose runner died leaves: b0..b3 running with
// their PipelineRuns pr-0..pr-3, b4 not yet created.
func writeRecord(t *testing.T, id string) string {
	dir := t.TempDir()
	sum := &depot.Summary{Status: depot.StatusRunning, Started: time.Now(), Tekton: &depot.TektonRun{Namespace: "ns", Depot: id}}
	for i, n := range []string{"b0", "b1", "b2", "b3", "b4"} {
		r := depot.Result{Build: depot.Build{Name: n, Blueprint: n + ".yaml"}, Status: depot.StatusRunning, Attempts: 1}
		if i < 4 {
			r.PipelineRun = "pr-" + n[1:]
		} else {
			r.Status = depot.StatusQueued
		}
		sum.Builds = append(sum.Builds, r)
	}
	if err := depot.SaveStatus(dir, sum); err != nil {
		t.Fatal(err)
	}
	return dir
}

func create(t *testing.T, c *controller, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := c.dyn.Resource(pipelineRuns).Namespace("ns").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-c.started
}

// failTask leaves the failed TaskRun of pipeline task task in PipelineRun pr, labelled as
// Tekton labels it (pkg/reconciler/pipelinerun/pipelinerun.go, getTaskrunLabels).
func failTask(t *testing.T, c *controller, pr, task string) {
	tr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"name": pr + "-" + task, "namespace": "ns",
			"labels": map[string]any{"tekton.dev/pipelineRun": pr, "tekton.dev/pipelineTask": task}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": "False",
			"message": "\"step-build\" exited with code 1"}}}}}
	if _, err := c.dyn.Resource(taskRuns).Namespace("ns").Create(t.Context(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A record without Tekton is printed as saved; --tekton on it says what to do.
func TestStatusNotTekton(t *testing.T) {
	dir := t.TempDir()
	if err := depot.SaveStatus(dir, &depot.Summary{Status: depot.StatusSucceeded, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := Status(t.Context(), dir, Options{Kubeconfig: "/nonexistent"}, false, log); err != nil {
		t.Errorf("a local depot's status: %v", err)
	}
	if _, err := Status(t.Context(), dir, Options{}, true, log); err == nil || !strings.Contains(err.Error(), "did not run on Tekton") {
		t.Errorf("--tekton on a local depot: %v", err)
	}
}

// A plain status asks the cluster the run was given (its kubeconfig path is recorded, a
// flag overrides it); when that cannot be read it prints the record as saved and says why,
// while --tekton insists.
func TestStatusWithoutTheCluster(t *testing.T) {
	dir := t.TempDir()
	recorded := filepath.Join(dir, "gone", "kubeconfig")
	sum := &depot.Summary{Status: depot.StatusRunning, Started: time.Now(),
		Tekton: &depot.TektonRun{Namespace: "ns", Depot: "d1", Kubeconfig: recorded},
		Builds: []depot.Result{{Build: depot.Build{Name: "b0"}, Status: depot.StatusRunning, PipelineRun: "pr-0"}}}
	if err := depot.SaveStatus(dir, sum); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		flag       string
		force      bool
		wantErr    string // "" for the saved record
		wantLogged string
	}{
		{"recorded kubeconfig, plain status", "", false, "", recorded},
		{"recorded kubeconfig, --tekton", "", true, recorded, ""},
		{"--kubeconfig overrides the record", "/flag/kubeconfig", true, "/flag/kubeconfig", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))
			got, err := Status(t.Context(), dir, Options{Kubeconfig: tc.flag}, tc.force, log)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			saved, err := depot.ReadStatus(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Builds[0].PipelineRun != "pr-0" || got.Status != saved.Status || got.Builds[0].Status != saved.Builds[0].Status {
				t.Errorf("status = %+v, want the record as saved (%+v)", got, saved)
			}
			if !strings.Contains(logged.String(), "as saved") || !strings.Contains(logged.String(), tc.wantLogged) {
				t.Errorf("logged %q, want why the record is not live, naming %s", logged.String(), tc.wantLogged)
			}
		})
	}
}
