package checks_test

import (
	"testing"

	"github.com/snofactory/snofactory/seeds/checks"
)

func TestReport(t *testing.T) {
	var r checks.Report
	if r.Len() != 0 || r.Errs != nil {
		t.Fatalf("zero Report holds %v", r.Errs)
	}
	r.Add("spec.a", "required", "")
	r.Add("spec.b[0]", "too long", "shorten it")
	want := []checks.FieldError{
		{Path: "spec.a", Message: "required"},
		{Path: "spec.b[0]", Message: "too long", Hint: "shorten it"},
	}
	if r.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", r.Len(), len(want))
	}
	for i, w := range want {
		if r.Errs[i] != w {
			t.Errorf("Errs[%d] = %+v, want %+v", i, r.Errs[i], w)
		}
	}
}

func TestFieldErrorError(t *testing.T) {
	tests := []struct {
		fe   checks.FieldError
		want string
	}{
		{checks.FieldError{Path: "kind", Message: "must be Blueprint"}, "kind: must be Blueprint"},
		{checks.FieldError{Path: "spec.x", Message: "bad", Hint: "fix it"}, "spec.x: bad; hint: fix it"},
	}
	for _, tt := range tests {
		if got := tt.fe.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
