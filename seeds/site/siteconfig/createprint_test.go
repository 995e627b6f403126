package siteconfig

import (
	"bytes"
	"strings"
	"testing"
)

func TestCreatedWriteText(t *testing.T) {
	sc, err := Load("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head := "site.iso: " + sc.Summary() + " (volume " + VolumeLabel + ")\n"
	unbound := "site.iso: " + (*Binding)(nil).Summary() + "\n"
	for _, tc := range []struct {
		name string
		c    Created
		want string
	}{
		{"unsigned, no credentials", Created{Site: sc}, head + unbound},
		{"signed, with credentials", Created{Site: sc, SignedBy: "SHA256:k", CredentialsFile: "site.iso.credentials.age"},
			head + "site.iso: signed by key SHA256:k\n" + unbound + "site.iso.credentials.age: the site's credentials, readable only by its recipients\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if sc.Spec.Binding != nil {
				t.Fatal("testdata/site.yaml is bound; this test expects it not to be")
			}
			var b bytes.Buffer
			tc.c.WriteText(&b, "site.iso")
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
			if !strings.HasPrefix(b.String(), "site.iso: ") {
				t.Errorf("every line names the medium first:\n%s", b.String())
			}
		})
	}
}
