package depot

import (
	"errors"
	"net"
	"strings"
	"syscall"
)

// Transient reports whether err looks like a failure that a retry can fix: a network
// connection refused, reset or timed out, or a registry that is overloaded or restarting.
// A build's own faults (bad input, a failing check, a guest that fails) are not.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	msg := strings.ToLower(err.Error())
	for _, s := range transientMessages() {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// transientMessages are what such failures say once they have crossed a tool's stderr or
// a wrapped error that lost its type.
func transientMessages() []string {
	return []string{
		"connection refused", "connection reset by peer", "broken pipe", "i/o timeout",
		"tls handshake timeout", "timeout awaiting response headers", "no such host",
		"502 bad gateway", "503 service unavailable", "504 gateway timeout", "429 too many requests",
		"toomanyrequests", "unexpected eof",
	}
}
