package siteconfig

import (
	"fmt"
	"io"
)

// WriteText says what Create made for a person: the site on the medium (written to
// medium), who signed it, what it is bound to and where the sealed credentials went.
func (c *Created) WriteText(w io.Writer, medium string) {
	fmt.Fprintf(w, "%s: %s (volume %s)\n", medium, c.Site.Summary(), VolumeLabel)
	if c.SignedBy != "" {
		fmt.Fprintf(w, "%s: signed by key %s\n", medium, c.SignedBy)
	}
	fmt.Fprintf(w, "%s: %s\n", medium, c.Site.Spec.Binding.Summary())
	if c.CredentialsFile != "" {
		fmt.Fprintf(w, "%s: the site's credentials, readable only by its recipients\n", c.CredentialsFile)
	}
}
