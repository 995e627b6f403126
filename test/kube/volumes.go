package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volume makes a PersistentVolumeClaim named name in ns, bound to a hostPath
// PersistentVolume of the test's own: the cluster has no provisioner. It returns the
// volume's directory on the host, with one subdirectory for each of subdirs (the subPaths
// of Tekton workspaces). Like a local-path provisioner's volume (rancher
// local-path-provisioner, deploy/local-path-storage.yaml, the setup script's
// `mkdir -m 0777`), every directory is writable by any user: a hostPath volume ignores a
// pod's fsGroup, and the kubelet would make a missing subPath 0750 and root's.
func (c *Cluster) Volume(ctx context.Context, ns, name string, subdirs ...string) (string, error) {
	dir := c.path("volumes/" + ns + "/" + name)
	for _, d := range append([]string{""}, subdirs...) {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(p, 0o777); err != nil { // past the umask
			return "", err
		}
	}
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
	pvName := ns + "-" + name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			// Bound to this claim only, before the claim exists.
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating PersistentVolume %s: %w", pvName, err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: size},
			// No default storage class exists; "" asks for a pre-made volume.
			StorageClassName: &empty, VolumeName: pvName,
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating PersistentVolumeClaim %s/%s: %w", ns, name, err)
	}
	return dir, nil
}
