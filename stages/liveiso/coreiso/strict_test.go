package coreiso

import (
	"errors"
	"strings"
	"testing"
)

// The JSON an ISO carries about its own layout is decoded strictly: a key named twice (an
// offset, say) or anything after the object makes the ISO malformed, at a named place.
func TestISOJSONStrict(t *testing.T) {
	igninfo := func(b string) error { _, err := parseIgnInfo([]byte(b)); return err }
	kargs := func(b string) error { _, err := ParseKargsJSON([]byte(b)); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"igninfo: duplicated key", igninfo(`{"file":"images/ignition.img","file":"images/other.img"}`),
			`igninfo JSON: line 1, column 31: duplicate key "file" (first at line 1, column 2)`},
		{"igninfo: data after it", igninfo(`{"file":"images/ignition.img"} {}`), "igninfo JSON: line 1, column 32: data after the JSON document"},
		{"kargs: duplicate at depth", kargs(`{"default":"","files":[{"path":"a","offset":1,"offset":2}],"size":1024}`),
			`kargs JSON: line 1, column 47: duplicate key "offset" (first at line 1, column 36)`},
		{"kargs: data after it", kargs(`{"default":"","files":[],"size":1024}` + "\n{}"), "kargs JSON: line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrMalformed) || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("err = %v, want malformed and %q", tc.err, tc.want)
			}
		})
	}
}
