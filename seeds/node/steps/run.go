package steps

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs a command on the node and returns its standard output; tests record the
// calls. A failed command's error carries its exit code (ExitCode() int) and the tail of
// its stderr.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// ExecRunner runs commands for real. Stderr stays out of the output, so a warning on
// stderr never spoils the JSON or text a caller parses, and goes into the error instead.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &CommandError{Argv: append([]string{name}, args...), Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return out, nil
}

// maxStderr bounds the stderr a CommandError quotes: its end says why a command failed.
const maxStderr = 512

// CommandError is a command that failed.
type CommandError struct {
	Argv   []string
	Err    error
	Stderr string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.Argv, " "), e.Err)
	if e.Stderr != "" {
		s := e.Stderr
		if len(s) > maxStderr {
			s = "..." + s[len(s)-maxStderr:]
		}
		msg += ": " + s
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }
