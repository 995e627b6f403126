package netlimit

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// DefaultStallTimeout is how long a peer may send nothing (no answer, no body byte, no
// upload byte taken) before its request fails: long enough for a registry busy committing a
// large upload, short enough that a dead peer is an error within a minute.
const DefaultStallTimeout = 60 * time.Second

// Flag is the command-line flag that sets the stall timeout; errors name it.
const Flag = "stall-timeout"

type stallKey struct{}

// WithStallTimeout returns ctx carrying the stall timeout d for every request made under it.
// The limit is the user's, for the whole command: the context carries it to clients built
// deep inside stages without an option on each of their constructors.
func WithStallTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, stallKey{}, d)
}

// StallTimeout is the stall timeout ctx carries, DefaultStallTimeout when none (or none
// positive) was set.
func StallTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(stallKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return DefaultStallTimeout
}

// StallError is a peer that made no progress for the stall timeout.
type StallError struct {
	Kind  string // "registry", "API server", "server"
	Peer  string // host:port
	Limit time.Duration
	// What is the body being received when it stalled; empty while waiting for the answer.
	What string
}

func (e *StallError) Error() string {
	while := "answered nothing"
	if e.What != "" {
		while = "sent no more of the " + e.What
	}
	return fmt.Sprintf("%s %s %s for %s (stall timeout; change it with --%s)", e.Kind, e.Peer, while, seconds(e.Limit), Flag)
}

// TooLargeError is a response body longer than the cap for what it holds.
type TooLargeError struct {
	Kind, Peer string
	What       string // "manifest", "referrers list", "token answer", "API answer", ...
	Limit      int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the %s from %s %s is larger than its cap of %s", e.What, e.Kind, e.Peer, Size(e.Limit))
}

// Size spells n bytes as the docs do (4 MiB, 64 KiB).
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// seconds spells d as the flag takes it, in whole seconds where it is whole.
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
