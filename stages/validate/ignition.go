package validate

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// expected is an Ignition config, parsed with the spec package of the version it declares
// (v3_5.ParseCompatibleVersion parses 3.0–3.5 each with its own package and translates up).
type expected struct{ cfg types.Config }

func parseExpected(raw []byte) (*expected, error) {
	cfg, rep, err := v35.ParseCompatibleVersion(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing the rendered Ignition config: %w (%s)", err, strings.TrimSpace(rep.String()))
	}
	return &expected{cfg: cfg}, nil
}

// Ignition's defaults for nodes without a mode.
const (
	defaultFileMode = 0o644
	defaultDirMode  = 0o755
)

func checkFiles(f *wire.Facts, e *expected) outcome {
	facts := map[string]wire.FileFact{}
	for _, ff := range f.Files {
		facts[ff.Path+"|"+ff.Declared] = ff
	}
	var problems []string
	n := 0
	look := func(n types.Node, kind string) (wire.FileFact, bool) {
		ff, ok := facts[n.Path+"|"+kind]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s %s not reported by the guest%s", kind, n.Path, truncNote(f, "files")))
			return ff, false
		}
		if !ff.Exists {
			problems = append(problems, fmt.Sprintf("%s %s missing", kind, n.Path))
			return ff, false
		}
		if ff.Kind != kind {
			problems = append(problems, fmt.Sprintf("%s %s is a %s", kind, n.Path, ff.Kind))
			return ff, false
		}
		problems = append(problems, ownerProblems(n, ff)...)
		return ff, true
	}
	for _, d := range e.cfg.Storage.Directories {
		n++
		if ff, ok := look(d.Node, wire.KindDirectory); ok {
			problems = append(problems, modeProblem(d.Path, d.Mode, defaultDirMode, ff.Mode)...)
		}
	}
	for _, file := range e.cfg.Storage.Files {
		n++
		if ff, ok := look(file.Node, wire.KindFile); ok {
			problems = append(problems, modeProblem(file.Path, file.Mode, defaultFileMode, ff.Mode)...)
			problems = append(problems, contentProblem(file, ff)...)
		}
	}
	for _, l := range e.cfg.Storage.Links {
		if l.Hard != nil && *l.Hard {
			continue // a hard link is a file; nothing of its own to compare
		}
		n++
		if ff, ok := look(l.Node, wire.KindLink); ok && l.Target != nil && ff.Target != *l.Target {
			problems = append(problems, fmt.Sprintf("link %s points to %s, want %s", l.Path, ff.Target, *l.Target))
		}
	}
	return failures(problems, fmt.Sprintf("%d files, directories and links as declared", n))
}

func truncNote(f *wire.Facts, list string) string {
	if f.Truncated[list] > 0 {
		return " (its list was cut to fit one message)"
	}
	return ""
}

func modeProblem(path string, mode *int, def int, got uint32) []string {
	want := def
	if mode != nil {
		want = *mode
	}
	if uint32(want) != got {
		return []string{fmt.Sprintf("%s has mode %04o, want %04o", path, got, want)}
	}
	return nil
}

func ownerProblems(n types.Node, ff wire.FileFact) []string {
	var out []string
	switch {
	case n.User.ID != nil && *n.User.ID != ff.UID:
		out = append(out, fmt.Sprintf("%s is owned by uid %d, want %d", n.Path, ff.UID, *n.User.ID))
	case n.User.ID == nil && n.User.Name != nil && *n.User.Name != ff.User:
		out = append(out, fmt.Sprintf("%s is owned by %q, want %q", n.Path, ff.User, *n.User.Name))
	case n.User.ID == nil && n.User.Name == nil && ff.UID != 0:
		out = append(out, fmt.Sprintf("%s is owned by uid %d, want root", n.Path, ff.UID))
	}
	switch {
	case n.Group.ID != nil && *n.Group.ID != ff.GID:
		out = append(out, fmt.Sprintf("%s has gid %d, want %d", n.Path, ff.GID, *n.Group.ID))
	case n.Group.ID == nil && n.Group.Name != nil && *n.Group.Name != ff.Group:
		out = append(out, fmt.Sprintf("%s has group %q, want %q", n.Path, ff.Group, *n.Group.Name))
	case n.Group.ID == nil && n.Group.Name == nil && ff.GID != 0:
		out = append(out, fmt.Sprintf("%s has gid %d, want root", n.Path, ff.GID))
	}
	return out
}

// contentProblem compares a file's sha256 with its declared inline (data URL) content.
// Remote sources and appended files cannot be predicted here and are not compared.
func contentProblem(file types.File, ff wire.FileFact) []string {
	src := file.Contents.Source
	if src == nil || len(file.Append) > 0 || !strings.HasPrefix(*src, "data:") {
		return nil
	}
	want, err := dataSHA256(*src, file.Contents.Compression)
	if err != nil {
		return []string{fmt.Sprintf("%s: declared contents unreadable: %v", file.Path, err)}
	}
	if ff.SHA256 != want {
		return []string{fmt.Sprintf("%s content sha256 %s, want %s", file.Path, short(ff.SHA256), short(want))}
	}
	return nil
}

