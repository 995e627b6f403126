package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCLILines bounds cmd/snofactory's non-test Go: the command line parses flags and
// prints, under 2,500 lines; its logic, and the text form of the types it prints, live in
// the packages that own them (issue 28). The bound must only go down.
const maxCLILines = 2500

func TestCLIIsThin(t *testing.T) {
	files, err := filepath.Glob("../../cmd/snofactory/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cmd/snofactory sources: %v", err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(b), "\n")
	}
	if lines >= maxCLILines {
		t.Errorf("cmd/snofactory holds %d lines of non-test Go, want under %d: move logic to the package that owns it", lines, maxCLILines)
	}
}
