package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// A broken fragment fails the render with an error that names the fragment and gives
// Butane's problem with its line and column.
func TestButaneErrors(t *testing.T) {
	const fcosHead = "variant: fcos\nversion: 1.4.0\n"
	const osHead = "variant: openshift\nversion: 4.16.0\nmetadata:\n  name: 99-master-x\n  labels:\n    machineconfiguration.openshift.io/role: master\n"
	for _, tc := range []struct {
		name      string
		openshift bool
		text      string
		want      []string
	}{
		{"yaml syntax", false, fcosHead + "storage:\n  files:\n  - path: [\n",
			[]string{"butane config butane/a.bu:5: YAML syntax", "did not find expected node content"}},
		{"conflicting fields", false, fcosHead + "storage:\n  files:\n    - path: /etc/x\n      contents:\n        inline: a\n        source: https://example.com/x\n",
			[]string{"butane/a.bu:8:17: error at $.storage.files.0.contents.source: only one of the following can be set: inline, local, source"}},
		{"unknown key is an error", false, fcosHead + "storage:\n  filez: []\n",
			[]string{"butane config butane/a.bu: warnings are errors here", "butane/a.bu:4:3: warning at $.storage.filez: unused key filez"}},
		{"bad mode", false, fcosHead + "storage:\n  files:\n    - path: /etc/x\n      mode: 012345\n",
			[]string{"butane/a.bu:6:13:", "$.storage.files.0.mode"}},
		{"no variant", false, "storage: {}\n",
			[]string{"butane config butane/a.bu: variant and version are required"}},
		{"unknown version", false, "variant: fcos\nversion: 9.9.0\n",
			[]string{"butane config butane/a.bu:", "9.9.0"}},
		{"local file refused", false, fcosHead + "storage:\n  files:\n    - path: /etc/x\n      contents:\n        local: secret.txt\n",
			[]string{"butane/a.bu:7:16:", "$.storage.files.0.contents.local"}},
		{"newer than target", false, "variant: fcos\nversion: 1.5.0\n",
			[]string{"butane/a.bu", "ignition spec 3.4.0 is newer than the target's 3.3.0"}},
		{"openshift variant on coreos", false, osHead,
			[]string{"butane config butane/a.bu: variant openshift makes MachineConfigs", "fcos 1.4.0"}},
		{"fcos variant on openshift", true, fcosHead,
			[]string{"butane config butane/a.bu: variant fcos cannot configure an OpenShift node; use variant: openshift, version: 4.16.0"}},
		{"no role label", true, "variant: openshift\nversion: 4.16.0\nmetadata:\n  name: 99-x\n",
			[]string{"butane/a.bu:4:3: error at $.metadata.labels: machineconfiguration.openshift.io/role label is required"}},
		{"MCO-unsupported links", true, osHead + "storage:\n  links:\n    - path: /etc/l\n      target: /etc/x\n",
			[]string{"butane/a.bu:9:5: error at $.storage.links: links are not supported"}},
		{"newer than the cluster", true, "variant: openshift\nversion: 4.19.0\n",
			[]string{"butane config butane/a.bu: openshift 4.19.0 is newer than the cluster's 4.16.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frags, host := writeFragments(t, tc.text)
			o := Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0"}
			if tc.openshift {
				o = clusterOptions(t)
			}
			o.Fragments, o.HostFiles = frags, host
			out := t.TempDir()
			err := Render(context.Background(), o, testSecrets(t), out, nil)
			if err == nil {
				t.Fatal("render succeeded")
			}
			var be *ButaneError
			var re *ReportError
			if !errors.As(err, &be) && !errors.As(err, &re) {
				t.Errorf("error %T is neither a ButaneError nor a ReportError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if len(readTree(t, out)) > 0 && !tc.openshift {
				t.Errorf("a failed coreos render left files: %v", keys(readTree(t, out)))
			}
		})
	}
}
