// Package checks holds the value checks that blueprints and site configs share: a mirror
// repository, a pull secret and SSH public keys. Both documents, and every version of them,
// call these, so a value accepted by one is accepted by the other with the same message.
package checks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containers/image/v5/docker/reference"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"golang.org/x/crypto/ssh"
)

// MaxReferenceLen bounds image references before the reference grammar sees them:
// repository names are at most 255 bytes, plus a tag or a digest.
const MaxReferenceLen = 1024

// Repository says what is wrong with s as a mirror source or mirror (a repository
// or a registry host[:port], without tag or digest), or "" when nothing is. Blueprints and
// site configs both name mirrors.
func Repository(s string) (msg, hint string) {
	switch {
	case len(s) > MaxReferenceLen:
		return fmt.Sprintf("repository is %d bytes long, more than %d", len(s), MaxReferenceLen), ""
	case s == "":
		return "required", "a repository such as quay.io/openshift-release-dev/ocp-release"
	}
	if ref, err := reference.ParseNamed(s); err == nil {
		if !reference.IsNameOnly(ref) {
			return fmt.Sprintf("%q carries a tag or digest", suggest.Clip(s)), "mirrors map repositories: drop the :tag or @digest"
		}
		return "", ""
	}
	// A bare registry (host[:port]) is a valid mirror scope too.
	if !strings.Contains(s, "/") && (strings.ContainsAny(s, ".:") || s == "localhost") {
		if _, err := reference.ParseNamed(s + "/x"); err == nil {
			return "", ""
		}
	}
	return fmt.Sprintf("%q is not a repository or registry", suggest.Clip(s)), "e.g. quay.io/openshift-release-dev/ocp-release or registry.example:5000"
}

// PullSecret returns what is wrong with a pull secret ("" when nothing), without
// quoting it: json's syntax errors can echo a character of the input, so only the offset is reported.
func PullSecret(data []byte) string {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Sprintf("the pull secret is not valid JSON (syntax error at byte offset %d)", se.Offset)
		}
		return "the pull secret is not a JSON object"
	}
	// Valid JSON now, so strictjson's message quotes at most a key (a registry's name):
	// a key named twice (two credentials for one registry) or a second document.
	var se *strictjson.Error
	if err := strictjson.Check(data); errors.As(err, &se) {
		return "the pull secret: " + se.Error()
	}
	raw, ok := doc["auths"]
	if !ok {
		return "the pull secret has no \"auths\" object"
	}
	var auths map[string]json.RawMessage
	if err := json.Unmarshal(raw, &auths); err != nil || auths == nil {
		return "the pull secret's \"auths\" is not an object"
	}
	if len(auths) == 0 {
		return "the pull secret's \"auths\" is empty"
	}
	return ""
}

// SSHKey accepts one or more authorized_keys lines; errors never quote the key.
func SSHKey(data []byte) error {
	rest := data
	n := 0
	for len(strings.TrimSpace(string(rest))) > 0 {
		_, _, _, r, err := ssh.ParseAuthorizedKey(rest)
		if err != nil {
			return errors.New("not an SSH public key in authorized_keys format")
		}
		n++
		rest = r
	}
	if n == 0 {
		return errors.New("no SSH public key found")
	}
	return nil
}