// MaxInlineContents bounds the decompressed size of a file's inline (data URL) contents
// whose sha256 validate computes. A gzip data URL inside a config of a few MiB can expand
// a thousandfold, and Ignition itself gunzips it with no bound (ignition v2.23.0,
// internal/resource/url.go, Fetcher.uncompress and decompressCopyHashAndVerify): here a
// gzip bomb fails in seconds instead of being read whole into memory.
const MaxInlineContents = 256 << 20

func dataSHA256(src string, compression *string) (string, error) {
	return dataSHA256Max(src, compression, MaxInlineContents)
}

// dataSHA256Max hashes the decoded (and, for gzip, decompressed) contents as a stream,
// refusing more than limit bytes.
func dataSHA256Max(src string, compression *string, limit int64) (string, error) {
	u, err := dataurl.DecodeString(src)
	if err != nil {
		return "", err
	}
	var r io.Reader = bytes.NewReader(u.Data)
	if compression != nil && *compression == "gzip" {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", fmt.Errorf("gunzip: %w", err)
		}
		r = zr
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, limit+1))
	if err != nil {
		return "", fmt.Errorf("gunzip: %w", err)
	}
	if n > limit {
		return "", fmt.Errorf("decompressed contents larger than %d bytes", limit)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func checkUnits(f *wire.Facts, e *expected) outcome {
	facts := map[string]wire.UnitFact{}
	for _, u := range f.Units {
		facts[u.Name] = u
	}
	var problems []string
	for _, u := range e.cfg.Systemd.Units {
		uf, ok := facts[u.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("unit %s not reported by the guest%s", u.Name, truncNote(f, "units")))
			continue
		}
		problems = append(problems, unitProblems(u, uf)...)
	}
	return failures(problems, fmt.Sprintf("%d units as declared", len(e.cfg.Systemd.Units)))
}

func unitProblems(u types.Unit, uf wire.UnitFact) []string {
	var out []string
	masked := u.Mask != nil && *u.Mask
	switch {
	case masked && !uf.Masked:
		out = append(out, fmt.Sprintf("unit %s is not masked", u.Name))
	case !masked && u.Contents != nil && !uf.Present:
		out = append(out, fmt.Sprintf("unit %s missing", u.Name))
	case !masked && u.Contents != nil && uf.SHA256 != sha256Hex([]byte(*u.Contents)):
		out = append(out, fmt.Sprintf("unit %s content differs from the config", u.Name))
	}
	if u.Enabled != nil && *u.Enabled && !uf.Enabled {
		out = append(out, fmt.Sprintf("unit %s is not enabled (no preset or .wants link)", u.Name))
	}
	if u.Enabled != nil && !*u.Enabled && uf.Enabled {
		out = append(out, fmt.Sprintf("unit %s is enabled (%s), want disabled", u.Name, uf.EnabledBy))
	}
	dropins := map[string]wire.DropinFact{}
	for _, d := range uf.Dropins {
		dropins[d.Name] = d
	}
	for _, d := range u.Dropins {
		df := dropins[d.Name]
		switch {
		case d.Contents == nil:
		case !df.Present:
			out = append(out, fmt.Sprintf("drop-in %s of %s missing", d.Name, u.Name))
		case df.SHA256 != sha256Hex([]byte(*d.Contents)):
			out = append(out, fmt.Sprintf("drop-in %s of %s content differs from the config", d.Name, u.Name))
		}
	}
	return out
}

func checkUsers(f *wire.Facts, e *expected) outcome {
	facts := map[string]wire.UserFact{}
	for _, u := range f.Users {
		facts[u.Name] = u
	}
	var problems []string
	for _, u := range e.cfg.Passwd.Users {
		uf, ok := facts[u.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("user %s not reported by the guest%s", u.Name, truncNote(f, "users")))
			continue
		}
		if u.ShouldExist != nil && !*u.ShouldExist {
			if uf.Present {
				problems = append(problems, fmt.Sprintf("user %s exists, want absent", u.Name))
			}
			continue
		}
		if !uf.Present {
			problems = append(problems, fmt.Sprintf("user %s missing from /etc/passwd", u.Name))
		}
		for _, k := range u.SSHAuthorizedKeys {
			if h := wire.SSHKeyHash(string(k)); h != "" && !slices.Contains(uf.AuthorizedKeys, h) {
				problems = append(problems, fmt.Sprintf("user %s lacks SSH key %s", u.Name, clip(string(k), 40)))
			}
		}
	}
	return failures(problems, fmt.Sprintf("%d users as declared", len(e.cfg.Passwd.Users)))
}
