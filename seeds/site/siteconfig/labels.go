package siteconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// maxLabels bounds spec.nodeLabels, far above any real node.
const maxLabels = 100

// labelName is a label name and value's form, at most 63 characters (Kubernetes
// apimachinery pkg/util/validation/validation.go qualifiedNameFmt, IsValidLabelValue).
var labelName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// nodeLabels checks each label as the API server does (apimachinery
// pkg/apis/meta/v1/validation ValidateLabels: IsQualifiedName for the key,
// IsValidLabelValue for the value), so none is refused by the node patch after the cluster
// has come up.
func (c *checker) nodeLabels(labels map[string]string) {
	if len(labels) > maxLabels {
		c.Add("spec.nodeLabels", fmt.Sprintf("%d labels, more than the limit of %d", len(labels), maxLabels), "")
		return
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := "spec.nodeLabels." + k
		if msg := labelKeyProblem(k); msg != "" {
			c.Add(p, fmt.Sprintf("label key %q %s", suggest.Clip(k), msg), "an optional DNS subdomain prefix and '/', then a name such as site.example.com/zone")
			continue
		}
		if v := labels[k]; v != "" && (len(v) > 63 || !labelName.MatchString(v)) {
			c.Add(p, fmt.Sprintf("label value %q is not valid", suggest.Clip(v)), "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit; or empty")
		}
	}
}

// labelKeyProblem says what is wrong with a label key ("" when nothing).
func labelKeyProblem(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > 253 || !isHostname(prefix)):
		return "has a prefix that is not a lowercase DNS subdomain"
	case strings.Contains(name, "/"):
		return "has more than one '/'"
	case name == "" || len(name) > 63 || !labelName.MatchString(name):
		return "has no valid name: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}
