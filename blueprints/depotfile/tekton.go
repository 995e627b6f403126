package depotfile

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/snofactory/snofactory/pipeline/tektondepot"
)

// problems are names the API server would refuse, found before any PipelineRun is made.
func (t *Tekton) problems() []problem {
	if t == nil {
		return nil
	}
	var out []problem
	for _, f := range []struct {
		path, value string
		check       func(string) []string
		what        string
	}{
		{"spec.tekton.namespace", t.Namespace, validation.IsDNS1123Label, "a namespace is a DNS label: lower-case letters, digits and '-', at most 63"},
		{"spec.tekton.claim", t.Claim, validation.IsDNS1123Subdomain, "a PersistentVolumeClaim's name: lower-case letters, digits, '-' and '.'"},
		{"spec.tekton.pushSecret", t.PushSecret, validation.IsDNS1123Subdomain, "a Secret's name: lower-case letters, digits, '-' and '.'"},
		{"spec.tekton.signingSecret", t.SigningSecret, validation.IsDNS1123Subdomain, "a Secret's name: lower-case letters, digits, '-' and '.'"},
	} {
		if f.value == "" {
			continue
		}
		if errs := f.check(f.value); len(errs) > 0 {
			out = append(out, problem{f.path, fmt.Sprintf("%q is not a valid name: %s", f.value, strings.Join(errs, "; ")), f.what})
		}
	}
	if strings.ContainsFunc(t.Image, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		out = append(out, problem{"spec.tekton.image", fmt.Sprintf("%q holds spaces or control characters", t.Image), "an image reference, e.g. quay.io/org/snofactory@sha256:..."})
	}
	return out
}

// Under fills what the command line left empty in o from the depot file's tekton section:
// each flag overrides its setting.
func (t *Tekton) Under(o *tektondepot.Options) {
	if t == nil {
		return
	}
	for _, f := range []struct {
		flag *string
		file string
	}{
		{&o.Kubeconfig, t.Kubeconfig}, {&o.Namespace, t.Namespace}, {&o.Claim, t.Claim}, {&o.SourceDir, t.SourceDir},
		{&o.Image, t.Image}, {&o.PushSecret, t.PushSecret}, {&o.SigningSecret, t.SigningSecret},
	} {
		if *f.flag == "" {
			*f.flag = f.file
		}
	}
}
