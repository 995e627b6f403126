package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// Readiness after recert: recert sets ClusterVersion Available=False, so the cluster is
// reconfigured only once the CVO has said Available again, every ClusterOperator has
// settled and the Node is Ready (openshift-install wait-for install-complete; the
// image-based install operator's monitor). Each wait is a step of its own, bounded.
const (
	// DefaultReadyTimeout bounds each wait (the image-based install operator gives a site
	// an hour).
	DefaultReadyTimeout = time.Hour
	// DefaultSettleWindow is how long an operator's Progressing=False must have held
	// (openshift-install's coStabilityThreshold).
	DefaultSettleWindow = 30 * time.Second
	// DefaultReadyPoll is how often the waits look.
	DefaultReadyPoll = 10 * time.Second
)

type condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

type object struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Conditions []condition `json:"conditions"`
	} `json:"status"`
}

func (o object) cond(t string) (condition, bool) {
	i := slices.IndexFunc(o.Status.Conditions, func(c condition) bool { return c.Type == t })
	if i < 0 {
		return condition{}, false
	}
	return o.Status.Conditions[i], true
}

// judge says whether what oc printed is ready, and if not, why.
type judge func(out []byte, now time.Time) (bool, string, error)

// waitReady polls argv until judge is satisfied or the timeout passes; the error names the
// last reason.
func (r *run) waitReady(ctx context.Context, what string, argv []string, clk Clock, ok judge) (map[string]string, error) {
	took, why, err := clock.Wait(ctx, clk, r.o.OpenShift.ReadyPoll, r.o.OpenShift.ReadyTimeout, func(ctx context.Context) (bool, string, error) {
		out, err := r.o.Run(ctx, argv[0], argv[1:]...)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", strings.Join(argv[:min(len(argv), 6)], " "), err), nil
		}
		done, reason, err := ok(out, clk.Now())
		if err != nil {
			return false, "", fmt.Errorf("reading the %s: %w", what, err)
		}
		return done, reason, nil
	})
	switch {
	case errors.Is(err, clock.ErrWaitTimeout):
		return nil, fmt.Errorf("the %s did not settle within %s: %s", what, shortDuration(r.o.OpenShift.ReadyTimeout), why)
	case err != nil && why != "":
		return nil, fmt.Errorf("waiting for the %s: %w (last: %s)", what, err, why)
	case err != nil:
		return nil, err
	}
	return map[string]string{"ready": what, "after": shortDuration(took)}, nil
}

// clusterVersionReady: Available=True, Failing not True, Progressing=False.
func clusterVersionReady(out []byte, _ time.Time) (bool, string, error) {
	var cv object
	if err := strictjson.DecodeOpen(out, &cv); err != nil {
		return false, "", err
	}
	for _, w := range []struct {
		t, want string
	}{{"Available", "True"}, {"Failing", "False"}, {"Progressing", "False"}} {
		c, found := cv.cond(w.t)
		if w.t == "Failing" && (!found || c.Status != "True") {
			continue
		}
		if !found || c.Status != w.want {
			return false, fmt.Sprintf("ClusterVersion %s is %s=%s, want %s (%s)", cv.Metadata.Name, w.t, cmpOr(c.Status, "unset"), w.want, c.Message), nil
		}
	}
	return true, "", nil
}

// operatorsSettled: every ClusterOperator Available=True, Degraded not True, and
// Progressing=False since at least the settle window.
func (r *run) operatorsSettled(out []byte, now time.Time) (bool, string, error) {
	var list struct {
		Items []object `json:"items"`
	}
	if err := strictjson.DecodeOpen(out, &list); err != nil {
		return false, "", err
	}
	if len(list.Items) == 0 {
		return false, "no ClusterOperators yet", nil
	}
	var why []string
	for _, co := range list.Items {
		n := co.Metadata.Name
		if c, _ := co.cond("Available"); c.Status != "True" {
			why = append(why, fmt.Sprintf("ClusterOperator %s is not Available (%s)", n, cmpOr(c.Message, c.Status)))
		}
		if c, _ := co.cond("Degraded"); c.Status == "True" {
			why = append(why, fmt.Sprintf("ClusterOperator %s is Degraded: %s", n, c.Message))
		}
		c, found := co.cond("Progressing")
		switch {
		case !found || c.Status != "False":
			why = append(why, fmt.Sprintf("ClusterOperator %s is Progressing", n))
		case now.Sub(c.LastTransitionTime) < r.o.OpenShift.SettleWindow:
			why = append(why, fmt.Sprintf("ClusterOperator %s stopped progressing %s ago, less than the %s settle window", n,
				shortDuration(now.Sub(c.LastTransitionTime)), shortDuration(r.o.OpenShift.SettleWindow)))
		}
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; "), nil
	}
	return true, "", nil
}

// nodesReady: every Node Ready=True.
func nodesReady(out []byte, _ time.Time) (bool, string, error) {
	var list struct {
		Items []object `json:"items"`
	}
	if err := strictjson.DecodeOpen(out, &list); err != nil {
		return false, "", err
	}
	if len(list.Items) == 0 {
		return false, "no Node yet", nil
	}
	for _, n := range list.Items {
		if c, _ := n.cond("Ready"); c.Status != "True" {
			return false, fmt.Sprintf("Node %s is not Ready (%s)", n.Metadata.Name, cmpOr(c.Message, cmpOr(c.Status, "no Ready condition"))), nil
		}
	}
	return true, "", nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dnsmasqOverrides points the node's dnsmasq records for api, api-int and *.apps at the
// renamed cluster (lifecycle-agent postpivot.go setDnsMasqConfiguration).
func (r *run) dnsmasqOverrides(ctx context.Context, id siteIdentity) (map[string]string, error) {
	ip := ""
	switch {
	case len(id.site.IPs) > 0:
		ip = id.site.IPs[0]
	case len(id.seed.IPs) > 0: // the relocation address, unchanged across sites
		ip = id.seed.IPs[0]
	}
	if ip == "" {
		return nil, fmt.Errorf("no node IP for the dnsmasq records of %s.%s", id.site.ClusterName, id.site.BaseDomain)
	}
	body := fmt.Sprintf("SNO_CLUSTER_NAME_OVERRIDE=%s\nSNO_BASE_DOMAIN_OVERRIDE=%s\nSNO_DNSMASQ_IP_OVERRIDE=%s\n", id.site.ClusterName, id.site.BaseDomain, ip)
	// 0600, as lifecycle-agent writes it (postpivot.go setDnsMasqConfiguration); only root's
	// dnsmasq_config.sh and forcedns read it.
	if _, err := r.writeUnder(DnsmasqOverridesFile, []byte(body), 0o600); err != nil {
		return nil, err
	}
	if _, err := r.cmd(ctx, "systemctl", "restart", "dnsmasq.service"); err != nil {
		return nil, err
	}
	return map[string]string{"cluster": id.site.ClusterName + "." + id.site.BaseDomain, "ip": ip, "file": DnsmasqOverridesFile}, nil
}
