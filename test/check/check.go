package check

import (
	"strings"
	"testing"
)

// Error checks err against want, a part of the expected message ("" for none), and
// reports whether the case ends there because the error came as expected. An unexpected
// error, or a missing or different one, fails the test at once.
func Error(t testing.TB, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	return true
}
