package docs

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

var update = flag.Bool("update", false, "rewrite the generated parts of docs/reference.md and docs/architecture.md")

// snofactoryBin is the binary the pages are checked against, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }

// readPages reads the README and every page under docs/.
func readPages(t *testing.T) (root string, pages []page) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 5 {
		t.Fatalf("found only %d pages under docs/", len(names))
	}
	for _, name := range append([]string{filepath.Join(root, "README.md")}, names...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, name)
		pages = append(pages, parsePage(filepath.ToSlash(rel), string(b)))
	}
	return root, pages
}

// binaryCLI reads the binary's command tree once: each --help is a process of its own.
var binaryCLI = sync.OnceValues(func() (*cliCommand, error) { return readCLI(snofactoryBin) })

func readBinaryCLI(t *testing.T) *cliCommand {
	t.Helper()
	cli, err := binaryCLI()
	if err != nil {
		t.Fatal(err)
	}
	if len(cli.all()) < 20 {
		t.Fatalf("read only %d commands from snofactory --help", len(cli.all()))
	}
	return cli
}

// pageCommands lists the snofactory commands a page shows, in its blocks and spans.
func pageCommands(p page, cli *cliCommand) [][]string {
	var out [][]string
	for _, b := range p.blocks {
		if !shellBlock(b.lang) {
			continue
		}
		for _, line := range blockCommands(b) {
			out = append(out, snofactoryArgs(line)...)
		}
	}
	for _, s := range p.spans {
		if args, ok := spanArgs(s, cli); ok {
			out = append(out, args)
		}
	}
	return out
}

// TestPagesShowRealCommands checks every snofactory command the README and the docs show
// against the real binary: its subcommands exist and it has every flag given.
func TestPagesShowRealCommands(t *testing.T) {
	_, pages := readPages(t)
	cli := readBinaryCLI(t)
	total := 0
	for _, p := range pages {
		cmds := pageCommands(p, cli)
		total += len(cmds)
		for _, args := range cmds {
			if err := cli.check(args); err != nil {
				t.Errorf("%s shows `snofactory %s`: %v", p.name, strings.Join(args, " "), err)
			}
		}
	}
	if total < 50 {
		t.Fatalf("found only %d snofactory commands in the pages", total)
	}
}

// repoPath is a path into the repository as a page names it in code: from the top of the
// checkout, as the commands run.
var repoPath = regexp.MustCompile(`(?:^|[\s"'(=])(?:\./)?((?:cmd|pipeline|stages|blueprints|seeds|test)/[^\s"'(),;:*<>{` + "`" + `]*)`)

// written are the paths pages name that a command shows writing, not files of the tree.
var written = map[string]bool{"blueprints/du-profile.lock.json": true}

// pagePaths lists the repository paths a page names in spans and command blocks.
func pagePaths(p page) []string {
	texts := append([]string{}, p.spans...)
	for _, b := range p.blocks {
		if shellBlock(b.lang) {
			texts = append(texts, b.lines...)
		}
	}
	var out []string
	for _, s := range texts {
		for _, m := range repoPath.FindAllStringSubmatch(s, -1) {
			out = append(out, strings.TrimRight(m[1], "./"))
		}
	}
	return out
}

// TestPagesNameRealPaths checks that every repository path a page names exists (the tree
// moves; pages must follow) and that every relative link, and its anchor, resolves.
func TestPagesNameRealPaths(t *testing.T) {
	root, pages := readPages(t)
	byName := map[string]page{}
	for _, p := range pages {
		byName[p.name] = p
	}
	for _, p := range pages {
		for _, rel := range pagePaths(p) {
			if written[rel] {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s names %s, which is not in the repository", p.name, rel)
			}
		}
		for _, link := range p.links {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(link, "#")
			target := p.name
			if file != "" {
				target = path.Clean(path.Join(path.Dir(p.name), file))
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s links to %s, which does not exist", p.name, link)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			tp, ok := byName[target]
			if !ok {
				t.Errorf("%s links to an anchor of %s, which is not a checked page", p.name, link)
			} else if !tp.anchors[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", p.name, link, target, anchor)
			}
		}
	}
}

// machineSpecific is what a page must not say: a particular machine's paths, or "this
// machine" for a figure measured somewhere in particular.
var machineSpecific = regexp.MustCompile(`(?i)(?:^|[\s"'(=` + "`" + `])/(?:work|home|root)/|this machine`)

func TestPagesNameNoMachine(t *testing.T) {
	root, pages := readPages(t)
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(root, p.name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := machineSpecific.FindString(line); m != "" {
				t.Errorf("%s:%d says %q: pages describe the project, not one machine", p.name, i+1, strings.TrimSpace(m))
			}
		}
	}
}

// TestReferenceCommandTable keeps docs/reference.md's command table equal to the binary's
// commands and their one-line help.
func TestReferenceCommandTable(t *testing.T) {
	cli := readBinaryCLI(t)
	var b strings.Builder
	b.WriteString("| command | what it does |\n| --- | --- |\n")
	for _, c := range cli.all()[1:] {
		fmt.Fprintf(&b, "| `snofactory %s` | %s |\n", strings.Join(c.path, " "), strings.ReplaceAll(c.short, "|", `\|`))
	}
	checkGenerated(t, "docs/reference.md", "commands", b.String())
}

// TestArchitectureGraph keeps the import graph in docs/architecture.md equal to what go
// list reports for the module's packages (test helpers left out).
func TestArchitectureGraph(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checkGenerated(t, "docs/architecture.md", "imports", "```\n"+importGraph(string(out))+"```\n")
}

// checkGenerated compares the part of a page between its "<!-- NAME: generated" line and
// its "<!-- end of NAME -->" line with want, or writes want there with -update.
func checkGenerated(t *testing.T, name, part, want string) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, name)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+part+": generated", "<!-- end of "+part+" -->"
	i := strings.Index(string(b), begin)
	j := strings.Index(string(b), end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q and %q markers", name, begin, end)
	}
	i += strings.Index(string(b[i:]), "\n") + 1
	got := string(b[i:j])
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(file, []byte(string(b[:i])+want+string(b[j:])), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the %s of %s are out of date: run go test ./test/docs -update\ngot:\n%s\nwant:\n%s", part, name, got, want)
}
