package kube

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// stepLog is the log of a TaskRun's step container, for a failure's message.
func stepLog(t *testing.T, c *Cluster, tr *unstructured.Unstructured, container string) string {
	return c.StepLog(t.Context(), tr, container)
}
