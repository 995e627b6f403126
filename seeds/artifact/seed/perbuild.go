package seed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// PerBuildKeyword is the top-level keyword of the manifest's JSON Schema that lists
// PerBuildFields.
const PerBuildKeyword = "x-per-build"

// PerBuildFields are the manifest fields that may differ between two builds from the same
// lock and blueprint with the same SOURCE_DATE_EPOCH, in different caches and on different
// days. Every other field is the same in both (DiffManifests checks it). A path names one
// field per object level, joined by dots; "[]" after an array stands for each element.
//
// They all describe bytes that are not reproduced exactly. The sealed disk carries what the
// kernel writes at each boot (inode change times and generation numbers, the superblock's
// mount and write times), so the pack, its index and the raw disk have digests and sizes
// of their own; the SBOM names the raw disk's digest; and the credentials bundle holds the
// cluster's own keys, encrypted with fresh randomness.
func PerBuildFields() []string {
	return []string{
		"disks[].size", "disks[].digest", "disks[].rawDigest", "disks[].index.size", "disks[].index.digest",
		"credentials.size", "credentials.digest",
		"sbom.size", "sbom.digest",
	}
}

// DiffManifests compares two seed manifests (the bytes of seed.json) and returns the paths
// of the fields they differ in, ignoring exactly PerBuildFields. Paths carry array
// indexes ("images[2].digest"); a field only one side has is a difference, and so is an
// array of another length (its path alone). No paths means the builds reproduced each
// other. Every field is compared as JSON, including fields the Go types do not know.
func DiffManifests(a, b []byte) ([]string, error) {
	return DiffJSON(a, b, PerBuildFields())
}

// DiffJSON is DiffManifests for any two JSON objects of a seed's size (a provenance
// statement), ignoring the fields perBuild names in PerBuildFields' form.
func DiffJSON(a, b []byte, perBuild []string) ([]string, error) {
	va, err := decodeManifestJSON(a, "the first document")
	if err != nil {
		return nil, err
	}
	vb, err := decodeManifestJSON(b, "the second document")
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, f := range perBuild {
		skip[f] = true
	}
	var out []string
	diffJSON("", "", va, vb, skip, &out)
	return out, nil
}

func decodeManifestJSON(b []byte, what string) (any, error) {
	if len(b) > maxManifestSize {
		return nil, fmt.Errorf("%s is %d bytes, more than a seed manifest's %d", what, len(b), maxManifestSize)
	}
	if err := strictjson.Check(b); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	// Numbers as written: a size must not compare equal after rounding through float64.
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s has more after its JSON object", what)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s is not a JSON object", what)
	}
	return v, nil
}

// diffJSON appends to out the paths under path where a and b differ; field is path in
// PerBuildFields form, which a skipped field matches.
func diffJSON(path, field string, a, b any, skip map[string]bool, out *[]string) {
	if skip[field] {
		return
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, f := k, k
			if path != "" {
				p, f = path+"."+k, field+"."+k
			}
			va, inA := x[k]
			vb, inB := y[k]
			if inA != inB {
				if !skip[f] {
					*out = append(*out, p)
				}
				continue
			}
			diffJSON(p, f, va, vb, skip, out)
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			*out = append(*out, path)
			return
		}
		for i := range x {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), field+"[]", x[i], y[i], skip, out)
		}
	default:
		// Strings, json.Numbers, booleans and null compare by value.
		if a != b {
			*out = append(*out, path)
		}
	}
}

// ParseSourceDateEpoch reads a SOURCE_DATE_EPOCH value, as a stage's options carry it:
// its time when it is set (ok true), the time a build that reproduces another clamps what
// it makes to; ok is false for "" (not set). Unlike SourceDate, it has no clock to fall
// back on.
func ParseSourceDateEpoch(s string) (t time.Time, ok bool, err error) {
	if s == "" {
		return time.Time{}, false, nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), true, nil
}
