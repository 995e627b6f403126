package validate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snofactory/snofactory/pipeline/clock"
)

// DefaultSettleWindow is how long every ClusterOperator must have stopped progressing
// before the cluster counts as settled: openshift-install's coStabilityThreshold
// (wait-for install-complete, waitForStableOperators).
const DefaultSettleWindow = 30 * time.Second

// Clock paces WaitSettled (clock.Clock).
type Clock = clock.Clock

// RealClock is the wall clock.
type RealClock = clock.Real

// settleChecks are the checks a settled cluster passes: what openshift-install waits for
// (ClusterVersion Available and not Progressing, every operator stable) and the Node Ready.
func settleChecks() []string {
	return []string{CheckClusterVersion, CheckClusterOperators, CheckNodeReady}
}

// WaitSettled polls the cluster every poll until ClusterVersion, every ClusterOperator
// (settled for opts' settle window) and the Node pass, or ctx ends; the error then names
// what was last unsettled. A cluster's /readyz says nothing of its operators.
func WaitSettled(ctx context.Context, o *OpenShift, opts Options, clk Clock, poll time.Duration) error {
	if clk == nil {
		clk = RealClock{}
	}
	if opts.Clock == nil {
		opts.Clock = clk
	}
	in := Inputs{OpenShift: o, Options: opts.withDefaults()}
	_, why, err := clock.Wait(ctx, clk, poll, 0, func(ctx context.Context) (bool, string, error) {
		checks := openshiftChecks(ctx, in)
		var waiting []string
		for _, id := range settleChecks() {
			if out := checks(id); out.status != StatusPass {
				waiting = append(waiting, id+": "+out.message)
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	})
	if err != nil {
		return fmt.Errorf("the cluster did not settle: %s: %w", why, err)
	}
	return nil
}

// unsettled names the operators whose Progressing=False is younger than the window.
func unsettled(op *unstructured.Unstructured, now time.Time, window time.Duration) string {
	conds, _, _ := unstructured.NestedSlice(op.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Progressing" || m["status"] != "False" {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Sprintf("clusteroperator/%s Progressing has no lastTransitionTime", op.GetName())
		}
		if age := now.Sub(t); age < window {
			return fmt.Sprintf("clusteroperator/%s stopped progressing %s ago, inside the %s settle window", op.GetName(), age.Round(time.Second), window)
		}
	}
	return ""
}

// ClusterCheck runs the OpenShift checks (not the host checks, which need the node's
// facts) against the cluster a kubeconfig reaches, as `snofactory cluster check` does. With
// wait > 0 it first waits up to that long for the cluster to settle.
func ClusterCheck(ctx context.Context, o *OpenShift, opts Options, skip map[string]string, wait time.Duration) (*Report, error) {
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := WaitSettled(wctx, o, opts, nil, 5*time.Second)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
	rep, err := Evaluate(ctx, Inputs{OpenShift: o, Options: opts, Skip: skip})
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, r := range rep.Results {
		if r.Scope == ScopeOpenShift {
			results = append(results, r)
		}
	}
	return newReport(results), nil
}

// ClusterAccessFlag names the flag of `snofactory cluster check` that takes the cluster's
// kubeconfig file; ClusterCheckHelp is the command's help. They live here, with the
// checks, so the CLI stays free of OpenShift's terms.
const (
	ClusterAccessFlag = "kubeconfig"
	ClusterCheckHelp  = `check runs the same OpenShift checks as the validate stage (ClusterVersion, every
ClusterOperator settled, the Node Ready, no pending CSRs, single-node topology, the master
pool updated, certificate lifetimes, ...) against the cluster the kubeconfig reaches, so a
cluster built some other way can be held to the same gate. --profile takes a blueprint's
validation settings (skipped checks, certificate window). --wait first waits up to that long
for the cluster to settle. Exit 0 when every error-level check passes, 1 otherwise, 2 on bad
usage.`
)
