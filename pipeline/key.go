package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/smallfile"
)

// KeyInputs is everything a stage's key is derived from. It is stored beside each cache entry
// and in the last-build index so that "why does this stage run?" is a diff of two KeyInputs.
type KeyInputs struct {
	Stage   string            `json:"stage"`
	Version string            `json:"version"`
	Options json.RawMessage   `json:"options"`
	Deps    map[string]string `json:"deps,omitempty"`
	Files   map[string]string `json:"files,omitempty"`
	Secrets map[string]string `json:"secrets,omitempty"`
}

// Key is the hex sha256 of the canonical JSON of the inputs.
func (k KeyInputs) Key() string {
	b, err := json.Marshal(k) // map keys are sorted by encoding/json, so this is canonical
	if err != nil {
		panic(fmt.Sprintf("marshal key inputs: %v", err)) // only raw JSON we produced ourselves
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Recipe is the hex sha256 of what the stage is asked to do, leaving out what upstream
// stages happened to produce: its name, version, options and files, the names (not the
// values) of the secrets it reads, and each upstream stage's recipe. Two builds of one
// blueprint and lock give every stage the same recipe, on any machine and in any cache,
// even where an upstream output is not bit-for-bit reproducible (an installed disk's
// kernel-stamped times; on OpenShift, the keys the installer generates), which keys chain
// on. It is what provenance records as the build's definition; keys, which do name the
// very bytes a stage consumed, are what this run made of it.
func (k KeyInputs) Recipe(upstream map[string]string) string {
	r := struct {
		Stage   string            `json:"stage"`
		Version string            `json:"version"`
		Options json.RawMessage   `json:"options"`
		Deps    map[string]string `json:"deps,omitempty"`
		Files   map[string]string `json:"files,omitempty"`
		Secrets []string          `json:"secrets,omitempty"`
	}{Stage: k.Stage, Version: k.Version, Options: k.Options, Files: k.Files, Secrets: slices.Sorted(maps.Keys(k.Secrets))}
	for name := range k.Deps {
		if r.Deps == nil {
			r.Deps = map[string]string{}
		}
		r.Deps[name] = upstream[name]
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("marshal recipe: %v", err)) // only raw JSON we produced ourselves
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Diff lists, in plain words, what differs between an earlier set of inputs and this one.
func (k KeyInputs) Diff(old KeyInputs) []string {
	var why []string
	if old.Version != k.Version {
		why = append(why, fmt.Sprintf("stage version changed (%s → %s)", old.Version, k.Version))
	}
	if !sameJSON(old.Options, k.Options) {
		why = append(why, optionsDiff(old.Options, k.Options)...)
	}
	why = append(why, mapDiff("upstream stage", old.Deps, k.Deps)...)
	why = append(why, mapDiff("file", old.Files, k.Files)...)
	why = append(why, mapDiff("secret", old.Secrets, k.Secrets)...)
	return why
}

func mapDiff(what string, old, cur map[string]string) []string {
	var why []string
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		o, ok := old[name]
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("%s %s added", what, name))
		case o != cur[name]:
			why = append(why, fmt.Sprintf("%s %s changed", what, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[name]; !ok {
			why = append(why, fmt.Sprintf("%s %s removed", what, name))
		}
	}
	return why
}

// sameJSON compares two JSON texts ignoring insignificant white space (records are stored indented).
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// optionsDiff names the option paths whose values differ.
func optionsDiff(oldRaw, curRaw json.RawMessage) []string {
	var o, c any
	if json.Unmarshal(oldRaw, &o) != nil || json.Unmarshal(curRaw, &c) != nil {
		return []string{"options changed"}
	}
	var paths []string
	walkDiff("", o, c, &paths)
	if len(paths) == 0 {
		return []string{"options changed"}
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = "option " + p + " changed"
	}
	return out
}

func walkDiff(path string, o, c any, out *[]string) {
	om, ok1 := o.(map[string]any)
	cm, ok2 := c.(map[string]any)
	if ok1 && ok2 {
		keys := slices.Sorted(maps.Keys(om))
		for k := range cm {
			if _, ok := om[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			walkDiff(strings.TrimPrefix(path+"."+k, "."), om[k], cm[k], out)
		}
		return
	}
	ob, _ := json.Marshal(o)
	cb, _ := json.Marshal(c)
	if !bytes.Equal(ob, cb) {
		if path == "" {
			path = "(all)"
		}
		*out = append(*out, path)
	}
}

// canonicalJSON marshals v and re-encodes it so that equal values give equal bytes whatever
// their Go types (struct field order, map order).
func canonicalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// Numbers stay json.Number: a float64 round trip would change integers above 2^53.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// digestPath returns the sha256 of a file, or of a directory tree (relative paths, modes and
// contents, in sorted order), so renaming the checkout does not change it.
func digestPath(ctx context.Context, p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if !st.IsDir() {
		if err := hashFile(ctx, h, p); err != nil {
			return "", err
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), info.Mode())
		if info.Mode().IsRegular() {
			return hashFile(ctx, h, path)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "sha256-tree:" + hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile hashes the file at p as a stream: a file a blueprint names (an ISO, a keyfile),
// so a FIFO or a device is refused rather than waited on or read without end.
func hashFile(ctx context.Context, w io.Writer, p string) error {
	f, err := smallfile.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, ctxio.Reader(ctx, f))
	return err
}
