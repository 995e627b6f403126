package waittest

import (
	"context"
	"errors"
	"testing"
)

func TestCancelOnWait(t *testing.T) {
	ctx := CancelOnWait()
	if err := ctx.Err(); err != nil {
		t.Fatalf("cancelled before anyone waited: %v", err)
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("after waiting: %v, want context.Canceled", ctx.Err())
	}
}

func TestSignalOnWait(t *testing.T) {
	ctx, waiting := SignalOnWait()
	select {
	case <-waiting:
		t.Fatal("signalled before anyone waited")
	default:
	}
	if ctx.Done() != nil {
		t.Fatal("a background context's Done is nil, so the holder waits forever on it")
	}
	select {
	case <-waiting:
	default:
		t.Fatal("not signalled after Done was asked for")
	}
}
