package kubeapi

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources a single-node OpenShift cluster's checks read.
var (
	ClusterVersions    = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	ClusterOperators   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}
	Infrastructures    = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	MachineConfigPools = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigpools"}
	MachineConfigs     = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}
	IngressControllers = schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "ingresscontrollers"}
	Nodes              = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	Namespaces         = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	CSRs               = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}
	ConfigMaps         = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// The seeded node's InternalIP (the relocation address a seed runs on) and its etcd
// member's ID, as cluster-etcd-operator writes it into openshift-etcd/etcd-endpoints: the
// member's uint64 ID in lower-case hex without padding
// (pkg/operator/etcdendpointscontroller syncConfigMap, fmt.Sprintf("%x", member.ID)).
const (
	NodeIP       = "192.168.127.10"
	EtcdMemberID = "9c2f4e0d1a3b5768"
)

// EtcdEndpoints is ConfigMap openshift-etcd/etcd-endpoints with data, member ID to address.
func EtcdEndpoints(data map[string]string) string {
	d, _ := json.Marshal(data)
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"etcd-endpoints","namespace":"openshift-etcd"},"data":` + string(d) + `}`
}

// OperatorStatus is a ClusterOperator's status with its three conditions set since since.
func OperatorStatus(available, progressing, degraded string, since time.Time) map[string]any {
	ts := since.UTC().Format(time.RFC3339)
	return map[string]any{"conditions": []any{
		map[string]any{"type": "Available", "status": available, "lastTransitionTime": ts, "reason": "AsExpected", "message": "available"},
		map[string]any{"type": "Progressing", "status": progressing, "lastTransitionTime": ts, "reason": "AsExpected", "message": "progressing"},
		map[string]any{"type": "Degraded", "status": degraded, "lastTransitionTime": ts, "reason": "NodeInstaller_InstallerPodFailed", "message": "installer pod failed"},
	}}
}

// ClusterVersionStatus is a ClusterVersion status at 4.20.3, Available as given, install history Completed.
func ClusterVersionStatus(available string, since time.Time) map[string]any {
	ts := since.UTC().Format(time.RFC3339)
	return map[string]any{"desired": map[string]any{"version": "4.20.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:aa"},
		"observedGeneration": 1, "versionHash": "x", "availableUpdates": nil,
		"history": []any{map[string]any{"state": "Completed", "version": "4.20.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:aa",
			"startedTime": ts, "completionTime": ts, "verified": false}},
		"conditions": []any{
			map[string]any{"type": "Available", "status": available, "lastTransitionTime": ts, "message": "Done applying 4.20.3"},
			map[string]any{"type": "Progressing", "status": "False", "lastTransitionTime": ts},
			map[string]any{"type": "Failing", "status": "False", "lastTransitionTime": ts},
		}}
}

// NodeStatus is a Node status, Ready as given, at InternalIP NodeIP.
func NodeStatus(ready string) map[string]any {
	return NodeStatusAt(ready, NodeIP)
}

// NodeStatusAt is a Node status, Ready as given, with the kubelet's addresses: the
// InternalIP addresses given, then the Hostname.
func NodeStatusAt(ready string, internalIPs ...string) map[string]any {
	var addrs []any
	for _, ip := range internalIPs {
		addrs = append(addrs, map[string]any{"type": "InternalIP", "address": ip})
	}
	addrs = append(addrs, map[string]any{"type": "Hostname", "address": "sno"})
	return map[string]any{"addresses": addrs,
		"conditions": []any{map[string]any{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "kubelet is posting ready status"}},
		"nodeInfo": map[string]any{"kubeletVersion": "v1.33.5", "machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "5.14",
			"osImage": "RHCOS", "containerRuntimeVersion": "cri-o", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}
}

// SeedSNO lays a settled single-node OpenShift cluster's objects into a real API
// server serving OpenShift's CRDs. No operator runs there: the statuses are set as the
// operators would set them.
func (s *Server) SeedSNO(t testing.TB, settled time.Time) {
	t.Helper()
	s.Apply(t, ClusterVersions, `{"apiVersion":"config.openshift.io/v1","kind":"ClusterVersion","metadata":{"name":"version"},
		"spec":{"clusterID":"11111111-2222-4333-8444-555555555555","channel":"stable-4.20"}}`)
	s.SetStatus(t, ClusterVersions, "version", ClusterVersionStatus("True", settled))
	for _, name := range []string{"etcd", "kube-apiserver", "ingress"} {
		s.Apply(t, ClusterOperators, fmt.Sprintf(`{"apiVersion":"config.openshift.io/v1","kind":"ClusterOperator","metadata":{"name":%q},"spec":{}}`, name))
		s.SetStatus(t, ClusterOperators, name, OperatorStatus("True", "False", "False", settled))
	}
	s.Apply(t, Nodes, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"sno","labels":{"node-role.kubernetes.io/master":""}}}`)
	s.SetStatus(t, Nodes, "sno", NodeStatus("True"))
	s.Apply(t, Namespaces, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"openshift-etcd"}}`)
	s.Apply(t, ConfigMaps, EtcdEndpoints(map[string]string{EtcdMemberID: NodeIP}))
	s.Apply(t, Infrastructures, `{"apiVersion":"config.openshift.io/v1","kind":"Infrastructure","metadata":{"name":"cluster"},"spec":{"platformSpec":{"type":"None"}}}`)
	s.SetStatus(t, Infrastructures, "cluster", map[string]any{"infrastructureName": "seed-x7k2p", "controlPlaneTopology": "SingleReplica",
		"infrastructureTopology": "SingleReplica", "cpuPartitioning": "None", "platform": "None", "apiServerURL": "https://api.seed.example:6443",
		"apiServerInternalURI": "https://api-int.seed.example:6443", "etcdDiscoveryDomain": ""})
	s.Apply(t, MachineConfigPools, `{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigPool","metadata":{"name":"master"},
		"spec":{"configuration":{"name":"rendered-master-1"},"machineConfigSelector":{},"nodeSelector":{}}}`)
	ts := settled.UTC().Format(time.RFC3339)
	s.SetStatus(t, MachineConfigPools, "master", map[string]any{"configuration": map[string]any{"name": "rendered-master-1"},
		"machineCount": 1, "updatedMachineCount": 1, "readyMachineCount": 1, "unavailableMachineCount": 0, "degradedMachineCount": 0, "observedGeneration": 1,
		"conditions": []any{
			map[string]any{"type": "Updated", "status": "True", "lastTransitionTime": ts},
			map[string]any{"type": "Updating", "status": "False", "lastTransitionTime": ts},
			map[string]any{"type": "Degraded", "status": "False", "lastTransitionTime": ts},
		}})
}

// IssueCSR files a CertificateSigningRequest for key's public key, as the kubelet does, and,
// when cert is set, approves it and records cert as issued, as the approver and the signer
// would (each through its own subresource). Without cert the CSR stays pending.
func (s *Server) IssueCSR(t testing.TB, name, signer, username string, key crypto.Signer, subject pkix.Name, cert []byte) {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	usages := []any{"digital signature", "client auth"}
	if signer == "kubernetes.io/kubelet-serving" {
		usages = []any{"digital signature", "server auth"}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"signerName": signer, "usages": usages, "username": username,
			"request": base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))},
	}}
	ctx := context.Background()
	res := s.Dynamic.Resource(CSRs)
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR %s: %v", name, err)
	}
	if cert == nil {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Approved", "status": "True",
		"reason": "NodeCSRApprove", "message": "approved by the test", "lastUpdateTime": now, "lastTransitionTime": now}}}
	approved, err := res.Update(ctx, created, metav1.UpdateOptions{}, "approval")
	if err != nil {
		t.Fatalf("approving CSR %s: %v", name, err)
	}
	status := approved.Object["status"].(map[string]any)
	status["certificate"] = base64.StdEncoding.EncodeToString(cert)
	if _, err := res.UpdateStatus(ctx, approved, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("issuing CSR %s: %v", name, err)
	}
}

// Delete removes a cluster-scoped or namespaced object.
func (s *Server) Delete(t testing.TB, gvr schema.GroupVersionResource, namespace, name string) {
	t.Helper()
	if err := s.Dynamic.Resource(gvr).Namespace(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s %s: %v", gvr.Resource, name, err)
	}
}
