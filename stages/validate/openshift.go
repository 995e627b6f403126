package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// The OpenShift resources the checks read; the dynamic client and unstructured objects
// keep openshift/api out of the build.
var (
	gvrClusterVersion    = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	gvrClusterOperator   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}
	gvrInfrastructure    = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	gvrMachineConfigPool = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigpools"}
	gvrMachineConfig     = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}
	gvrIngressController = schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "ingresscontrollers"}
	gvrNode              = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	gvrCSR               = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}
	gvrConfigMap         = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// MaxKubeconfigFile bounds a kubeconfig: one with embedded certificates for a few clusters
// is tens of KiB.
const MaxKubeconfigFile = 4 << 20

// ReadKubeconfig reads a kubeconfig through the one reader of small files, so a FIFO, a
// device or a huge file is refused with the file and the cap named.
func ReadKubeconfig(path string) ([]byte, error) {
	return smallfile.Read(path, MaxKubeconfigFile)
}

// loadKubeconfig is what clientcmd.BuildConfigFromFlags does with an explicit path
// (client-go tools/clientcmd/loader.go, LoadFromFile and ClientConfigLoadingRules.Load:
// parse, mark each cluster and user with the file it came from, resolve their relative
// paths against it), except that the file is read through ReadKubeconfig rather than
// os.ReadFile.
func loadKubeconfig(path string) (*rest.Config, error) {
	b, err := ReadKubeconfig(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.LocationOfOrigin = path
	}
	for _, a := range cfg.AuthInfos {
		a.LocationOfOrigin = path
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return nil, err
	}
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// requestTimeout bounds one API request.
const requestTimeout = 30 * time.Second

// RESTConfig builds the client configuration from the kubeconfig, pointed at server when
// set. The certificate is still verified against the kubeconfig's host name, since a
// forwarded port on the host does not change whom the API server's certificate names.
func RESTConfig(kubeconfig, server string) (*rest.Config, error) {
	cfg, err := loadKubeconfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if server != "" {
		orig, err := url.Parse(cfg.Host)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: server %q: %w", kubeconfig, cfg.Host, err)
		}
		if cfg.TLSClientConfig.ServerName == "" {
			cfg.TLSClientConfig.ServerName = orig.Hostname()
		}
		cfg.Host = server
	}
	cfg.Timeout = requestTimeout
	// The stall timeout, the cap on each answer and the retry policy of every request the
	// project makes (netlimit): an API server that sends an endless or dripping body fails
	// the check naming the server and the limit, instead of filling memory.
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return netlimit.Transport(rt, netlimit.KubeAPI()) }
	// The checks make a score of requests in a burst; client-go's default limit (5/s)
	// would only slow them down.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// pollConfig is RESTConfig for a caller that polls: a 503 from a starting API server is the
// answer it waits through and reports, not a failure to ask again at once.
func pollConfig(kubeconfig, server string) (*rest.Config, error) {
	cfg, err := RESTConfig(kubeconfig, server)
	if err != nil {
		return nil, err
	}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		p := netlimit.KubeAPI()
		p.Policy.Attempts = 1
		return netlimit.Transport(rt, p)
	}
	return cfg, nil
}

// cluster runs the OpenShift checks against one API server.
type cluster struct {
	in   *OpenShift
	opts Options
	cfg  *rest.Config
	dyn  dynamic.Interface
	// facts carry the kubelet's certificates when the host part ran.
	facts *factsCerts
	// down is the error of the request that had no answer on any try of the retry policy
	// (the server refused, reset or dropped every connection), or whose answer ran past
	// its cap: the checks after it report it at once instead of spending the policy's
	// backoff, about four seconds a check, or another capped read of up to 64 MiB on the
	// same server again. The checks run one after another.
	down error
}

// openshiftChecks returns the runner of the OpenShift checks by id.
func openshiftChecks(ctx context.Context, in Inputs) func(id string) outcome {
	if in.OpenShift == nil {
		return func(string) outcome { return skip("the target is not OpenShift") }
	}
	c := &cluster{in: in.OpenShift, opts: in.Options, facts: newFactsCerts(in.Facts)}
	cfg, err := RESTConfig(in.OpenShift.Kubeconfig, in.OpenShift.Server)
	if err == nil {
		c.cfg = cfg
		c.dyn, err = dynamic.NewForConfig(cfg)
	}
	if err != nil {
		err = fmt.Errorf("cluster API client: %w", err)
		return func(string) outcome { return errored(err) }
	}
	checks := map[string]func(context.Context) outcome{
		CheckClusterVersion:    c.clusterVersion,
		CheckClusterOperators:  c.clusterOperators,
		CheckNodeReady:         c.nodeReady,
		CheckEtcdEndpoints:     c.etcdEndpoints,
		CheckCSRNonePending:    c.csrNonePending,
		CheckTopology:          c.topology,
		CheckPoolUpdated:       c.poolUpdated,
		CheckRelocationConfigs: c.relocationConfigs,
		CheckIngressPinned:     c.ingressPinned,
		CheckKubeletClientCert: c.kubeletClientCert,
		CheckKubeletServeCert:  c.kubeletServingCert,
		CheckAPIServingCert:    c.apiServingCert,
	}
	return func(id string) outcome {
		run, ok := checks[id]
		if !ok {
			return errored(fmt.Errorf("no implementation of check %s", id))
		}
		return run(ctx)
	}
}

