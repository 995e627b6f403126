package pipeline

import (
	"context"
	"fmt"
	"sync"
)

// Resources are what a stage's run holds while it runs: factory VMs and their size. The
// engine takes them from BuildOptions.Slots before running the stage, never for a cache hit.
type Resources struct {
	VMs       int `json:"vms,omitempty"`
	CPUs      int `json:"cpus,omitempty"`
	MemoryMiB int `json:"memoryMiB,omitempty"`
}

// IsZero reports whether r asks for nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

func (r Resources) add(o Resources) Resources {
	return Resources{VMs: r.VMs + o.VMs, CPUs: r.CPUs + o.CPUs, MemoryMiB: r.MemoryMiB + o.MemoryMiB}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{VMs: r.VMs - o.VMs, CPUs: r.CPUs - o.CPUs, MemoryMiB: r.MemoryMiB - o.MemoryMiB}
}

// fits reports whether r is within limit; a zero limit field is no limit.
func (r Resources) fits(limit Resources) bool {
	ok := func(v, l int) bool { return l == 0 || v <= l }
	return ok(r.VMs, limit.VMs) && ok(r.CPUs, limit.CPUs) && ok(r.MemoryMiB, limit.MemoryMiB)
}

func (r Resources) String() string {
	return fmt.Sprintf("%d VM, %d CPU, %d MiB", r.VMs, r.CPUs, r.MemoryMiB)
}

// Slots hands resources to stage runs; a depot shares one among its builds.
type Slots interface {
	// Acquire waits until r is free and returns its release, or ctx's error.
	Acquire(ctx context.Context, who string, r Resources) (release func(), err error)
}

// Pool is Slots of a fixed capacity, served first come, first served: a request waits
// until every earlier one is served and it fits, so a large request is never starved by
// a stream of small ones.
type Pool struct {
	capacity Resources
	mu       sync.Mutex
	used     Resources
	queue    []*slotWaiter
}

type slotWaiter struct {
	r     Resources
	ready chan struct{}
}

// NewPool returns a pool of capacity (a zero field is unlimited).
func NewPool(capacity Resources) *Pool { return &Pool{capacity: capacity} }

// Acquire implements Slots. A request larger than the whole pool is an error: it could
// never run.
func (p *Pool) Acquire(ctx context.Context, who string, r Resources) (func(), error) {
	if !r.fits(p.capacity) {
		return nil, fmt.Errorf("%s needs %s, more than the depot has (%s)", who, r, p.capacity)
	}
	w := &slotWaiter{r: r, ready: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, w)
	p.dispatch()
	p.mu.Unlock()
	select {
	case <-w.ready:
		var once sync.Once
		return func() {
			once.Do(func() {
				p.mu.Lock()
				p.used = p.used.sub(r)
				p.dispatch()
				p.mu.Unlock()
			})
		}, nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			p.used = p.used.sub(r)
		default:
			for i, q := range p.queue {
				if q == w {
					p.queue = append(p.queue[:i], p.queue[i+1:]...)
					break
				}
			}
		}
		p.dispatch()
		return nil, ctx.Err()
	}
}

// dispatch grants waiters in order while the first one fits. Called with mu held.
func (p *Pool) dispatch() {
	for len(p.queue) > 0 {
		w := p.queue[0]
		if !p.used.add(w.r).fits(p.capacity) {
			return
		}
		p.used = p.used.add(w.r)
		p.queue = p.queue[1:]
		close(w.ready)
	}
}

// InUse is what is held right now.
func (p *Pool) InUse() Resources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}
