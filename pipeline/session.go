package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// A Session is something live that one stage starts and later stages of the same build
// carry on with, so they do not pay for starting it again: the factory VM that stays up
// from install through validate to seal. Each stage still has its own cache entry, key
// and record; the session only saves the start-up.
//
// A session belongs to the stage that started or took it, and is closed when that stage
// ends, unless the stage hands it on (Env.HandOn). A handed-on session, and the resources
// (Stage.Resources) the stage that started it held, stay with the engine until a later
// stage of the same kind takes it (Env.TakeSession) or the build ends, when the engine
// closes it, on success, failure or Ctrl-C alike.
type Session struct {
	// ID names the session in stage records and events ("factory-vm-1").
	ID string
	// Kind is what the session is; only stages declaring it (Stage.Session) take it.
	Kind string
	// Dir is a private directory (0700) that lives as long as the session: what the live
	// thing writes (a VM's active disk) goes there, not in a stage's scratch directory.
	Dir string
	// Value is what the stages hand on; its type is their business.
	Value any

	closeFn func(context.Context) error
	release func() // the resources the starting stage held
	owner   *os.File
	once    sync.Once
}

// OnClose sets what closing the session does (stop the VM); Dir is removed after it.
func (s *Session) OnClose(f func(context.Context) error) { s.closeFn = f }

// close runs the session's close, releases its resources and removes its directory.
func (s *Session) close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		if s.closeFn != nil {
			err = s.closeFn(ctx)
		}
		if s.release != nil {
			s.release()
		}
		if rerr := os.RemoveAll(s.Dir); err == nil && rerr != nil {
			err = fmt.Errorf("session %s: removing %s: %w", s.ID, s.Dir, rerr)
		}
		if s.owner != nil {
			s.owner.Close() // after the removal, so no reaper races it
		}
	})
	return err
}

// sessions are a build's handed-on sessions, by kind, and the counter that names new ones.
type sessions struct {
	mu      sync.Mutex
	pending map[string]*Session
	n       int
	// parent holds the sessions' directories (the cache's staging directory): a killed
	// build's are removed by the next build's first session.
	parent string
	log    *slog.Logger
}

func newSessions(parent string, log *slog.Logger) *sessions {
	return &sessions{pending: map[string]*Session{}, parent: parent, log: log}
}

// start makes a new session of kind.
func (ss *sessions) start(kind string) (*Session, error) {
	ss.mu.Lock()
	ss.n++
	id := fmt.Sprintf("%s-%d", kind, ss.n)
	ss.mu.Unlock()
	if err := os.MkdirAll(ss.parent, 0o755); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	dir, owner, err := ownedDir(ss.parent, "session-", ss.log)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &Session{ID: id, Kind: kind, Dir: dir, owner: owner}, nil
}

// park keeps s for a later stage; a session of the same kind already parked is closed.
func (ss *sessions) park(ctx context.Context, s *Session) error {
	ss.mu.Lock()
	old := ss.pending[s.Kind]
	ss.pending[s.Kind] = s
	ss.mu.Unlock()
	if old != nil && old != s {
		return old.close(ctx)
	}
	return nil
}

// take removes and returns the parked session of kind, or nil.
func (ss *sessions) take(kind string) *Session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.pending[kind]
	delete(ss.pending, kind)
	return s
}

// has tells whether a session of kind is parked.
func (ss *sessions) has(kind string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.pending[kind] != nil
}

// closeAll closes every parked session: the build is over.
func (ss *sessions) closeAll(ctx context.Context) error {
	ss.mu.Lock()
	all := ss.pending
	ss.pending = map[string]*Session{}
	ss.mu.Unlock()
	var first error
	for _, s := range all {
		if err := s.close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// StartSession starts a session of the stage's kind (Stage.Session) owned by this stage:
// closed when the stage ends unless handed on. The caller fills Value and OnClose.
func (e *Env) StartSession() (*Session, error) {
	if e.sessions == nil || e.sessionKind == "" {
		return nil, fmt.Errorf("stage %s declares no session kind", e.stage)
	}
	s, err := e.sessions.start(e.sessionKind)
	if err != nil {
		return nil, err
	}
	e.own(s)
	return s, nil
}

// TakeSession returns the session an earlier stage of this build handed on, now owned by
// this stage, or nil when there is none (the earlier stage was a cache hit, or did not
// run): the stage then starts its own.
func (e *Env) TakeSession() *Session {
	if e.sessions == nil || e.sessionKind == "" {
		return nil
	}
	s := e.sessions.take(e.sessionKind)
	if s != nil {
		e.own(s)
	}
	return s
}

// HandOn keeps s, and the resources it holds, for a later stage of this build instead of
// closing it when this stage ends. A stage hands on only what it finished with cleanly.
func (e *Env) HandOn(s *Session) {
	e.handOn = s
}

// own makes s this stage's: the session the record names.
func (e *Env) own(s *Session) {
	e.session = s
	e.Log.Info("session", "session", s.ID)
}

// endSessions settles the stage's session when it ends: a handed-on one (after a
// successful run) is parked with the stage's resources, anything else is closed and the
// resources released. It returns the session's ID for the record.
func (e *Env) endSessions(ctx context.Context, ok bool, release func()) (string, error) {
	s := e.session
	if s == nil {
		release()
		return "", nil
	}
	if s.release == nil {
		s.release = release // started here: the session keeps this stage's resources
	} else {
		release() // taken: the session brought its own
	}
	if ok && e.handOn == s {
		return s.ID, e.sessions.park(ctx, s)
	}
	return s.ID, s.close(ctx)
}