// ask runs one API request unless the server is already known down, and notes it down
// when the request had no answer on any try (netlimit's transport gave up; an answer, even
// a 429 or a 503, is a status error instead) or its answer was larger than any API answer
// may be: an SNO's largest list is a few MiB, so such a server is not asked again.
func (c *cluster) ask(request func() error) error {
	if c.down != nil {
		return c.down
	}
	err := request()
	_, spent := errors.AsType[*netlimit.ExhaustedError](err)
	_, endless := errors.AsType[*netlimit.TooLargeError](err)
	if spent || endless {
		c.down = err
	}
	return err
}

func (c *cluster) get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	var obj *unstructured.Unstructured
	err := c.ask(func() (err error) {
		obj, err = c.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", gvr.Resource, name, err)
	}
	return obj, nil
}

func (c *cluster) list(ctx context.Context, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	var l *unstructured.UnstructuredList
	err := c.ask(func() (err error) {
		l, err = c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	return l.Items, nil
}

// condition is one entry of an object's status.conditions.
type condition struct{ status, reason, message string }

func conditions(obj map[string]any) map[string]condition {
	out := map[string]condition{}
	list, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		out[t] = condition{s, r, msg}
	}
	return out
}

// want is a condition a healthy object has.
type want struct{ typ, status string }

// conditionProblems says which of the wanted conditions obj lacks, naming it as what.
func conditionProblems(what string, obj map[string]any, wants ...want) []string {
	conds := conditions(obj)
	var out []string
	for _, w := range wants {
		c, ok := conds[w.typ]
		switch {
		case !ok && w.status == "False":
			// an absent negative condition (Degraded, Failing) is as good as False
		case !ok:
			out = append(out, fmt.Sprintf("%s has no %s condition", what, w.typ))
		case c.status != w.status:
			p := fmt.Sprintf("%s %s=%s", what, w.typ, c.status)
			if c.reason != "" || c.message != "" {
				p += fmt.Sprintf(" (%s: %s)", c.reason, clip(c.message, 160))
			}
			out = append(out, p)
		}
	}
	return out
}

func (c *cluster) clusterVersion(ctx context.Context) outcome {
	cv, err := c.get(ctx, gvrClusterVersion, "", "version")
	if err != nil {
		return errored(err)
	}
	problems := conditionProblems("ClusterVersion", cv.Object,
		want{"Available", "True"}, want{"Progressing", "False"}, want{"Failing", "False"})
	desired, _, _ := unstructured.NestedString(cv.Object, "status", "desired", "version")
	ev := []string{"desired version " + desired}
	if c.in.Version != "" && desired != c.in.Version {
		problems = append(problems, fmt.Sprintf("ClusterVersion is at %s, want the locked %s", desired, c.in.Version))
	}
	history, _, _ := unstructured.NestedSlice(cv.Object, "status", "history")
	if len(history) > 0 {
		h, _ := history[0].(map[string]any)
		state, _ := h["state"].(string)
		v, _ := h["version"].(string)
		ev = append(ev, fmt.Sprintf("history: %s %s", v, state))
		if state != "Completed" {
			problems = append(problems, fmt.Sprintf("the install of %s is %s, not Completed", v, state))
		}
	}
	return failures(problems, "ClusterVersion "+desired+" available", ev...)
}

func (c *cluster) clusterOperators(ctx context.Context) outcome {
	ops, err := c.list(ctx, gvrClusterOperator)
	if err != nil {
		return errored(err)
	}
	if len(ops) == 0 {
		return fail("no ClusterOperators")
	}
	var problems []string
	now := c.opts.Clock.Now()
	for _, op := range ops {
		p := conditionProblems("clusteroperator/"+op.GetName(), op.Object,
			want{"Available", "True"}, want{"Degraded", "False"}, want{"Progressing", "False"})
		if len(p) == 0 {
			if u := unsettled(&op, now, c.opts.SettleWindow); u != "" {
				p = append(p, u)
			}
		}
		problems = append(problems, p...)
	}
	return failures(problems, fmt.Sprintf("%d ClusterOperators Available, none Degraded, none progressing for %s", len(ops), c.opts.SettleWindow))
}

// node is the cluster's single node.
func (c *cluster) node(ctx context.Context) (*corev1.Node, error) {
	items, err := c.list(ctx, gvrNode)
	if err != nil {
		return nil, err
	}
	if len(items) != 1 {
		names := make([]string, 0, len(items))
		for _, it := range items {
			names = append(names, it.GetName())
		}
		return nil, fmt.Errorf("a single-node cluster has %d nodes: %s", len(items), strings.Join(names, ", "))
	}
	var n corev1.Node
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[0].Object, &n); err != nil {
		return nil, fmt.Errorf("node %s: %w", items[0].GetName(), err)
	}
	return &n, nil
}

