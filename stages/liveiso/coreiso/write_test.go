package coreiso

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
)

func TestWriteModes(t *testing.T) {
	in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	orig, _ := os.ReadFile(in)
	dir := filepath.Dir(in)
	cfg := testConfig("w")

	t.Run("output equal to input is refused", func(t *testing.T) {
		_, err := Customize(context.Background(), in, in, Customization{Ignition: cfg})
		if !IsBadInput(err) || !strings.Contains(err.Error(), "is this command's input") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("output in a missing directory", func(t *testing.T) {
		_, err := Customize(context.Background(), in, filepath.Join(dir, "nope", "out.iso"), Customization{Ignition: cfg})
		if err == nil || !IsBadInput(err) {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("cancelled context writes nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out := filepath.Join(dir, "cancelled.iso")
		if _, err := Customize(ctx, in, out, Customization{Ignition: cfg}); !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v", err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("output exists after cancellation: %v", err)
		}
	})
	t.Run("an existing output is replaced atomically", func(t *testing.T) {
		out := filepath.Join(dir, "existing.iso")
		if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Customize(context.Background(), in, out, Customization{Ignition: cfg}); err != nil {
			t.Fatal(err)
		}
		if got, err := ShowIgnition(out); err != nil || !bytes.Equal(got, cfg) {
			t.Fatalf("show = %q, %v", got, err)
		}
	})
	t.Run("no temporary files are left behind", func(t *testing.T) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name()[0] == '.' {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
	t.Run("the input is untouched by -o", func(t *testing.T) {
		now, _ := os.ReadFile(in)
		if !bytes.Equal(now, orig) {
			t.Fatal("input changed")
		}
	})
}
