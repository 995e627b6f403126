package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/test/kubeapi"
)

// ocPatch is a stand-in for `oc --kubeconfig KC patch KIND NAME --type merge -p PATCH`
// over a real API server: kubectl's staging/src/k8s.io/kubectl/pkg/cmd/patch/patch.go
// (PatchOptions.RunPatch) sends PATCH as types.MergePatchType to the object named, and
// prints "KIND/NAME patched", or "KIND/NAME patched (no change)" when the object is the
// same after it; a missing object is `Error from server (NotFound)`, exit 1.
func ocPatch(s *kubeapi.Server) Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		argv := append([]string{name}, args...)
		if name != "oc" || len(args) != 9 || args[0] != "--kubeconfig" || args[1] != s.Kubeconfig || args[2] != "patch" ||
			args[3] != "node" || args[5] != "--type" || args[6] != "merge" || args[7] != "-p" {
			return nil, fail(argv, 1, "error: the stand-in takes only `oc --kubeconfig KC patch node NAME --type merge -p PATCH`")
		}
		nodes := s.Dynamic.Resource(kubeapi.Nodes)
		before, err := nodes.Get(ctx, args[4], metav1.GetOptions{})
		if err == nil {
			var after interface{ GetResourceVersion() string }
			after, err = nodes.Patch(ctx, args[4], types.MergePatchType, []byte(args[8]), metav1.PatchOptions{})
			if err == nil && after.GetResourceVersion() == before.GetResourceVersion() {
				return []byte("node/" + args[4] + " patched (no change)\n"), nil
			}
		}
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			return nil, fail(argv, 1, fmt.Sprintf("Error from server (%s): %v", se.Status().Reason, err))
		}
		if err != nil {
			return nil, err
		}
		return []byte("node/" + args[4] + " patched\n"), nil
	}
}

// TestNodeLabelsPatchOnAPIServer: the node-labels step's merge patch, sent to a real
// kube-apiserver, adds the site's labels to the Node and leaves the kubelet's and the
// installer's own labels as they were, even when the site names one of them
// (lifecycle-agent lca-cli/postpivot/postpivot.go setNodeLabels leaves those alone).
func TestNodeLabelsPatchOnAPIServer(t *testing.T) {
	s := kubeapi.Start(t, kubeapi.Options{})
	kubelet := map[string]string{"kubernetes.io/hostname": "sno-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node.openshift.io/os_id": "rhcos"}
	lj := ""
	for _, k := range slices.Sorted(maps.Keys(kubelet)) {
		lj += fmt.Sprintf("%q:%q,", k, kubelet[k])
	}
	s.Apply(t, kubeapi.Nodes, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"sno-1","labels":{`+lj+`"site.example.com/store":"seed"}}}`)
	r := &run{o: Options{Run: ocPatch(s)}}
	sc := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "sno-1", NodeLabels: map[string]string{
		"site.example.com/store": "0042", "node-role.kubernetes.io/edge": "", "kubernetes.io/hostname": "other"}}}
	st := r.nodeLabelsStep(sc, func(a ...string) []string { return append([]string{"oc", "--kubeconfig", s.Kubeconfig}, a...) })
	if _, err := st.apply(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	n, err := s.Dynamic.Resource(kubeapi.Nodes).Get(t.Context(), "sno-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(kubelet)
	want["site.example.com/store"], want["node-role.kubernetes.io/edge"] = "0042", ""
	if got := n.GetLabels(); !maps.Equal(got, want) {
		t.Errorf("labels after the step\n%v\nwant\n%v", got, want)
	}
	// A node not named by the site's host name: the step fails, saying which.
	sc.Spec.Hostname = "sno-2"
	st = r.nodeLabelsStep(sc, func(a ...string) []string { return append([]string{"oc", "--kubeconfig", s.Kubeconfig}, a...) })
	if _, err := st.apply(t.Context(), sc); err == nil || !strings.Contains(err.Error(), "labelling the node sno-2") || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("labelling a node the server does not have: %v", err)
	}
}
