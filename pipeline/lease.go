package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline/flock"
)

// Pins and leases. A build must not lose an entry it has used but no longer holds the lock of: a
// downstream stage reads its upstream's folder after that stage's lock is released. So each
// entry a Cache value locks is also pinned, with a shared flock on locks/<key>.use, and each
// shared store it hands a stage is pinned with locks/shared-<name>.use. Pins last until
// Release (or the process ends). Prune removes an entry only while holding both its lock and
// its pin exclusively, and a store's blobs only while holding the store's pin exclusively, so
// it never races a build that is about to read an entry or to hardlink a blob it found stored.

// lockPath is the lock file name in locks/ (an entry's .lock or .use, a store's pin).
func (c *Cache) lockPath(name string) string { return filepath.Join(c.Dir, "locks", name) }

func storePin(name string) string { return "shared-" + name + ".use" }

// pinRef is one held pin and how many leases hold it.
type pinRef struct {
	f    *os.File
	refs int
}

// lease is the pins one build took: they are dropped when the build ends (Build releases
// it), so prune may remove what a finished build used while other builds run on. Pins taken
// outside a build belong to the Cache's own lease, dropped by Release.
type lease struct{ names map[string]bool }

type leaseKey struct{}

func withLease(ctx context.Context, l *lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// pin takes a shared flock on locks/<name> for the lease in ctx (else the Cache's own, until
// Release). Prune takes the same lock exclusively, and only briefly, so waiting here is short.
func (c *Cache) pin(ctx context.Context, name string) error {
	l, _ := ctx.Value(leaseKey{}).(*lease)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l == nil {
		if c.own == nil {
			c.own = &lease{names: map[string]bool{}}
		}
		l = c.own
	}
	if p, ok := c.pins[name]; ok {
		if !l.names[name] {
			l.names[name] = true
			p.refs++
		}
		return nil
	}
	f, err := c.flockShared(ctx, name)
	if err != nil {
		return err
	}
	if c.pins == nil {
		c.pins = map[string]*pinRef{}
	}
	c.pins[name] = &pinRef{f: f, refs: 1}
	l.names[name] = true
	return nil
}

// flockShared opens locks/<name> and takes a shared flock on it, waiting while prune holds it.
func (c *Cache) flockShared(ctx context.Context, name string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(c.Dir, "locks"), 0o755); err != nil {
		return nil, fmt.Errorf("pinning %s: %w", name, err)
	}
	f, err := os.OpenFile(c.lockPath(name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pinning %s: %w", name, err)
	}
	for {
		ok, err := flock.TryShared(f)
		if ok {
			return f, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("pinning %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("pinning %s: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newLease starts the lease of one build.
func (c *Cache) newLease() *lease { return &lease{names: map[string]bool{}} }

// releaseLease drops a build's pins; a pin another build still holds stays.
func (c *Cache) releaseLease(l *lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range l.names {
		p, ok := c.pins[name]
		if !ok {
			continue
		}
		if p.refs--; p.refs <= 0 {
			p.f.Close()
			delete(c.pins, name)
		}
	}
	l.names = map[string]bool{}
}

func (c *Cache) pinned(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pins[name]
	return ok
}

// Release drops every pin this Cache holds on the entries and shared stores its builds
// used, so prune may remove them. Call it when no build using c is running any more; the
// process ending releases them too.
func (c *Cache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.pins {
		p.f.Close()
		delete(c.pins, name)
	}
	c.own = nil
}
