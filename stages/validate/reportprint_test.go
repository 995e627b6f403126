package validate

import (
	"bytes"
	"testing"
)

func TestReportWriteText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results []Result
		want    string
	}{
		{"no checks", nil, "0 passed, 0 failed, 0 skipped\n"},
		{"pass, fail, warn and skip", []Result{
			{CheckInfo: CheckInfo{ID: "a.ok"}, Status: StatusPass},
			{CheckInfo: CheckInfo{ID: "b.bad", Severity: SeverityError}, Status: StatusFail, Message: "missing"},
			{CheckInfo: CheckInfo{ID: "c.meh", Severity: SeverityWarning}, Status: StatusFail},
			{CheckInfo: CheckInfo{ID: "d.off"}, Status: StatusSkip},
		}, "PASS a.ok\nFAIL b.bad: missing\nWARN c.meh\nSKIP d.off\n1 passed, 1 failed, 1 skipped\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := newReport(tc.results).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
