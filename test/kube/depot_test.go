package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/snofactory/snofactory/pipeline/depot"
)

// depotBuilds is how many blueprints the depot case builds, and depotSlots its VM slots.
const depotBuilds, depotSlots = 4, 2

// A depot file of four blueprints (the PipelineRun case's demo under four file names: every
// stage a cache hit, so each build costs its publish) runs on the cluster with
// `depot run --tekton` and two VM slots: all four PipelineRuns succeed, never more than two
// are unfinished at once (counted from the PipelineRuns' own watch events, in the order the
// apiserver wrote them), each records its IMAGE_DIGEST in depot.json, and `depot status`
// prints the four.
func checkDepotOnTekton(t *testing.T, e *pipelineEnv) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute) // a ceiling for a loaded machine
	defer cancel()
	depotFile := writeDepot(t, e.src)
	peak := watchPeak(ctx, t, e.c)
	out := filepath.Join(t.TempDir(), "depot-out")
	cmd := exec.CommandContext(ctx, e.bin, "depot", "run", "--tekton", "--kubeconfig", e.c.Kubeconfig,
		"--namespace", "default", "--claim", "build", "--image", e.ref,
		"--push-secret", "seed-push", "--signing-secret", "depot-signing", "--output-dir", out, depotFile)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent") // the flag, not the environment
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("depot run --tekton: %v\n%s", err, b)
	}
	if got := <-peak; got != depotSlots {
		t.Errorf("at most %d PipelineRuns were unfinished at once, want %d (the depot's slots.vms)", got, depotSlots)
	}
	sum, err := depot.ReadStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	digest := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	if sum.Status != depot.StatusSucceeded || len(sum.Builds) != depotBuilds {
		t.Fatalf("depot.json: status %s with %d builds, want succeeded with %d\n%s", sum.Status, len(sum.Builds), depotBuilds, b)
	}
	for _, r := range sum.Builds {
		if r.Status != depot.StatusSucceeded || !digest.MatchString(r.ImageDigest) || r.ImageURL != e.wantSeed || r.PipelineRun == "" {
			t.Errorf("build %s: %+v, want succeeded with PipelineRun, IMAGE_URL %s and a digest", r.Name, r, e.wantSeed)
		}
	}
	// A depot on Tekton: status reads its PipelineRuns from the cluster.
	status, err := exec.CommandContext(ctx, e.bin, "depot", "status", "--kubeconfig", e.c.Kubeconfig, out).CombinedOutput()
	if err != nil {
		t.Fatalf("depot status: %v\n%s", err, status)
	}
	for _, r := range sum.Builds {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r.Name) + `\s+succeeded\s`).Match(status) {
			t.Errorf("depot status does not show build %s succeeded:\n%s", r.Name, status)
		}
	}
}

// writeDepot writes the four blueprints and the depot file into the claim's source
// directory (the depot's checkout) and returns the depot file.
func writeDepot(t *testing.T, src string) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(src, "blueprints", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for i := 1; i <= depotBuilds; i++ {
		name := fmt.Sprintf("blueprints/fleet-%d.yaml", i)
		if err := os.WriteFile(filepath.Join(src, name), demo, 0o644); err != nil {
			t.Fatal(err)
		}
		list = append(list, name)
	}
	doc := fmt.Sprintf("apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata: {name: fleet}\nspec:\n  blueprints: [%s]\n  slots: {vms: %d}\n",
		strings.Join(list, ", "), depotSlots)
	f := filepath.Join(src, "depot.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// watchPeak follows the depot's PipelineRuns (an informer: their list, then their watch,
// in the order the apiserver wrote them) from before the first is created until
// depotBuilds have finished, and sends the most that were unfinished at once.
func watchPeak(ctx context.Context, t *testing.T, c *Cluster) <-chan int {
	t.Helper()
	lw := depotRuns(ctx, c)
	peak := make(chan int, 1)
	go func() {
		unfinished, finished, most := map[string]bool{}, map[string]bool{}, 0
		_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				return false, nil
			}
			if s := conditionStatus(u, "Succeeded"); s == "True" || s == "False" || ev.Type == watch.Deleted {
				delete(unfinished, u.GetName())
				finished[u.GetName()] = true
			} else if !finished[u.GetName()] {
				unfinished[u.GetName()] = true
			}
			most = max(most, len(unfinished))
			return len(finished) == depotBuilds, nil
		})
		if err != nil {
			t.Errorf("watching the depot's PipelineRuns: %v", err)
		}
		peak <- most
	}()
	return peak
}
