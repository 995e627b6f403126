package oskind

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Kind
		wantErr string
	}{
		{in: "openshift", want: OpenShift},
		{in: "coreos", want: CoreOS},
		{in: "OpenShift", wantErr: `unknown target "OpenShift": use openshift|coreos`},
		{in: "", wantErr: `unknown target ""`},
	} {
		got, err := Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if !OpenShift.IsOpenShift() || CoreOS.IsOpenShift() {
		t.Error("IsOpenShift does not tell the targets apart")
	}
}
