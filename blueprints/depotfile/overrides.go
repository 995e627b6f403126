package depotfile

import (
	"fmt"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
)

// Overrides are a depot run's settings given on its command line; a zero count or an
// empty size leaves the depot file's. Errors name the flags (--memory, --min-free).
type Overrides struct {
	VMs, CPUs, Parallel, Attempts int
	// Memory and MinFree are sizes as blueprints write them (32GiB).
	Memory, MinFree string
}

// Settings are a depot run's resolved settings.
type Settings struct {
	Slots        pipeline.Resources
	Parallel     int
	Attempts     int
	MinFreeBytes uint64
}

// Defaults for what neither the command line nor the depot file sets.
const (
	DefaultVMs      = 2
	DefaultParallel = 4
	DefaultAttempts = 3
)

// Resolve takes each setting from the command line, else from the depot file, else the
// default (no limit for CPUs, memory and free disk).
func (s Spec) Resolve(o Overrides) (Settings, error) {
	set := Settings{
		Slots:    pipeline.Resources{VMs: pick(o.VMs, s.Slots.VMs, DefaultVMs), CPUs: pick(o.CPUs, s.Slots.CPUs, 0), MemoryMiB: int(s.Slots.Memory.MiB())},
		Parallel: pick(o.Parallel, s.ParallelBuilds, DefaultParallel),
		Attempts: pick(o.Attempts, s.Attempts, DefaultAttempts),
	}
	if o.Memory != "" {
		m, err := v1alpha1.ParseSize(o.Memory)
		if err != nil {
			return set, fmt.Errorf("--memory %s: %w", o.Memory, err)
		}
		set.Slots.MemoryMiB = int(m.MiB())
	}
	minFree := s.MinFreeDisk
	if o.MinFree != "" {
		var err error
		if minFree, err = v1alpha1.ParseSize(o.MinFree); err != nil {
			return set, fmt.Errorf("--min-free %s: %w", o.MinFree, err)
		}
	}
	set.MinFreeBytes = uint64(minFree)
	return set, nil
}

// pick is the first value set: the flag's, the depot file's, the default.
func pick(flag, file, def int) int {
	if flag != 0 {
		return flag
	}
	if file != 0 {
		return file
	}
	return def
}
