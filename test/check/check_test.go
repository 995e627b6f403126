package check

import (
	"errors"
	"runtime"
	"testing"
)

func TestError(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      string
		wantEnd   bool // the case ends: the expected error came
		wantFatal bool
	}{
		{"no error wanted, none", nil, "", false, false},
		{"no error wanted, one came", errors.New("boom"), "", false, true},
		{"error wanted, it came", errors.New("no channel stabel"), "channel", true, false},
		{"error wanted, none came", nil, "channel", false, true},
		{"error wanted, another came", errors.New("boom"), "channel", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			var end bool
			done := make(chan struct{})
			go func() { // Fatal ends the goroutine, as it ends a test
				defer close(done)
				end = Error(rec, tc.err, tc.want)
			}()
			<-done
			if rec.fatal != tc.wantFatal {
				t.Fatalf("fatal = %v, want %v", rec.fatal, tc.wantFatal)
			}
			if !tc.wantFatal && end != tc.wantEnd {
				t.Fatalf("Error = %v, want %v", end, tc.wantEnd)
			}
		})
	}
}

// recorder notes a Fatal instead of failing the enclosing test.
type recorder struct {
	testing.TB
	fatal bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(...any) {
	r.fatal = true
	runtime.Goexit()
}

func (r *recorder) Fatalf(string, ...any) {
	r.fatal = true
	runtime.Goexit()
}
