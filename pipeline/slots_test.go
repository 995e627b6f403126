package pipeline

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestPoolServesInOrderWithinCapacity(t *testing.T) {
	p := NewPool(Resources{VMs: 2, CPUs: 4})
	ctx := context.Background()
	rel1, err := p.Acquire(ctx, "a", Resources{VMs: 1, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	rel2, _ := p.Acquire(ctx, "b", Resources{VMs: 1, CPUs: 2})
	if got := p.InUse(); got != (Resources{VMs: 2, CPUs: 4}) {
		t.Fatalf("in use %v", got)
	}
	// c (big) queues first, d (small) after it: d must not overtake c.
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(who string, r Resources) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := p.Acquire(ctx, who, r)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			rel()
		}()
	}
	start("c", Resources{VMs: 2, CPUs: 4})
	waitQueued(p, 1)
	start("d", Resources{VMs: 1, CPUs: 1})
	waitQueued(p, 2)
	// Releasing a frees enough for d but not for c: release dispatches at once, and d
	// must stay queued behind c.
	rel1()
	if n := queued(p); n != 2 {
		t.Errorf("%d requests queued after a released, want c and d still waiting", n)
	}
	mu.Lock()
	if len(order) != 0 {
		t.Errorf("%v ran while c waits for the whole pool", order)
	}
	mu.Unlock()
	rel2()
	rel2() // releasing twice gives back once
	wg.Wait()
	if strings.Join(order, ",") != "c,d" {
		t.Errorf("order %v, want c before d", order)
	}
	if got := p.InUse(); !got.IsZero() {
		t.Errorf("in use after all released: %v", got)
	}
}

func TestPoolCancelAndTooBig(t *testing.T) {
	p := NewPool(Resources{VMs: 1})
	if _, err := p.Acquire(context.Background(), "huge", Resources{VMs: 2}); err == nil || !strings.Contains(err.Error(), "more than the depot has") {
		t.Errorf("err = %v", err)
	}
	rel, _ := p.Acquire(context.Background(), "a", Resources{VMs: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { waitQueued(p, 1); cancel() }() // give up once b waits
	if _, err := p.Acquire(ctx, "b", Resources{VMs: 1}); err == nil {
		t.Fatal("acquired a busy slot")
	}
	rel()
	// The cancelled waiter left the queue: the slot is free for the next one.
	rel2, err := p.Acquire(context.Background(), "c", Resources{VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	rel2()
}

func queued(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// waitQueued yields until n requests wait in the pool: it waits for the goroutines to get
// there, not for a time a loaded machine may overrun.
func waitQueued(p *Pool, n int) {
	for queued(p) < n {
		runtime.Gosched()
	}
}