func (c *cluster) nodeReady(ctx context.Context) outcome {
	n, err := c.node(ctx)
	if err != nil {
		return errored(err)
	}
	ev := []string{"node " + n.Name, "kubelet " + n.Status.NodeInfo.KubeletVersion}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status != corev1.ConditionTrue {
				return fail(fmt.Sprintf("node %s Ready=%s (%s: %s)", n.Name, cond.Status, cond.Reason, clip(cond.Message, 160)), ev...)
			}
			return pass("node "+n.Name+" Ready", ev...)
		}
	}
	return fail("node "+n.Name+" has no Ready condition", ev...)
}

// etcdEndpoints holds the etcd member's address to the Node's. cluster-etcd-operator's
// EtcdEndpointsController writes ConfigMap openshift-etcd/etcd-endpoints with one entry per
// voting member, its ID in hex to the address of its first peer URL (or, while the member
// list cannot be read, node name to InternalIP); pkg/operator/etcdendpointscontroller
// syncConfigMap. A single node's member keeps the address its bootstrap etcd chose, which no
// operator moves, so a member elsewhere than the Node's InternalIP is a seed built wrong.
func (c *cluster) etcdEndpoints(ctx context.Context) outcome {
	n, err := c.node(ctx)
	if err != nil {
		return errored(err)
	}
	cm, err := c.get(ctx, gvrConfigMap, "openshift-etcd", "etcd-endpoints")
	if err != nil {
		return errored(err)
	}
	members, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	var nodeIPs []string
	own := map[netip.Addr]bool{}
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil {
			nodeIPs = append(nodeIPs, a.Address)
			own[ip.Unmap()] = true
		}
	}
	ev := []string{"node " + n.Name + " InternalIP " + strings.Join(nodeIPs, ", ")}
	if len(nodeIPs) == 0 {
		return fail(fmt.Sprintf("node %s reports no InternalIP address to hold the etcd member's to", n.Name), ev...)
	}
	if len(members) == 0 {
		return fail("ConfigMap openshift-etcd/etcd-endpoints lists no etcd member", ev...)
	}
	var problems []string
	for _, id := range sortedKeys(members) {
		addr := members[id]
		ev = append(ev, "etcd member "+id+" at "+addr)
		ip, err := netip.ParseAddr(strings.Trim(addr, "[]"))
		if err == nil && own[ip.Unmap()] {
			continue
		}
		problems = append(problems, fmt.Sprintf("etcd member %s is at %s (openshift-etcd/etcd-endpoints), but node %s's InternalIP is %s: "+
			"the bootstrap etcd chose another address than the node's, and nothing moves a single node's member; "+
			"rebuild with the relocation address on the live system before bootkube (its first machine network must contain it)",
			id, addr, n.Name, strings.Join(nodeIPs, ", ")))
	}
	return failures(problems, fmt.Sprintf("etcd member at the node's InternalIP %s", strings.Join(nodeIPs, ", ")), ev...)
}

func (c *cluster) topology(ctx context.Context) outcome {
	infra, err := c.get(ctx, gvrInfrastructure, "", "cluster")
	if err != nil {
		return errored(err)
	}
	var problems, ev []string
	for _, field := range []string{"controlPlaneTopology", "infrastructureTopology"} {
		v, _, _ := unstructured.NestedString(infra.Object, "status", field)
		ev = append(ev, field+" "+v)
		if v != "SingleReplica" {
			problems = append(problems, fmt.Sprintf("Infrastructure %s is %q, want SingleReplica", field, v))
		}
	}
	return failures(problems, "control plane and infrastructure SingleReplica", ev...)
}

