package validate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/containers/image/v5/docker/reference"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// hostChecks returns the host checks by id, each ready to run.
func hostChecks(in Inputs) map[string]func() outcome {
	f := in.Facts
	guard := func(run func() outcome) func() outcome {
		return func() outcome {
			if f == nil {
				return skip("no facts from the guest: the host part of validation did not run")
			}
			return run()
		}
	}
	ign := func(run func(*expected) outcome) func() outcome {
		return guard(func() outcome {
			if in.Ignition == nil {
				return skip("no Ignition config applies to the installed root (openshift: its MachineConfigs are checked through the API)")
			}
			exp, err := parseExpected(in.Ignition)
			if err != nil {
				return errored(err)
			}
			return run(exp)
		})
	}
	o := in.Options
	return map[string]func() outcome{
		CheckBootFromDisk: guard(func() outcome { return checkBootFromDisk(f) }),
		CheckClusterDNS: guard(func() outcome {
			if in.OpenShift == nil {
				return skip("not OpenShift: the node serves no cluster names")
			}
			return checkClusterDNS(f)
		}),
		CheckIgnitionFiles:    ign(func(e *expected) outcome { return checkFiles(f, e) }),
		CheckIgnitionUnits:    ign(func(e *expected) outcome { return checkUnits(f, e) }),
		CheckIgnitionUsers:    ign(func(e *expected) outcome { return checkUsers(f, e) }),
		CheckImagesPresent:    guard(func() outcome { return checkImages(f, in.Images) }),
		CheckBootstrapCleaned: guard(func() outcome { return checkLeftovers(f) }),
		CheckDiskFreeSpace:    guard(func() outcome { return checkFreeSpace(f, o.MinFreeBytes) }),
		CheckTimeSync:         guard(func() outcome { return checkClock(f, in.ReceivedAt, o.MaxClockSkew) }),
		CheckFactsComplete:    guard(func() outcome { return checkComplete(f) }),
	}
}

func checkBootFromDisk(f *wire.Facts) outcome {
	b := f.Boot
	ev := []string{"root " + f.Root + " on " + b.Source + " (" + b.FSType + ") at " + b.MountPoint}
	if b.RootLabel != "" {
		ev = append(ev, "root label "+b.RootLabel)
	}
	ev = append(ev, "cmdline: "+clip(b.Cmdline, 200))
	if b.Live {
		return fail("booted from the live system: "+b.LiveReason, ev...)
	}
	return pass("booted from "+b.Source, ev...)
}

func checkComplete(f *wire.Facts) outcome {
	var problems []string
	for _, list := range sortedKeys(f.Truncated) {
		problems = append(problems, fmt.Sprintf("%s cut to fit one message (of %d)", list, f.Truncated[list]))
	}
	problems = append(problems, f.Errors...)
	return failures(problems, "every fact reported")
}

// checkImages finds each precached image in containers-storage by repository and digest.
func checkImages(f *wire.Facts, want []handoff.Image) outcome {
	if len(want) == 0 {
		return skip("no images were precached")
	}
	if f.Images == nil {
		return errored(errors.New("the guest did not list containers-storage (facts without --storage)"))
	}
	if f.Images.Error != "" {
		return errored(errors.New(f.Images.Error))
	}
	byRepo := map[string][]string{} // repository -> digests held under it
	for _, img := range f.Images.Images {
		digests := append([]string{img.Digest}, img.Digests...)
		for _, n := range img.Names {
			repo := repository(n)
			byRepo[repo] = append(byRepo[repo], digests...)
		}
	}
	var problems []string
	for _, w := range want {
		held := byRepo[repository(w.Ref)]
		if slices.Contains(held, w.Digest) {
			continue
		}
		p := fmt.Sprintf("%s@%s missing from container storage", repository(w.Ref), w.Digest)
		if len(held) > 0 {
			p += fmt.Sprintf(" (it holds %s with %s)", repository(w.Ref), held[0])
		}
		if f.Truncated["images"] > 0 {
			return errored(fmt.Errorf("%s, but the guest's image list was cut to fit one message", p))
		}
		problems = append(problems, p)
	}
	return failures(problems, fmt.Sprintf("all %d precached images present", len(want)),
		fmt.Sprintf("%d images in %s (%s)", len(f.Images.Images), f.Images.GraphRoot, f.Images.Driver))
}

// repository is a reference's repository without tag or digest; an unparsable reference
// stands for itself.
func repository(ref string) string {
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return n.Name()
}

func checkLeftovers(f *wire.Facts) outcome {
	if len(f.Leftovers) == 0 {
		return errored(errors.New("the guest reported no leftover paths looked for"))
	}
	var problems []string
	for _, l := range f.Leftovers {
		if l.Exists {
			problems = append(problems, fmt.Sprintf("%s left on the installed root (%s)", l.Path, l.What))
		}
	}
	return failures(problems, fmt.Sprintf("none of %d bootstrap leftovers present", len(f.Leftovers)))
}

func checkFreeSpace(f *wire.Facts, min uint64) outcome {
	d := f.Disk
	ev := []string{fmt.Sprintf("root filesystem: %s free of %s", units.BytesSize(float64(d.FreeBytes)), units.BytesSize(float64(d.TotalBytes)))}
	if d.Disk != "" {
		parts := make([]string, 0, len(d.Partitions))
		for _, p := range d.Partitions {
			parts = append(parts, fmt.Sprintf("%s %s", p.Name, units.BytesSize(float64(p.Bytes))))
		}
		ev = append(ev, fmt.Sprintf("disk %s %s: %s", d.Disk, units.BytesSize(float64(d.DiskBytes)), strings.Join(parts, ", ")))
	}
	if d.TotalBytes == 0 {
		return errored(errors.New("the guest reported no filesystem size for the root"))
	}
	if d.FreeBytes < min {
		return fail(fmt.Sprintf("%s free on the root filesystem, need %s", units.BytesSize(float64(d.FreeBytes)), units.BytesSize(float64(min))), ev...)
	}
	return pass(fmt.Sprintf("%s free (need %s)", units.BytesSize(float64(d.FreeBytes)), units.BytesSize(float64(min))), ev...)
}

func checkClock(f *wire.Facts, received time.Time, max time.Duration) outcome {
	if received.IsZero() || f.Time.IsZero() {
		return errored(errors.New("no guest clock or receipt time to compare"))
	}
	skew := f.Time.Sub(received)
	ev := []string{"guest " + f.Time.UTC().Format(time.RFC3339), "host " + received.UTC().Format(time.RFC3339)}
	if len(f.Clock.SyncConfigs) > 0 {
		ev = append(ev, "time sync configured: "+strings.Join(f.Clock.SyncConfigs, ", "))
	} else {
		ev = append(ev, "no NTP/chrony configuration on the node (the site config supplies it)")
	}
	if skew.Abs() > max {
		return fail(fmt.Sprintf("guest clock is %s off the host's (bound %s)", skew.Round(time.Second), max), ev...)
	}
	return pass(fmt.Sprintf("guest clock within %s of the host's", max), ev...)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
