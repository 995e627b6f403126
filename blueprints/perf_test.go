package blueprints

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile inputs must fail fast with a clear message, not hang or eat memory. Each case runs
// under a deadline far above what it needs (milliseconds) so a slow shared machine does not
// make it flaky, while a hang still fails.
func TestHostileInputsFailFast(t *testing.T) {
	dir := fixtureDir(t)
	const limit = 10 * time.Second

	// Billion laughs: each level lists the previous one twelve times; more aliases than
	// any blueprint needs, refused before anything is expanded.
	bomb := coreos("") + "  butane:\n    - inline: &a0 \"variant: fcos\"\n"
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 12), ",")
		bomb += fmt.Sprintf("  x%d: &a%d [%s]\n", i, i, refs)
	}
	bomb += "  extraImages: *a9\n"

	// An alias bomb shaped like the schema, so the decoder really walks it: one long list
	// of mirrors shared by many entries.
	var mirrors strings.Builder
	mirrors.WriteString(coreos("  registryMirrors:\n    - source: quay.io/a\n      mirrors: &m\n"))
	for i := 0; i < 2000; i++ {
		mirrors.WriteString("        - registry.example/a\n")
	}
	for i := 0; i < 90; i++ {
		mirrors.WriteString("    - source: quay.io/a\n      mirrors: *m\n")
	}

	flowDeep := coreos("  vm: " + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + "\n")

	var blockDeep strings.Builder
	blockDeep.WriteString(coreos("  vm:\n"))
	for i := 0; i < 1500; i++ {
		blockDeep.WriteString(strings.Repeat(" ", 4+i) + "k:\n")
	}

	var manyNodes strings.Builder
	manyNodes.WriteString(strings.Replace(coreos(""), "  name: test\n", "  name: test\n  labels:\n", 1))
	for i := 0; manyNodes.Len() < MaxFileSize-64; i++ {
		fmt.Fprintf(&manyNodes, "    l%d: v\n", i)
	}
	manyNodesDoc := manyNodes.String()

	var unknownKeys strings.Builder
	unknownKeys.WriteString(coreos(""))
	for i := 0; unknownKeys.Len() < MaxFileSize-300; i++ {
		fmt.Fprintf(&unknownKeys, "  k%06d%s: 1\n", i, strings.Repeat("q", 200))
	}
	var duplicates strings.Builder
	duplicates.WriteString(coreos("  extraImages:\n"))
	for i := 0; i < 1900; i++ { // under the list limit, so validation sees them all
		duplicates.WriteString("    - quay.io/a/b:1\n")
	}

	var networks strings.Builder
	networks.WriteString(openshift("    serviceNetwork:\n"))
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&networks, "      - 10.%d.%d.0/24\n", i/256, i%256)
	}
	var fragments strings.Builder
	fragments.WriteString(coreos("  butane:\n"))
	for i := 0; i < 30000; i++ {
		fragments.WriteString("    - inline: \"variant: fcos\\nversion: 1.4.0\\n\"\n")
	}

	cases := []struct {
		name, doc, want string
	}{
		{"many networks", networks.String(), "more than the limit of 32"},
		{"many fragments", fragments.String(), "more than the limit of 100"},
		{"many unknown keys", unknownKeys.String(), "more than 100 problems"},
		{"many duplicate images", duplicates.String(), "more than 100 problems"},
		{"billion laughs", bomb, "aliases"},
		{"schema-shaped alias bomb", mirrors.String(), "too many values"},
		{"flow nesting", flowDeep, "depth"},
		{"block nesting", blockDeep.String(), "deeper than 64"},
		{"too big", coreos("# " + strings.Repeat("x", MaxFileSize) + "\n"), "larger than"},
		{"many nodes", manyNodesDoc, "more than 100000 nodes"},
		{"long key", coreos("  " + strings.Repeat("k", 1000) + ": 1\n"), "key longer than"},
		{"longer key than YAML allows", coreos("  " + strings.Repeat("k", 1<<20) + ": 1\n"), "invalid YAML"},
		{"many documents", coreos("") + strings.Repeat("---\n", 500000), "more than one YAML document"},
		{"long string value", coreos("  extraImages: [\"" + strings.Repeat("a", 3<<20) + "\"]\n"), "more than 262144"},
		{"long image reference", coreos("  extraImages: [\"" + strings.Repeat("a", 200<<10) + "\"]\n"), "more than 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadWithin(t, p, limit)
			if err == nil {
				t.Fatal("accepted")
			}
			ps := problems(t, err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want %q in the error, got:\n%.2000s", tc.want, err.Error())
			}
			if len(ps) > maxProblems+1 {
				t.Errorf("%d problems: a hostile file should not flood the user", len(ps))
			}
			if len(err.Error()) > 64<<10 {
				t.Errorf("error text is %d bytes", len(err.Error()))
			}
		})
	}
}

// TestLargeValidFile: a legitimate file near the size cap (mostly comments) still loads fast.
func TestLargeValidFile(t *testing.T) {
	dir := fixtureDir(t)
	doc := coreos("") + strings.Repeat("# "+strings.Repeat("c", 98)+"\n", (MaxFileSize-1024)/101)
	p := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWithin(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestButaneFloodFailsFast: a fragment with thousands of unknown keys yields a bounded
// report, quickly.
func TestButaneFloodFailsFast(t *testing.T) {
	dir := fixtureDir(t)
	var b strings.Builder
	b.WriteString(coreos("  butane:\n    - inline: |\n        variant: fcos\n        version: 1.4.0\n"))
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "        unknown%d: x\n", i)
	}
	b.WriteString("# " + strings.Repeat("p", 3<<20) + "\n")
	p := filepath.Join(dir, "flood.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadWithin(t, p, 20*time.Second)
	ps := problems(t, err)
	if len(ps) > 25 || !strings.Contains(err.Error(), "the first 20 follow") {
		t.Errorf("%d problems:\n%.3000s", len(ps), err.Error())
	}
	if ps[1].Line != 14 || ps[1].Col != 9 {
		t.Errorf("first Butane finding at %d:%d, want 14:9", ps[1].Line, ps[1].Col)
	}
}
