package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/kubeapi"
)

// cluster check against a real kube-apiserver serving OpenShift's CRDs: a settled
// single-node cluster exits 0; a Degraded operator exits 1 and the JSON report names it; an
// etcd member away from the Node's InternalIP exits 1 naming both addresses.
func TestClusterCheck(t *testing.T) {
	s := kubeapi.Start(t, kubeapi.Options{})
	settled := time.Now().Add(-time.Hour)
	s.SeedSNO(t, settled)

	code, out, errOut := runMain(t, "cluster", "check", "--kubeconfig", s.Kubeconfig)
	if code != 0 {
		t.Fatalf("settled cluster: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "openshift.clusteroperators") || !strings.Contains(out, "passed") {
		t.Errorf("output:\n%s", out)
	}

	s.SetStatus(t, kubeapi.ClusterOperators, "etcd", kubeapi.OperatorStatus("True", "False", "True", settled))
	code, out, _ = runMain(t, "cluster", "check", "--kubeconfig", s.Kubeconfig, "-o", "json")
	if code != 1 {
		t.Fatalf("degraded operator: exit %d, want 1\n%s", code, out)
	}
	var rep struct {
		Results []struct {
			ID, Status, Message string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	found := false
	for _, r := range rep.Results {
		if r.ID == "openshift.clusteroperators" {
			found = r.Status == "fail" && strings.Contains(r.Message, "clusteroperator/etcd Degraded=True")
		}
		if strings.HasPrefix(r.ID, "host.") {
			t.Errorf("cluster check ran host check %s", r.ID)
		}
	}
	if !found {
		t.Errorf("the Degraded operator is not named:\n%s", out)
	}

	// The etcd member on another address than the Node's: named with both, in text too.
	s.SetStatus(t, kubeapi.ClusterOperators, "etcd", kubeapi.OperatorStatus("True", "False", "False", settled))
	s.Delete(t, kubeapi.ConfigMaps, "openshift-etcd", "etcd-endpoints")
	s.Apply(t, kubeapi.ConfigMaps, kubeapi.EtcdEndpoints(map[string]string{kubeapi.EtcdMemberID: "10.0.2.15"}))
	code, out, _ = runMain(t, "cluster", "check", "--kubeconfig", s.Kubeconfig)
	if code != 1 || !strings.Contains(out, "openshift.etcd.endpoints") ||
		!strings.Contains(out, "is at 10.0.2.15 (openshift-etcd/etcd-endpoints), but node sno's InternalIP is "+kubeapi.NodeIP) {
		t.Errorf("etcd member off the node's address: exit %d, want 1 naming both addresses:\n%s", code, out)
	}

	bad := filepath.Join(t.TempDir(), "none")
	if code, _, _ := runMain(t, "cluster", "check", "--kubeconfig", bad); code != 2 {
		t.Errorf("a missing kubeconfig exits %d, want 2", code)
	}
	os.WriteFile(bad, []byte("x"), 0o600)
	if code, _, _ := runMain(t, "cluster", "check", "--kubeconfig", s.Kubeconfig, "-o", "yaml"); code != 2 {
		t.Errorf("a bad -o exits %d, want 2", code)
	}
}
