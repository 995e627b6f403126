package reconfigure

import "fmt"

// String is the one line a reconfiguration ends with: the site, its digest, the medium
// it came from and the site key that signed it, if one did.
func (r *Result) String() string {
	signed := ""
	if r.SignedBy != "" {
		signed = ", signed by site key " + r.SignedBy
	}
	return fmt.Sprintf("reconfigured %s (%s) from %s%s", r.Site, r.SiteDigest, r.Medium, signed)
}
