package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// Debian's trust store and chrony, as the systemd conformance OS has them: the same user
// space as RHCOS's under Debian's paths.
const (
	// DebianCAAnchorFile is where a local CA goes on Debian for update-ca-certificates
	// (the ca-certificates package: every *.crt under /usr/local/share/ca-certificates joins
	// /etc/ssl/certs/ca-certificates.crt), the counterpart of UserCABundleFile.
	DebianCAAnchorFile = "/usr/local/share/ca-certificates/openshift-config-user-ca-bundle.crt"
	// DebianUpdateCA is Debian's update-ca-trust.
	DebianUpdateCA = "/usr/sbin/update-ca-certificates"
	// RHELUpdateCA is RHEL's and RHCOS's.
	RHELUpdateCA = "/usr/bin/update-ca-trust"
	// ChronySourcesDir is Debian chrony's sourcedir (its /etc/chrony/chrony.conf: "sourcedir
	// /etc/chrony/sources.d"), read at start and on `chronyc reload sources`;
	// ChronySourcesFile is the site's file there.
	ChronySourcesDir  = "/etc/chrony/sources.d"
	ChronySourcesFile = ChronySourcesDir + "/snofactory-site.sources"
	// DebianChronyUnit is Debian's name for RHEL's chronyd.service.
	DebianChronyUnit = "chrony.service"
)

// coreosTrustBundle makes the node trust the site's additionalTrustBundle, in
// lifecycle-agent's post-pivot order (lca-cli/postpivot/postpivot.go PostPivotConfiguration:
// setProxyAndProxyStatus, then establishEarlyCertificateTrust), with the trust store tool
// the node has: RHEL's update-ca-trust on UserCABundleFile (trustBundle), else Debian's
// update-ca-certificates on DebianCAAnchorFile. A node with neither cannot trust the
// bundle, and a site that needs it would fail later at every TLS handshake: refused here.
func (r *run) coreosTrustBundle(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	b := sc.Spec.AdditionalTrustBundle
	if b == "" {
		return map[string]string{"applied": "nothing: the site config has no additionalTrustBundle"}, nil
	}
	rhel, err := r.rootHas(RHELUpdateCA)
	if err != nil || rhel {
		if err != nil {
			return nil, err
		}
		return r.trustBundle(ctx, sc)
	}
	debian, err := r.rootHas(DebianUpdateCA)
	if err != nil {
		return nil, err
	}
	if !debian {
		return nil, fmt.Errorf("the site config gives an additionalTrustBundle, but this node has no trust store to add it to (neither %s nor %s): remove additionalTrustBundle from the site config, or use a seed whose OS has one", RHELUpdateCA, DebianUpdateCA)
	}
	// 0644, not lifecycle-agent's 0600: update-ca-certificates links the file itself into
	// /etc/ssl/certs, where every program reads it; a CA certificate is public.
	if _, err := r.writeUnder(DebianCAAnchorFile, []byte(b), 0o644); err != nil {
		return nil, fmt.Errorf("writing the site's additionalTrustBundle: %w", err)
	}
	if _, err := r.cmd(ctx, "update-ca-certificates"); err != nil {
		return nil, fmt.Errorf("trusting the site's additionalTrustBundle: %w", err)
	}
	return map[string]string{"file": DebianCAAnchorFile, "certificates": strconv.Itoa(strings.Count(b, "-----BEGIN CERTIFICATE-----"))}, nil
}

// coreosNTP records the site's time servers (NTPServersFile) and, where Debian's chrony
// reads a sources directory, gives them to chrony there: one "server NAME iburst" line each,
// as chronyConf does for RHCOS's chrony.conf. try-restart restarts chrony when it runs or is
// starting and leaves it alone otherwise: a chrony that has not started yet reads the file
// when it does (the hook is not ordered against it, as on RHCOS).
func (r *run) coreosNTP(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	d, err := r.writeNTPServers(sc)
	if err != nil || sc.Spec.NTP == nil || len(sc.Spec.NTP.Servers) == 0 {
		return d, err
	}
	chrony, err := r.rootHas(ChronySourcesDir)
	if err != nil || !chrony {
		return d, err
	}
	var b strings.Builder
	b.WriteString(generated)
	for _, s := range sc.Spec.NTP.Servers {
		fmt.Fprintf(&b, "server %s iburst\n", s)
	}
	if _, err := r.writeUnder(ChronySourcesFile, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("writing chrony's site sources: %w", err)
	}
	if _, err := r.cmd(ctx, "systemctl", "try-restart", DebianChronyUnit); err != nil {
		return nil, fmt.Errorf("restarting chrony with the site's time servers: %w", err)
	}
	d["chrony.sources"] = ChronySourcesFile
	return d, nil
}

// rootHas says whether the node path p exists under the root.
func (r *run) rootHas(p string) (bool, error) {
	_, err := os.Stat(under(r.o.Root, p))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("looking for %s on the node: %w", p, err)
}
