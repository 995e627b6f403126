package validate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/test/kubeapi"
)

// resultOf runs the cluster checks and returns one check's result.
func resultOf(t *testing.T, s *kubeapi.Server, now time.Time, id string) Result {
	t.Helper()
	rep, err := ClusterCheck(context.Background(), &OpenShift{Kubeconfig: s.Kubeconfig}, Options{Clock: clocktest.New(now)}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result for %s", id)
	return Result{}
}

// The cluster checks against a real kube-apiserver with OpenShift's CRDs: a settled
// cluster passes; operators that stop progressing pass only after the settle window; a
// Degraded operator, an unavailable ClusterVersion, a NotReady node and a multi-node
// topology each fail, named.
func TestClusterChecksAgainstAPIServer(t *testing.T) {
	s := kubeapi.Start(t, kubeapi.Options{})
	settled := time.Now().Add(-time.Hour).Truncate(time.Second)
	s.SeedSNO(t, settled)
	now := settled.Add(time.Hour)

	for _, id := range []string{CheckClusterVersion, CheckClusterOperators, CheckNodeReady, CheckTopology, CheckAPIServingCert} {
		if r := resultOf(t, s, now, id); r.Status != StatusPass {
			t.Errorf("settled cluster: %s %s %q", id, r.Status, r.Message)
		}
	}

	t.Run("settle window", func(t *testing.T) {
		s.SetStatus(t, kubeapi.ClusterOperators, "ingress", kubeapi.OperatorStatus("True", "False", "False", now.Add(-10*time.Second)))
		r := resultOf(t, s, now, CheckClusterOperators)
		if r.Status != StatusFail || !strings.Contains(r.Message, "clusteroperator/ingress stopped progressing 10s ago, inside the 30s settle window") {
			t.Errorf("inside the window: %s %q", r.Status, r.Message)
		}
		if r := resultOf(t, s, now.Add(20*time.Second), CheckClusterOperators); r.Status != StatusPass {
			t.Errorf("after the window: %s %q", r.Status, r.Message)
		}
		s.SetStatus(t, kubeapi.ClusterOperators, "ingress", kubeapi.OperatorStatus("True", "False", "False", settled))
	})

	t.Run("wait until settled", func(t *testing.T) {
		// The operator progresses until the first poll, then its status turns Available and
		// not Progressing (as its operator would write it); the wait ends only once the
		// settle window has passed after that.
		s.SetStatus(t, kubeapi.ClusterOperators, "ingress", kubeapi.OperatorStatus("False", "True", "False", now))
		clock := clocktest.New(now)
		var stoppedAt time.Time
		clock.OnSleep = func(n int, at time.Time) {
			if n == 1 {
				stoppedAt = at
				s.SetStatus(t, kubeapi.ClusterOperators, "ingress", kubeapi.OperatorStatus("True", "False", "False", at))
			}
		}
		if err := WaitSettled(context.Background(), &OpenShift{Kubeconfig: s.Kubeconfig}, Options{}, clock, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if stoppedAt.IsZero() || clock.T.Sub(stoppedAt) < DefaultSettleWindow {
			t.Errorf("settled %s after the operator stopped progressing, want at least %s", clock.T.Sub(stoppedAt), DefaultSettleWindow)
		}
		s.SetStatus(t, kubeapi.ClusterOperators, "ingress", kubeapi.OperatorStatus("True", "False", "False", settled))
	})

	t.Run("wait gives up naming what is unsettled", func(t *testing.T) {
		s.SetStatus(t, kubeapi.ClusterOperators, "etcd", kubeapi.OperatorStatus("True", "False", "True", settled))
		ctx, cancel := context.WithCancel(context.Background())
		clock := &clocktest.Clock{T: now, OnSleep: func(n int, _ time.Time) {
			if n == 3 {
				cancel()
			}
		}}
		err := WaitSettled(ctx, &OpenShift{Kubeconfig: s.Kubeconfig}, Options{}, clock, 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "clusteroperator/etcd Degraded=True") {
			t.Errorf("wait = %v", err)
		}
		s.SetStatus(t, kubeapi.ClusterOperators, "etcd", kubeapi.OperatorStatus("True", "False", "False", settled))
	})

	for _, tc := range []struct {
		name, id, want string
		break_, heal   func(t *testing.T)
	}{
		{"degraded operator", CheckClusterOperators, "clusteroperator/kube-apiserver Degraded=True (NodeInstaller_InstallerPodFailed",
			func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterOperators, "kube-apiserver", kubeapi.OperatorStatus("True", "False", "True", settled))
			}, func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterOperators, "kube-apiserver", kubeapi.OperatorStatus("True", "False", "False", settled))
			}},
		{"clusterversion not available", CheckClusterVersion, "ClusterVersion Available=False",
			func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterVersions, "version", kubeapi.ClusterVersionStatus("False", settled))
			},
			func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterVersions, "version", kubeapi.ClusterVersionStatus("True", settled))
			}},
		{"node not ready", CheckNodeReady, "node sno Ready=False",
			func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatus("False")) },
			func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatus("True")) }},
		{"topology", CheckTopology, `Infrastructure controlPlaneTopology is "HighlyAvailable", want SingleReplica`,
			func(t *testing.T) {
				s.SetStatus(t, kubeapi.Infrastructures, "cluster", map[string]any{"infrastructureName": "seed-x7k2p", "controlPlaneTopology": "HighlyAvailable",
					"infrastructureTopology": "SingleReplica", "cpuPartitioning": "None", "platform": "None"})
			}, func(t *testing.T) {
				s.SetStatus(t, kubeapi.Infrastructures, "cluster", map[string]any{"infrastructureName": "seed-x7k2p", "controlPlaneTopology": "SingleReplica",
					"infrastructureTopology": "SingleReplica", "cpuPartitioning": "None", "platform": "None"})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.break_(t)
			defer tc.heal(t)
			r := resultOf(t, s, now, tc.id)
			if r.Status != StatusFail || !strings.Contains(r.Message, tc.want) {
				t.Errorf("%s: %s %q, want fail with %q", tc.id, r.Status, r.Message, tc.want)
			}
		})
	}
}
