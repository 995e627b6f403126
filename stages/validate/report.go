package validate

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Report file names in the stage's output directory.
const (
	ReportJSON  = "validation.json"
	ReportJUnit = "validation.junit.xml"
)

// JUnit XML, in the shape CI systems read (the Ant/Jenkins junit schema): one testsuite,
// one testcase per check, <skipped message>, <failure message type> with the evidence as
// text, <error> for checks that could not decide.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnit encodes r as JUnit XML. A failed warning is a passing testcase whose output says so,
// so CI counts as failures exactly what fails the gate.
func JUnit(r *Report) ([]byte, error) {
	suite := junitSuite{Name: "snofactory.validate"}
	for _, res := range r.Results {
		c := junitCase{Name: res.ID, Classname: "snofactory.validate." + res.Scope}
		body := strings.Join(res.Evidence, "\n")
		switch {
		case res.Status == StatusSkip:
			c.Skipped = &junitMessage{Message: res.Message}
			suite.Skipped++
		case res.Status == StatusError && res.Severity == SeverityError:
			c.Error = &junitMessage{Message: res.Message, Type: string(res.Severity), Text: body}
			suite.Errors++
		case res.Status == StatusFail && res.Severity == SeverityError:
			c.Failure = &junitMessage{Message: res.Message, Type: string(res.Severity), Text: body}
			suite.Failures++
		default:
			c.SystemOut = strings.TrimSpace(res.Line() + "\n" + body)
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "snofactory validation", Tests: suite.Tests, Failures: suite.Failures,
		Errors: suite.Errors, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the JUnit report: %w", err)
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// WriteReports writes r as validation.json and validation.junit.xml into dir and returns
// their paths.
func WriteReports(dir string, r *Report) (jsonPath, junitPath string, err error) {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", fmt.Errorf("encoding the validation report: %w", err)
	}
	x, err := JUnit(r)
	if err != nil {
		return "", "", err
	}
	jsonPath, junitPath = filepath.Join(dir, ReportJSON), filepath.Join(dir, ReportJUnit)
	if err := os.WriteFile(jsonPath, append(j, '\n'), 0o644); err != nil {
		return "", "", fmt.Errorf("writing the validation report: %w", err)
	}
	if err := os.WriteFile(junitPath, x, 0o644); err != nil {
		return "", "", fmt.Errorf("writing the JUnit report: %w", err)
	}
	return jsonPath, junitPath, nil
}
