package reconfigure

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/siteconfig"
)

// What recert scans and rewrites on an SNO node (the directories and files recert's own
// seed script passes it).
func recertCryptoDirs() []string {
	return []string{"/etc/kubernetes", "/var/lib/kubelet", "/etc/machine-config-daemon"}
}

func recertCryptoFiles() []string { return []string{"/etc/mcs-machine-config-content.json"} }

func recertCustomizationDirs() []string {
	return []string{"/etc/kubernetes", "/var/lib/kubelet", "/etc/machine-config-daemon", "/etc/pki/ca-trust"}
}

func recertCustomizationFiles() []string {
	return []string{"/etc/mcs-machine-config-content.json", "/etc/mco/proxy.env", ChronyConf}
}

// Container names of a recert run; --replace makes a rerun after a power cut take them over.
const (
	recertEtcdName = "snofactory-recert-etcd"
	recertName     = "snofactory-recert"
	// RecertSummaryFile is recert's summary without secrets, under the root.
	RecertSummaryFile = DefaultStateDir + "/recert-summary.yaml"
	etcdWait          = 2 * time.Minute
)

// recert renames the cluster and renews its certificates while kubelet is stopped:
// recert edits the node's etcd database through a standalone etcd, as recert is meant to
// run, both from their pinned images.
func (r *run) recert(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	recertImage, etcdImage, err := r.images()
	if err != nil {
		return nil, err
	}
	seed, pinned, err := SeedIdentity(r.o.Root)
	if err != nil {
		return nil, err
	}
	site := Identity{ClusterName: cmp.Or(sc.Spec.ClusterName, seed.ClusterName),
		BaseDomain: cmp.Or(sc.Spec.BaseDomain, seed.BaseDomain), Hostname: sc.Spec.Hostname}
	if !pinned {
		site.IPs = siteIPs(sc)
	}
	p := RecertParams{EtcdEndpoint: "localhost:2379", Seed: seed, Site: site, SummaryFile: RecertSummaryFile,
		CryptoDirs: r.existing(recertCryptoDirs()), CryptoFiles: r.existing(recertCryptoFiles()),
		CustomizationDirs: r.existing(recertCustomizationDirs()), CustomizationFiles: r.existing(recertCustomizationFiles())}
	if sc.Spec.NTP != nil && len(sc.Spec.NTP.Servers) > 0 {
		p.ChronyConfig = chronyConf(sc.Spec.NTP.Servers)
	}
	if err := os.MkdirAll(under(r.o.Root, path.Dir(RecertSummaryFile)), 0o755); err != nil {
		return nil, fmt.Errorf("recert summary: %w", err)
	}
	if err := r.startEtcd(ctx, etcdImage); err != nil {
		return nil, err
	}
	defer r.stopEtcd(ctx)
	run := []string{"run", "--rm", "--replace", "--name", recertName, "--network=host", "--privileged"}
	for _, m := range mounts(p) {
		run = append(run, "-v", under(r.o.Root, m)+":"+m)
	}
	run = append(run, recertImage)
	if _, err := r.cmd(ctx, "podman", append(run, RecertArgs(p)...)...); err != nil {
		return nil, fmt.Errorf("recert: %w", err)
	}
	d := map[string]string{"cluster": site.ClusterName + "." + site.BaseDomain, "hostname": site.Hostname,
		"extendExpiration": "true", "summary": RecertSummaryFile, "image": recertImage}
	d["ip"] = strings.Join(site.IPs, ",")
	if pinned {
		d["ip"] = "unchanged: the node IP is the relocation address"
	}
	return d, nil
}

// existing keeps the paths present under the root: recert refuses a missing one.
func (r *run) existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(under(r.o.Root, p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// mounts are the node paths recert reads and writes, each mounted at the same path.
func mounts(p RecertParams) []string {
	seen := map[string]bool{}
	var out []string
	all := append(append(append(append([]string{}, p.CryptoDirs...), p.CryptoFiles...), p.CustomizationDirs...), p.CustomizationFiles...)
	for _, m := range append(all, path.Dir(p.SummaryFile)) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// startEtcd runs the node's etcd database in a standalone etcd on localhost:2379 (the
// etcd static pod does not run while kubelet is stopped) and waits until it is healthy.
func (r *run) startEtcd(ctx context.Context, image string) error {
	if _, err := r.cmd(ctx, "podman", "run", "--detach", "--rm", "--replace", "--name", recertEtcdName,
		"--network=host", "--privileged", "--entrypoint", "etcd",
		"-v", under(r.o.Root, "/var/lib/etcd")+":/store", image, "--name", "editor", "--data-dir", "/store"); err != nil {
		return fmt.Errorf("starting etcd for recert: %w", err)
	}
	start := r.o.Clock.Now()
	for {
		_, err := r.o.Run(ctx, "podman", "exec", recertEtcdName, "etcdctl", "endpoint", "health")
		if err == nil {
			return nil
		}
		if r.o.Clock.Now().Sub(start) >= etcdWait {
			r.stopEtcd(ctx)
			return fmt.Errorf("etcd for recert not healthy within %s: %w", etcdWait, err)
		}
		if err := r.o.Clock.Sleep(ctx, r.o.PollInterval); err != nil {
			r.stopEtcd(ctx)
			return fmt.Errorf("waiting for etcd: %w", err)
		}
	}
}

// stopEtcd stops the standalone etcd (--rm removes it), even when ctx was cancelled.
func (r *run) stopEtcd(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := r.cmd(sctx, "podman", "stop", recertEtcdName); err != nil {
		r.say("stopping the etcd recert used: %v", err)
	}
}
