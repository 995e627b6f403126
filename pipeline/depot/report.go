package depot

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/go-units"

	_ "embed"
)

// Report files in the depot's output directory, besides StatusFile.
const (
	JUnitFile = "depot.junit.xml"
	HTMLFile  = "report.html"
)

// WriteReports writes the JUnit and HTML reports of s into dir.
func WriteReports(dir string, s *Summary) error {
	junit, err := junitReport(s)
	if err != nil {
		return err
	}
	page, err := htmlReport(dir, s)
	if err != nil {
		return err
	}
	return errors.Join(writeAtomic(filepath.Join(dir, JUnitFile), junit), writeAtomic(filepath.Join(dir, HTMLFile), page))
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// junitReport is one test case per build, failed with its stage and error.
func junitReport(s *Summary) ([]byte, error) {
	suite := junitSuite{Name: "depot", Time: seconds(s.Finished.Sub(s.Started))}
	for _, b := range s.Builds {
		c := junitCase{Name: b.Name, ClassName: "depot." + b.Name, Time: seconds(b.Finished.Sub(b.Started))}
		if b.Status != StatusSucceeded {
			stage := b.FailedStage
			if stage == "" {
				stage = "(before any stage)"
			}
			c.Failure = &junitFailure{Message: fmt.Sprintf("%s failed at %s", b.Name, stage), Type: b.Status,
				Text: fmt.Sprintf("%s\nlog: %s", b.Error, b.Log)}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
		suite.Tests++
	}
	out, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func seconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%.3f", d.Seconds())
}

//go:embed report.html.tmpl
var reportTemplate string

// bar is one stage drawn on a build's timeline.
type bar struct {
	Stage, Cache, Title string
	X, W                float64 // on a 1000-wide timeline
}

type buildView struct {
	Result
	Fetched   string // bytes the build's stages fetched (their summaries' bytesFetched)
	Y         int    // the build's lane on the timeline
	Bars      []bar
	HitRate   string
	LogRel    string
	Duration  string
	StageLogs map[string]string
}

type reportView struct {
	*Summary
	Builds     []buildView
	Span       string
	Counts     map[string]int
	Hits, Miss int
	HitRate    string
	Generated  string
	Height     int // of the timeline
}

// htmlReport renders the self-contained HTML report: a per-build stage timeline (SVG),
// cache hit rates, and each failure with its stage and a link to its log.
func htmlReport(dir string, s *Summary) ([]byte, error) {
	t, err := template.New("report").Parse(reportTemplate)
	if err != nil {
		return nil, err
	}
	start, end := s.Started, s.Finished
	if end.IsZero() {
		end = time.Now()
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Second
	}
	counts, hits, misses := s.Counts()
	v := reportView{Summary: s, Span: span.Round(time.Second).String(), Counts: counts, Hits: hits, Miss: misses,
		HitRate: rate(hits, misses), Generated: time.Now().UTC().Format(time.RFC3339)}
	for i, b := range s.Builds {
		bv := viewOf(dir, b, start, span)
		bv.Y = i * laneHeight
		v.Builds = append(v.Builds, bv)
	}
	v.Height = max(len(s.Builds)*laneHeight, laneHeight)
	var sb strings.Builder
	if err := t.Execute(&sb, v); err != nil {
		return nil, err
	}
	return []byte(sb.String()), nil
}

func viewOf(dir string, b Result, start time.Time, span time.Duration) buildView {
	bv := buildView{Result: b, StageLogs: map[string]string{}}
	if rel, err := filepath.Rel(dir, b.Log); err == nil {
		bv.LogRel = rel
	}
	if !b.Finished.IsZero() {
		bv.Duration = b.Finished.Sub(b.Started).Round(time.Second).String()
	}
	hits, misses := 0, 0
	var fetched int64
	for _, st := range b.Stages {
		var sum struct {
			BytesFetched int64 `json:"bytesFetched"`
		}
		if st.Cache == "miss" && json.Unmarshal(st.Summary, &sum) == nil {
			fetched += sum.BytesFetched
		}
		if st.Cache == "hit" {
			hits++
		} else {
			misses++
		}
		if st.LogPath != "" {
			if rel, err := filepath.Rel(dir, st.LogPath); err == nil {
				bv.StageLogs[st.Name] = rel
			}
		}
		if st.Started.IsZero() {
			continue
		}
		x := float64(st.Started.Sub(start)) / float64(span) * 1000
		w := float64(st.Duration) / float64(span) * 1000
		cache := st.Cache
		if st.Error != "" {
			cache = "failed"
		}
		bv.Bars = append(bv.Bars, bar{Stage: st.Name, Cache: cache, X: clamp(x), W: max(clamp(w), 2),
			Title: fmt.Sprintf("%s: %s, %s", st.Name, cache, time.Duration(st.Duration).Round(time.Millisecond))})
	}
	bv.HitRate = rate(hits, misses)
	bv.Fetched = units.BytesSize(float64(fetched))
	return bv
}

func rate(hits, misses int) string {
	if hits+misses == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", float64(hits)/float64(hits+misses)*100)
}

func clamp(v float64) float64 {
	return min(max(v, 0), 1000)
}

// laneHeight is one build's height on the timeline.
const laneHeight = 24
