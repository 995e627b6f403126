package steps_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

func TestExecute(t *testing.T) {
	boom, full := errors.New("boom"), errors.New("disk full")
	tests := []struct {
		name     string
		fail     string // the step whose Do fails
		skip     string // the step done before
		doneErr  string // the step whose Done hook fails
		events   []string
		failStep string // of the *StepError, "" for success
		cause    error
	}{
		{name: "all run", events: []string{"start a", "done a=A", "start b", "done b=B", "start c", "done c=C"}},
		{name: "one skipped", skip: "b", events: []string{"start a", "done a=A", "skipped b", "start c", "done c=C"}},
		{name: "a failure stops", fail: "b", events: []string{"start a", "done a=A", "start b", "failed b: boom"}, failStep: "b", cause: boom},
		{name: "a failed Done stops without Failed", doneErr: "a", events: []string{"start a", "done a=A"}, failStep: "a", cause: full},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []string
			var acts []steps.Action[string]
			for _, n := range []string{"a", "b", "c"} {
				acts = append(acts, steps.Action[string]{Step: steps.Step{Name: n}, Do: func(context.Context) (string, error) {
					if n == tt.fail {
						return "", boom
					}
					return string(rune(n[0] - 'a' + 'A')), nil
				}})
			}
			err := steps.Execute(context.Background(), acts, steps.Hooks[string]{
				Skip:    func(name string) bool { return name == tt.skip },
				Skipped: func(name string) { events = append(events, "skipped "+name) },
				Start:   func(name string) { events = append(events, "start "+name) },
				Failed:  func(name string, err error) { events = append(events, "failed "+name+": "+err.Error()) },
				Done: func(name, r string) error {
					events = append(events, "done "+name+"="+r)
					if name == tt.doneErr {
						return full
					}
					return nil
				},
			})
			if !reflect.DeepEqual(events, tt.events) {
				t.Errorf("events = %q, want %q", events, tt.events)
			}
			if tt.failStep == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *steps.StepError
			if !errors.As(err, &se) || se.Step != tt.failStep || !errors.Is(err, tt.cause) {
				t.Fatalf("err = %v, want step %s failing with %v", err, tt.failStep, tt.cause)
			}
			if want := "step " + tt.failStep + ": " + tt.cause.Error(); err.Error() != want {
				t.Errorf("Error() = %q, want %q", err, want)
			}
		})
	}
}

func TestExecuteWithoutHooks(t *testing.T) {
	ran := 0
	acts := []steps.Action[int]{{Step: steps.Step{Name: "x"}, Do: func(context.Context) (int, error) { ran++; return 1, nil }}}
	if err := steps.Execute(context.Background(), acts, steps.Hooks[int]{}); err != nil || ran != 1 {
		t.Errorf("Execute = %v, ran %d", err, ran)
	}
}