// masterPool is the master MachineConfigPool.
func (c *cluster) masterPool(ctx context.Context) (*unstructured.Unstructured, error) {
	return c.get(ctx, gvrMachineConfigPool, "", "master")
}

func (c *cluster) poolUpdated(ctx context.Context) outcome {
	pool, err := c.masterPool(ctx)
	if err != nil {
		return errored(err)
	}
	problems := conditionProblems("machineconfigpool/master", pool.Object,
		want{"Updated", "True"}, want{"Updating", "False"}, want{"Degraded", "False"})
	machines, _, _ := unstructured.NestedInt64(pool.Object, "status", "machineCount")
	updated, _, _ := unstructured.NestedInt64(pool.Object, "status", "updatedMachineCount")
	ready, _, _ := unstructured.NestedInt64(pool.Object, "status", "readyMachineCount")
	if machines == 0 || updated != machines || ready != machines {
		problems = append(problems, fmt.Sprintf("machineconfigpool/master has %d machines, %d updated, %d ready", machines, updated, ready))
	}
	spec, _, _ := unstructured.NestedString(pool.Object, "spec", "configuration", "name")
	current, _, _ := unstructured.NestedString(pool.Object, "status", "configuration", "name")
	if spec != current {
		problems = append(problems, fmt.Sprintf("machineconfigpool/master is at %s, want %s", current, spec))
	}
	return failures(problems, "master pool updated to "+current, "current config "+current)
}

func (c *cluster) relocationConfigs(ctx context.Context) outcome {
	if len(c.in.RelocationMachineConfigs) == 0 {
		return skip("render made no relocation MachineConfigs")
	}
	mcs, err := c.list(ctx, gvrMachineConfig)
	if err != nil {
		return errored(err)
	}
	pool, err := c.masterPool(ctx)
	if err != nil {
		return errored(err)
	}
	current, _, _ := unstructured.NestedString(pool.Object, "status", "configuration", "name")
	sources, _, _ := unstructured.NestedSlice(pool.Object, "status", "configuration", "source")
	inPool := map[string]bool{}
	for _, s := range sources {
		if m, ok := s.(map[string]any); ok {
			n, _ := m["name"].(string)
			inPool[n] = true
		}
	}
	exist := map[string]bool{}
	for _, mc := range mcs {
		exist[mc.GetName()] = true
	}
	var problems []string
	for _, name := range c.in.RelocationMachineConfigs {
		switch {
		case !exist[name]:
			problems = append(problems, fmt.Sprintf("MachineConfig %s missing", name))
		case !inPool[name]:
			problems = append(problems, fmt.Sprintf("MachineConfig %s is not rendered into the master pool's %s", name, current))
		}
	}
	return failures(problems, fmt.Sprintf("%d relocation MachineConfigs rendered into %s", len(c.in.RelocationMachineConfigs), current))
}

func (c *cluster) ingressPinned(ctx context.Context) outcome {
	if !c.in.DayTwoWorkers {
		return skip("the seed takes no day-2 workers")
	}
	ic, err := c.get(ctx, gvrIngressController, "openshift-ingress-operator", "default")
	if err != nil {
		return errored(err)
	}
	labels, _, _ := unstructured.NestedStringMap(ic.Object, "spec", "nodePlacement", "nodeSelector", "matchLabels")
	ev := []string{fmt.Sprintf("nodeSelector %v", labels)}
	const master = "node-role.kubernetes.io/master"
	if v, ok := labels[master]; !ok || v != "" {
		return fail("the default IngressController is not pinned to the master pool (nodePlacement.nodeSelector lacks "+master+")", ev...)
	}
	if replicas, found, _ := unstructured.NestedInt64(ic.Object, "spec", "replicas"); found {
		ev = append(ev, fmt.Sprintf("replicas %d", replicas))
	}
	return pass("the default IngressController is pinned to the master pool", ev...)
}

// errNoEvidence is a certificate check with nothing to look at.
var errNoEvidence = errors.New("no certificate to check")

// sortedKeys is the keys of m in order, for stable evidence.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WaitForAPI polls the API server's /readyz until it answers ok. A booted node reports
// boot-complete before its static pods serve, and the checks need the API.
func WaitForAPI(ctx context.Context, o *OpenShift, poll time.Duration) error {
	cfg, err := pollConfig(o.Kubeconfig, o.Server)
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("cluster API client: %w", err)
	}
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else if ctx.Err() == nil {
			// A request cut off by the end of the wait says nothing of the server: keep its
			// last real answer.
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the OpenShift API at %s did not become ready (last answer: %s): %w", cfg.Host, last, ctx.Err())
		case <-time.After(poll):
		}
	}
}
