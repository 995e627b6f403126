package kubeapi

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The server serves OpenShift's CRDs with their schemas: a ClusterOperator's status set
// through the status subresource reads back, and an object the schema refuses is refused.
func TestServesOpenShiftCRDs(t *testing.T) {
	s := Start(t, Options{})
	gvr := schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}
	s.Apply(t, gvr, `{"apiVersion":"config.openshift.io/v1","kind":"ClusterOperator","metadata":{"name":"etcd"},"spec":{},
		"status":{"conditions":[{"type":"Available","status":"True","lastTransitionTime":"2026-11-24T10:00:00Z"}]}}`)
	got, err := s.Dynamic.Resource(gvr).Get(context.Background(), "etcd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["status"] != "True" {
		t.Errorf("conditions %v", conds)
	}
	cv := schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
		"metadata": map[string]any{"name": "version"}, "spec": map[string]any{"clusterID": 42}}}
	if _, err := s.Dynamic.Resource(cv).Create(context.Background(), bad, metav1.CreateOptions{}); err == nil {
		t.Error("the server took a ClusterVersion whose clusterID is a number: the CRD's schema is not in force")
	}
}
