package docs

import (
	"reflect"
	"strings"
	"testing"
)

// TestCommandExtraction reads commands the way pages write them.
func TestCommandExtraction(t *testing.T) {
	p := parsePage("x.md", "# X\n\nText with `seed\npush --sign-by` and `-o` and `make demo`.\n\n"+
		"```sh\nA=1 snofactory keys generate out/k   # comment --nope\n"+
		"go run ./test/cmd/demoenv -- \\\n  sh -c 'snofactory lock \"$1\" && snofactory build --locked \"$1\"' sh b.yaml\n"+
		"tkn pipeline start snofactory --showlog\n```\n"+
		"```yaml\nx: snofactory build --yaml\n```\n"+
		"```text\nsnofactory depot run FILE|DIR [--vms N]\n```\n")
	cli := &cliCommand{children: map[string]*cliCommand{"seed": {children: map[string]*cliCommand{"push": {}}}}}
	got := pageCommands(p, cli)
	want := [][]string{
		{"keys", "generate", "out/k"},
		{"lock", "$1"},
		{"build", "--locked", "$1"},
		{"depot", "run", "FILE|DIR", "--vms", "N"},
		{"seed", "push", "--sign-by"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if want := []string{"test/cmd/demoenv"}; !reflect.DeepEqual(pagePaths(p), want) {
		t.Errorf("paths %q, want %q", pagePaths(p), want)
	}
}

// TestCheckCatches runs the real binary's command tree against broken commands.
func TestCheckCatches(t *testing.T) {
	cli := readBinaryCLI(t)
	for _, tc := range []struct{ args, wantErr string }{
		{"seed write --image x --device y --from z", ""},
		{"iso kargs modify -a console=tty0 -o out.iso in.iso", ""},
		{"seed pull --policy p.json --registries.d d ref dir", ""},
		{"cache ls|du", ""},
		{"seed write --imgae x", "has no flag --imgae"},
		{"seed frob x", `has no subcommand "frob"`},
		{"seed", ""},
		{"seed COMMAND --help", ""},
		{"seed --jobs 2", "needs a subcommand before --jobs"},
		{"cache ls|frob", `has no subcommand "frob"`},
		{"build --chunk-size 1MiB x.yaml", "has no flag --chunk-size"},
		{"iso kargs modify -z x", "has no flag -z"},
	} {
		err := cli.check(strings.Fields(tc.args))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want an error containing %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestPageChecksCatch breaks pages the ways the tree moves, to see the checks notice.
func TestPageChecksCatch(t *testing.T) {
	p := parsePage("docs/x.md", "# X\n\n## Real heading\n\nSee `seeds/siteconfig/testdata/x.yaml` and [y](y.md#z) and [h](#real-heading).\n\n"+
		"```sh\nsnofactory site-config validate seeds/site/siteconfig\n```\n")
	if want := []string{"seeds/siteconfig/testdata/x.yaml", "seeds/site/siteconfig"}; !reflect.DeepEqual(pagePaths(p), want) {
		t.Errorf("paths %q, want %q", pagePaths(p), want)
	}
	if want := []string{"y.md#z", "#real-heading"}; !reflect.DeepEqual(p.links, want) {
		t.Errorf("links %q, want %q", p.links, want)
	}
	if !p.anchors["real-heading"] || !p.anchors["x"] {
		t.Errorf("anchors %v lack real-heading and x", p.anchors)
	}
	for _, bad := range []string{"kept in /work/main/build", "on this machine", "see `/home/u/x`"} {
		if !machineSpecific.MatchString(bad) {
			t.Errorf("%q is not caught as machine-specific", bad)
		}
	}
	for _, good := range []string{"oci:/tmp/du:2", "a Debian machine as root", "/etc/containers/policy.json"} {
		if machineSpecific.MatchString(good) {
			t.Errorf("%q is caught as machine-specific", good)
		}
	}
}
