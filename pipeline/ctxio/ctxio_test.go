package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// A read after the context ends fails with the context's error; before, it passes through.
func TestReaderStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	buf := make([]byte, 3)
	if n, err := r.Read(buf); n != 3 || err != nil || string(buf) != "abc" {
		t.Fatalf("first read: %d %q %v", n, buf[:n], err)
	}
	cancel()
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
}

// blockedReader's Read says it started, then waits until the test ends: stdin from a
// terminal no one types into.
type blockedReader struct{ started, release chan struct{} }

func (b blockedReader) Read([]byte) (int, error) {
	b.started <- struct{}{}
	<-b.release
	return 0, io.EOF
}

// A read waiting inside the reader returns when the context ends, with its cause; the
// data before it passes through.
func TestAbandoningReturnsFromABlockedRead(t *testing.T) {
	b := blockedReader{started: make(chan struct{}), release: make(chan struct{})}
	defer close(b.release)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("interrupt signal received")
	r := Abandoning(ctx, io.MultiReader(strings.NewReader("abc"), b))
	got := make(chan error, 1)
	var data []byte
	go func() {
		var err error
		data, err = io.ReadAll(r)
		got <- err
	}()
	<-b.started
	cancel(stop)
	if err := <-got; !errors.Is(err, stop) || string(data) != "abc" {
		t.Fatalf("read %q, %v; want %q and the context's cause", data, err, "abc")
	}
}
