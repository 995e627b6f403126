package validate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// Defaults of Options.
const (
	DefaultMinFreeBytes = 1 << 30
	DefaultMaxClockSkew = 2 * time.Minute
	// DefaultShipmentWindow is the blueprint's default spec.relocation.kubeletCertValidity.
	DefaultShipmentWindow = 24 * time.Hour
)

// Inputs is everything Evaluate checks.
type Inputs struct {
	// Facts from the guest's facts report; nil when the host part did not run (the host
	// checks are then skipped with that reason).
	Facts *wire.Facts
	// ReceivedAt is the host clock when the facts message arrived.
	ReceivedAt time.Time
	// Ignition is the config whose effects the installed root must show (render's node
	// config for coreos). nil skips the host.ignition.* checks: an OpenShift
	// bootstrap-in-place config runs on the live system, and the node's own config is the
	// MachineConfigs the OpenShift checks look at.
	Ignition []byte
	// Images are the precached images (the precache stage's record).
	Images []handoff.Image
	// Skip maps the ids the blueprint skips to their reasons ("" for none given).
	Skip    map[string]string
	Options Options
	// OpenShift is nil for a target that is not OpenShift.
	OpenShift *OpenShift
}

// Options tune the checks' thresholds.
type Options struct {
	// MinFreeBytes is the least free space on the root filesystem; 0 means DefaultMinFreeBytes.
	MinFreeBytes uint64
	// MaxClockSkew bounds |guest clock - ReceivedAt|; 0 means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// ShipmentWindow is how long certificates must stay valid from now; 0 means
	// DefaultShipmentWindow.
	ShipmentWindow time.Duration
	// Clock is what certificates are measured from; nil means the wall clock.
	Clock clock.Clock `json:"-"`
	// SettleWindow is how long every ClusterOperator must have stopped progressing; 0
	// means DefaultSettleWindow.
	SettleWindow time.Duration
}

func (o Options) withDefaults() Options {
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.SettleWindow == 0 {
		o.SettleWindow = DefaultSettleWindow
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.ShipmentWindow == 0 {
		o.ShipmentWindow = DefaultShipmentWindow
	}
	o.Clock = clock.Or(o.Clock)
	return o
}

// OpenShift says how to reach the cluster and what it must look like.
type OpenShift struct {
	// Kubeconfig is the installer's admin kubeconfig (render's record).
	Kubeconfig string
	// Server overrides the kubeconfig's server URL (the install stage forwards the API
	// port to the host); the kubeconfig's host name is still the one the certificate is
	// verified against.
	Server string
	// Version is the locked release version ClusterVersion must report ("" skips that part).
	Version string
	// RelocationMachineConfigs are the names of render's relocation MachineConfigs.
	RelocationMachineConfigs []string
	// DayTwoWorkers: the seed takes day-2 workers, so the default IngressController must be
	// pinned to the master pool.
	DayTwoWorkers bool
}

// UnknownSkipError is a skip id that names no check.
type UnknownSkipError struct {
	ID, Suggestion string
}

func (e *UnknownSkipError) Error() string {
	s := fmt.Sprintf("validation skip %q is not a known check", e.ID)
	if e.Suggestion != "" {
		s += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return s
}

// Evaluate runs every check and returns the report. The error is for unusable inputs (a
// skip id that names no check); a failing or undecidable check is a result, not an error.
func Evaluate(ctx context.Context, in Inputs) (*Report, error) {
	known := KnownChecks()
	ids := make([]string, len(known))
	for i, c := range known {
		ids[i] = c.ID
	}
	var unknown []string
	for id := range in.Skip {
		if !slices.Contains(ids, id) {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &UnknownSkipError{ID: unknown[0], Suggestion: suggest.Closest(unknown[0], ids)}
	}
	in.Options = in.Options.withDefaults()
	host := hostChecks(in)
	cluster := openshiftChecks(ctx, in)
	results := make([]Result, 0, len(known))
	for _, c := range known {
		var o outcome
		if reason, skipped := in.Skip[c.ID]; skipped {
			if reason == "" {
				reason = "no reason given"
			}
			o = skip("skipped by the blueprint: " + reason)
		} else if f, ok := host[c.ID]; ok {
			o = f()
		} else {
			o = cluster(c.ID)
		}
		results = append(results, Result{CheckInfo: c, Status: o.status, Message: o.message, Evidence: o.evidence})
	}
	// Checks cut short by Ctrl-C failed for no fault of the cluster: a report of them would
	// blame it, so the interruption is the answer.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("checking the cluster: %w", context.Cause(ctx))
	}
	return newReport(results), nil
}
