package reconfigure

import (
	"context"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/node/recert"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// recert renames the cluster, rewrites its pull secret and kubeadmin hash and re-signs its
// certificates while kubelet is stopped, through a standalone etcd on the node's database,
// both from their pinned images (lifecycle-agent ops.go RecertFullFlow).
func (r *run) recert(ctx context.Context, sc *siteconfig.SiteConfig, id siteIdentity, c recert.Config) (map[string]string, error) {
	recertImage, etcdImage, err := r.images()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(under(r.o.Root, RecertSummaryFile)); err == nil {
		return nil, fmt.Errorf("recert ran before and did not finish (%s exists): the cluster may be half changed; "+
			"restore the seed (write it again) and boot with the site medium", RecertSummaryFile)
	}
	files, _, _ := retainedKeys(sc.Spec.KubeconfigCrypto, id.ingressCN)
	for p, pemText := range files {
		if err := writeFile(under(r.o.Root, p), []byte(pemText), 0o600); err != nil {
			return nil, fmt.Errorf("writing the retained crypto: %w", err)
		}
	}
	if err := os.MkdirAll(under(r.o.Root, path.Dir(RecertSummaryFile)), 0o755); err != nil {
		return nil, fmt.Errorf("recert summary: %w", err)
	}
	// recert reads its settings from a file, as lifecycle-agent runs it: the pull secret
	// stays off the command line, and the file allows --regenerate-server-ssh-keys beside
	// --extend-expiration, which recert's command line refuses.
	cfg, err := recert.ConfigJSON(c)
	if err != nil {
		return nil, err
	}
	if err := writeFile(under(r.o.Root, RecertConfigFile), cfg, 0o600); err != nil {
		return nil, fmt.Errorf("writing recert's configuration: %w", err)
	}
	defer os.Remove(under(r.o.Root, RecertConfigFile))
	if err := r.startEtcd(ctx, etcdImage); err != nil {
		return nil, err
	}
	defer r.stopEtcd(ctx)
	argv := recert.RunConfigArgv(recertImage, r.o.Root, RecertConfigFile, c)
	if _, err := r.cmd(ctx, argv[0], argv[1:]...); err != nil {
		return nil, fmt.Errorf("recert: %w", err)
	}
	d := map[string]string{"cluster": id.site.ClusterName + "." + id.site.BaseDomain, "hostname": id.site.Hostname,
		"infraID": id.infraID, "extendExpiration": "true", "summary": RecertSummaryFile, "image": recertImage,
		"kubeadmin": "password hash replaced", "retainedCrypto": strconv.FormatBool(len(files) > 0)}
	if sc.Spec.KubeadminPasswordHash == "" {
		d["kubeadmin"] = "secret deleted: the site config gives no password hash"
	}
	d["ip"] = strings.Join(id.site.IPs, ",")
	if id.pinned {
		d["ip"] = "unchanged: the node IP is the relocation address"
	}
	return d, nil
}

// existing keeps the paths present under the root: recert refuses a missing one. A dry
// run shows them all.
func (r *run) existing(paths []string) []string {
	if r.dry {
		return paths
	}
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(under(r.o.Root, p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// startEtcd runs the node's etcd database in a standalone etcd on localhost:2379 (the
// etcd static pod does not run while kubelet is stopped) and waits until it is healthy.
func (r *run) startEtcd(ctx context.Context, image string) error {
	argv := recert.EtcdArgv(image, under(r.o.Root, "/var/lib/etcd"))
	if _, err := r.cmd(ctx, argv[0], argv[1:]...); err != nil {
		return fmt.Errorf("starting etcd for recert: %w", err)
	}
	if err := recert.WaitEtcd(ctx, r.o.Run, r.o.Clock); err != nil {
		r.stopEtcd(ctx)
		return err
	}
	return nil
}

// stopEtcd stops the standalone etcd (--rm removes it), even when ctx was cancelled.
func (r *run) stopEtcd(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	stop := recert.EtcdStopArgv()
	if _, err := r.cmd(sctx, stop[0], stop[1:]...); err != nil {
		r.say("stopping the etcd recert used: %v", err)
	}
}
