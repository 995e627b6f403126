package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// The machine-config daemon's node annotations (machine-config-operator
// pkg/daemon/constants/constants.go) and the pool conditions the node controller sets
// (pkg/controller/node/status.go calculateStatus; openshift/api machineconfiguration/v1
// MachineConfigPoolConditionType).
const (
	mcdStateAnnotation   = "machineconfiguration.openshift.io/state"
	mcdReasonAnnotation  = "machineconfiguration.openshift.io/reason"
	mcdCurrentAnnotation = "machineconfiguration.openshift.io/currentConfig"
	mcdDesiredAnnotation = "machineconfiguration.openshift.io/desiredConfig"
	mcdStateDone         = "Done"
	mcdStateDegraded     = "Degraded"
)

// errPoolDegraded marks a degraded pool or node: the wait stops at once, since the MCD
// degrades on a file that differs from its MachineConfig (pkg/daemon/on_disk_validation.go)
// and waiting does not change the file.
var errPoolDegraded = errors.New("the machine config is degraded")

// mcpObject is a MachineConfigPool or a Node: conditions, and the annotations the MCD
// writes on a Node (the outer metadata wins over object's in encoding/json).
type mcpObject struct {
	object
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// machineConfigSettled: no pool Degraded, every pool Updated=True and Updating=False, and
// the MCD on every node has checked the node against its config (state Done, current config
// the desired one). Node annotations, not only the pool, because the pool's status in etcd
// is the seed's until the controller has seen the renamed node; the MCD writes them after
// its on-disk validation. A degraded pool or node is an error wrapping errPoolDegraded.
func machineConfigSettled(pools, nodes []byte) (bool, string, error) {
	var pl, nl struct {
		Items []mcpObject `json:"items"`
	}
	if err := strictjson.DecodeOpen(pools, &pl); err != nil {
		return false, "", fmt.Errorf("reading the MachineConfigPools: %w", err)
	}
	if err := strictjson.DecodeOpen(nodes, &nl); err != nil {
		return false, "", fmt.Errorf("reading the Nodes: %w", err)
	}
	var why []string
	for _, p := range pl.Items {
		if err := poolDegraded(p); err != nil {
			return false, "", err
		}
		up, _ := p.cond("Updated")
		updating, _ := p.cond("Updating")
		if up.Status != "True" || updating.Status == "True" {
			why = append(why, fmt.Sprintf("MachineConfigPool %s is not updated (Updated=%s, Updating=%s)", p.Metadata.Name, cmpOr(up.Status, "unset"), cmpOr(updating.Status, "unset")))
		}
	}
	for _, n := range nl.Items {
		a := n.Metadata.Annotations
		switch {
		case a[mcdStateAnnotation] == mcdStateDegraded:
			return false, "", fmt.Errorf("%w: Node %s: the machine-config daemon reports %q", errPoolDegraded, n.Metadata.Name, a[mcdReasonAnnotation])
		case a[mcdStateAnnotation] != mcdStateDone || a[mcdCurrentAnnotation] == "" || a[mcdCurrentAnnotation] != a[mcdDesiredAnnotation]:
			why = append(why, fmt.Sprintf("the machine-config daemon has not checked Node %s yet (state %q, current %q, desired %q)", n.Metadata.Name,
				a[mcdStateAnnotation], a[mcdCurrentAnnotation], a[mcdDesiredAnnotation]))
		}
	}
	switch {
	case len(pl.Items) == 0:
		why = append(why, "no MachineConfigPool yet")
	case len(nl.Items) == 0:
		why = append(why, "no Node yet")
	}
	return len(why) == 0, strings.Join(why, "; "), nil
}

// poolDegraded names a Degraded pool with the conditions that say why: the pool's Degraded
// carries no reason of its own, NodeDegraded ("N nodes are reporting degraded status on
// sync") and RenderDegraded carry it, with the MCD's reason in the message.
func poolDegraded(p mcpObject) error {
	c, _ := p.cond("Degraded")
	if c.Status != "True" {
		return nil
	}
	var why []string
	for _, t := range []string{"NodeDegraded", "RenderDegraded", "PinnedImageSetsDegraded", "ImageBuildDegraded"} {
		if d, _ := p.cond(t); d.Status == "True" {
			why = append(why, fmt.Sprintf("%s: %s: %s", t, d.Reason, d.Message))
		}
	}
	if len(why) == 0 {
		why = append(why, cmpOr(c.Message, "no reason given"))
	}
	return fmt.Errorf("%w: MachineConfigPool %s is Degraded: %s", errPoolDegraded, p.Metadata.Name, strings.Join(why, "; "))
}

// waitMachineConfig polls the pools and the nodes until machineConfigSettled, and stops at
// once on a degraded pool or node.
func (r *run) waitMachineConfig(ctx context.Context, pools, nodes []string) (map[string]string, error) {
	took, why, err := clock.Wait(ctx, r.o.Clock, r.o.OpenShift.ReadyPoll, r.o.OpenShift.ReadyTimeout, func(ctx context.Context) (bool, string, error) {
		var outs [2][]byte
		for i, argv := range [][]string{pools, nodes} {
			out, err := r.o.Run(ctx, argv[0], argv[1:]...)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", strings.Join(argv[min(len(argv), 3):min(len(argv), 6)], " "), err), nil
			}
			outs[i] = out
		}
		return machineConfigSettled(outs[0], outs[1])
	})
	switch {
	case errors.Is(err, errPoolDegraded):
		return nil, fmt.Errorf("%w; a file the site changed differs from its MachineConfig, and the pool does not heal by waiting: "+
			"oc get machineconfigpools and the machine-config-daemon's log on the node say which", err)
	case errors.Is(err, clock.ErrWaitTimeout):
		return nil, fmt.Errorf("the machine config did not settle within %s: %s", shortDuration(r.o.OpenShift.ReadyTimeout), why)
	case err != nil:
		return nil, err
	}
	return map[string]string{"ready": "MachineConfigPools", "after": shortDuration(took)}, nil
}
