package badinput

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestIs(t *testing.T) {
	base := errors.New("no such seed directory: ./x")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"wrapped", Wrap(base), true},
		{"formatted", Errorf("--from: %w", base), true},
		{"inside another", fmt.Errorf("seed pull: %w", Wrap(base)), true},
		{"cancelled", context.Canceled, false},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	if err := Errorf("--from: %w", base); !errors.Is(err, base) || err.Error() != "--from: no such seed directory: ./x" {
		t.Errorf("Errorf = %v, want the message and the wrapped error", err)
	}
}
