package depot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

func TestSummaryWriteText(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start.Add(90 * time.Second)
	for _, tc := range []struct {
		name string
		sum  Summary
		want []string
	}{
		{"empty", Summary{Status: StatusSucceeded}, []string{
			"BUILD  STATUS  ATTEMPTS  TIME  FAILED STAGE  OUTPUT",
			"depot succeeded: 0 succeeded, 0 failed, 0 running, 0 queued; stages: 0 cache hits, 0 runs",
		}},
		{"finished, running and queued", Summary{Status: StatusRunning, Builds: []Result{
			{Build: Build{Name: "a"}, Status: StatusFailed, Attempts: 2, FailedStage: "install", OutputDir: "out/a",
				Started: start, Finished: start.Add(61 * time.Second),
				Stages: []pipeline.StageRecord{{Cache: "hit"}, {Cache: "miss"}}},
			{Build: Build{Name: "bb"}, Status: StatusRunning, Attempts: 1, OutputDir: "out/bb", Started: start,
				Stages: []pipeline.StageRecord{{Cache: "hit"}}},
			{Build: Build{Name: "c"}, Status: StatusQueued, OutputDir: "out/c"},
		}}, []string{
			"BUILD  STATUS   ATTEMPTS  TIME   FAILED STAGE  OUTPUT",
			"a      failed   2         1m1s   install       out/a",
			"bb     running  1         1m30s                out/bb",
			"c      queued   0                              out/c",
			"depot running: 0 succeeded, 1 failed, 1 running, 1 queued; stages: 2 cache hits, 1 runs",
		}},
		// On Tekton: the failed task and its message, and a cancelled run, are printed.
		{"tekton: failed with a message, cancelled", Summary{Status: StatusFailed, Builds: []Result{
			{Build: Build{Name: "a"}, Status: StatusFailed, Attempts: 1, FailedStage: "factory-vm", OutputDir: "c:output/builds/a",
				Error: "PipelineRun snofactory-a-x: task factory-vm: \"step-build\" exited with code 1\x1b[2J"},
			{Build: Build{Name: "b"}, Status: StatusCancelled, Attempts: 1, OutputDir: "c:output/builds/b",
				Error: "PipelineRun snofactory-b-y: cancelled: PipelineRun \"snofactory-b-y\" was cancelled"},
		}}, []string{
			"BUILD  STATUS     ATTEMPTS  TIME  FAILED STAGE  OUTPUT",
			"a      failed     1               factory-vm    c:output/builds/a",
			"b      cancelled  1                             c:output/builds/b",
			`a: "PipelineRun snofactory-a-x: task factory-vm: \"step-build\" exited with code 1\x1b[2J"`,
			`b: "PipelineRun snofactory-b-y: cancelled: PipelineRun \"snofactory-b-y\" was cancelled"`,
			"depot failed: 0 succeeded, 1 failed, 1 cancelled, 0 running, 0 queued; stages: 0 cache hits, 0 runs",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.sum.WriteText(&b, now); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), strings.Join(tc.want, "\n")+"\n"; got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestSummaryErr(t *testing.T) {
	for _, tc := range []struct {
		status, want string
	}{
		{StatusSucceeded, ""},
		{StatusRunning, ""},
		{StatusFailed, "depot: some builds failed"},
		{StatusInterrupted, "depot: interrupted (its process is gone); run it again to finish the remaining builds"},
	} {
		err := (&Summary{Status: tc.status}).Err()
		if got := errString(err); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.status, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestNameBuilds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		names map[string]string
		want  string
	}{
		{"file names", []string{"d/a.yaml", "e/b.yml"}, nil, "a,b"},
		{"metadata names made unique", []string{"a.yaml", "b.yaml", "c.yaml"}, map[string]string{"a.yaml": "site", "b.yaml": "site"}, "site,site-2,c"},
		{"a file name clashing with a metadata name", []string{"x/site.yaml", "y.yaml"}, map[string]string{"y.yaml": "site"}, "site,site-2"},
		{"an empty name falls back to the file's", []string{"z.yaml"}, map[string]string{"z.yaml": ""}, "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for i, b := range NameBuilds(tc.paths, tc.names) {
				if b.Blueprint != tc.paths[i] {
					t.Errorf("build %d: blueprint %q, want %q", i, b.Blueprint, tc.paths[i])
				}
				got = append(got, b.Name)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("names %v, want %s", got, tc.want)
			}
		})
	}
}

// Each build of a depot is named by its blueprint's metadata.name (else its file name),
// made unique; only the preloaded blueprints load.
func TestPreloadedBuilds(t *testing.T) {
	g := &pipeline.Graph{Blueprint: "site"}
	p := Preloaded{"a.yaml": {Graph: g}, "b.yaml": {Graph: &pipeline.Graph{Blueprint: "site"}}, "c.yaml": {Graph: &pipeline.Graph{}}}
	var names []string
	for _, b := range p.Builds([]string{"a.yaml", "b.yaml", "c.yaml"}) {
		names = append(names, b.Name)
	}
	if strings.Join(names, ",") != "site,site-2,c" {
		t.Errorf("names %v", names)
	}
	for _, tc := range []struct {
		path    string
		wantErr bool
	}{{"a.yaml", false}, {"d.yaml", true}} {
		got, _, err := p.Load(tc.path)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != g) {
			t.Errorf("Load(%s): %v, %v", tc.path, got, err)
		}
	}
}
