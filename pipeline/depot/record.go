package depot

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Record is a running depot's status: every change is saved to its output directory's
// StatusFile at once, the lock held through the write so an older state never lands after
// a newer one. The local depot and the depot on Tekton both keep theirs with it.
type Record struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
	sum *Summary
}

// NewRecord starts recording sum in dir and saves it once.
func NewRecord(dir string, sum *Summary, log *slog.Logger) (*Record, error) {
	r := &Record{dir: dir, log: log, sum: sum}
	return r, r.Save()
}

// Build is a copy of build i's record.
func (r *Record) Build(i int) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum.Builds[i]
}

// Update changes build i and saves the status file; a failed save is logged, the depot
// goes on (its end writes the file again).
func (r *Record) Update(i int, f func(*Result)) {
	r.mu.Lock()
	f(&r.sum.Builds[i])
	r.mu.Unlock()
	if err := r.Save(); err != nil {
		r.log.Warn("could not save the depot status", "error", err.Error())
	}
}

// Save writes the status file.
func (r *Record) Save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return SaveStatus(r.dir, r.sum)
}

// Finish settles the depot's status and writes the status file and the reports. Stopped
// by ctx (Ctrl-C), a build not finished is interrupted, not failed (started again, the
// depot runs it), unless it was cancelled; the error is then ctx's.
func (r *Record) Finish(ctx context.Context) (*Summary, error) {
	r.mu.Lock()
	r.sum.Finished = time.Now()
	r.sum.Status = StatusSucceeded
	for i, b := range r.sum.Builds {
		switch {
		case ctx.Err() != nil && b.Status != StatusSucceeded:
			r.sum.Status = StatusInterrupted
			if b.Status != StatusCancelled {
				r.sum.Builds[i].Status = StatusInterrupted
			}
		case b.Status != StatusSucceeded:
			r.sum.Status = StatusFailed
		}
	}
	r.mu.Unlock()
	err := errors.Join(r.Save(), WriteReports(r.dir, r.sum))
	if ctx.Err() != nil {
		return r.sum, ctx.Err()
	}
	return r.sum, err
}
