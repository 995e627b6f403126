package pipeline

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// redactor removes a stage's secret values from everything the engine writes for people
// (logs, events, errors, run.json): a tool may quote its input in an error message.
type redactor struct {
	values []string
}

// minSecretLen keeps short, common strings (a JSON "{}", a user name) from being treated as
// secrets and blanking unrelated text.
const minSecretLen = 8

const redacted = "[REDACTED]"

// newRedactor collects the values of the named secrets, and for JSON secrets (pull secrets)
// every string in them too, since a tool is likelier to quote one auth token than the file.
func newRedactor(src SecretSource, names []string) (redactor, error) {
	var r redactor
	for _, name := range names {
		if src == nil {
			break
		}
		v, err := src.Secret(name)
		if err != nil {
			return r, err
		}
		r.add(strings.TrimSpace(string(v)))
		var doc any
		if json.Unmarshal(v, &doc) == nil {
			r.addStrings(doc)
		}
	}
	// Longest first, so a whole secret is replaced before any part of it.
	slices.SortFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	return r, nil
}

func (r *redactor) add(v string) {
	if len(v) >= minSecretLen && !slices.Contains(r.values, v) {
		r.values = append(r.values, v)
	}
}

func (r *redactor) addStrings(doc any) {
	switch d := doc.(type) {
	case string:
		r.add(d)
	case []any:
		for _, x := range d {
			r.addStrings(x)
		}
	case map[string]any:
		for _, x := range d {
			r.addStrings(x)
		}
	}
}

func (r redactor) string(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// writer redacts whole writes. The stage log handler writes one record per call, so a secret
// never straddles two writes.
func (r redactor) writer(w io.Writer) io.Writer {
	if len(r.values) == 0 {
		return w
	}
	return redactWriter{r, w}
}

type redactWriter struct {
	r redactor
	w io.Writer
}

func (rw redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.string(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
