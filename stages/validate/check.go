package validate

import (
	"errors"
	"fmt"
	"strings"
)

// Severity says whether a failing check stops the build.
type Severity string

// Severities.
const (
	// SeverityError: a failure (or an error running the check) fails the gate.
	SeverityError Severity = "error"
	// SeverityWarning: a failure is reported but does not fail the gate.
	SeverityWarning Severity = "warning"
)

// Status is a check's outcome.
type Status string

// Statuses.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
	// StatusError: the check could not decide (the API was unreachable, a fact is missing).
	StatusError Status = "error"
)

// Check scopes: what a check looks at.
const (
	ScopeHost      = "host"
	ScopeOpenShift = "openshift"
)

// CheckInfo describes one check.
type CheckInfo struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Severity    Severity `json:"severity"`
	Scope       string   `json:"scope"`
}

// Result is one check's outcome.
type Result struct {
	CheckInfo
	Status Status `json:"status"`
	// Message is one line: why it failed, why it was skipped, what went wrong, or what passed.
	Message string `json:"message,omitempty"`
	// Evidence are short strings backing the result.
	Evidence []string `json:"evidence,omitempty"`
}

// Blocking reports whether r fails the gate.
func (r Result) Blocking() bool {
	return r.Severity == SeverityError && (r.Status == StatusFail || r.Status == StatusError)
}

// Line is the one-line summary of r, e.g.
// "FAIL host.images.present: quay.io/x@sha256:... missing from container storage".
func (r Result) Line() string {
	s := fmt.Sprintf("%s %s", strings.ToUpper(string(r.Status)), r.ID)
	if r.Status == StatusFail && r.Severity == SeverityWarning {
		s = "WARN " + r.ID
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// Summary counts results by status.
type Summary struct {
	Total    int `json:"total"`
	Passed   int `json:"passed"`
	Failed   int `json:"failed"`
	Skipped  int `json:"skipped"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
}

// Report is every check's result, in KnownChecks order.
type Report struct {
	Results []Result `json:"results"`
	Summary Summary  `json:"summary"`
}

func newReport(results []Result) *Report {
	r := &Report{Results: results}
	for _, res := range results {
		r.Summary.Total++
		switch res.Status {
		case StatusPass:
			r.Summary.Passed++
		case StatusSkip:
			r.Summary.Skipped++
		case StatusError:
			r.Summary.Errors++
		case StatusFail:
			if res.Severity == SeverityWarning {
				r.Summary.Warnings++
			} else {
				r.Summary.Failed++
			}
		}
	}
	return r
}

// Failed reports whether any check of severity error failed or could not run.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Blocking() {
			return true
		}
	}
	return false
}

// FailureLines is one line per blocking result.
func (r *Report) FailureLines() []string {
	var out []string
	for _, res := range r.Results {
		if res.Blocking() {
			out = append(out, res.Line())
		}
	}
	return out
}

// ErrFailed is what Err wraps: the gate did not pass.
var ErrFailed = errors.New("validation failed")

// Err is nil when the gate passes, else an error wrapping ErrFailed with one line per
// failure.
func (r *Report) Err() error {
	lines := r.FailureLines()
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d checks:\n  %s", ErrFailed, len(lines), r.Summary.Total, strings.Join(lines, "\n  "))
}

// outcome is what a check function returns; Evaluate adds the CheckInfo.
type outcome struct {
	status   Status
	message  string
	evidence []string
}

func pass(msg string, ev ...string) outcome { return outcome{StatusPass, msg, ev} }
func fail(msg string, ev ...string) outcome { return outcome{StatusFail, msg, ev} }
func skip(reason string) outcome            { return outcome{status: StatusSkip, message: reason} }
func errored(err error) outcome             { return outcome{status: StatusError, message: err.Error()} }

// failures turns a list of problems into a failing outcome whose message names the first,
// or a passing one.
func failures(problems []string, passMsg string, ev ...string) outcome {
	switch len(problems) {
	case 0:
		return pass(passMsg, ev...)
	case 1:
		return fail(problems[0], problems...)
	}
	return fail(fmt.Sprintf("%s (and %d more)", problems[0], len(problems)-1), problems...)
}
