package depotfile

import (
	"strings"
	"testing"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
)

func TestSpecResolve(t *testing.T) {
	file := Spec{Slots: Slots{VMs: 3, CPUs: 8, Memory: v1alpha1.Size(16 << 30)}, ParallelBuilds: 6, Attempts: 5, MinFreeDisk: v1alpha1.Size(1 << 30)}
	for _, tc := range []struct {
		name    string
		spec    Spec
		o       Overrides
		want    Settings
		wantErr string
	}{
		{"defaults", Spec{}, Overrides{},
			Settings{Slots: pipeline.Resources{VMs: 2}, Parallel: 4, Attempts: 3}, ""},
		{"the depot file's", file, Overrides{},
			Settings{Slots: pipeline.Resources{VMs: 3, CPUs: 8, MemoryMiB: 16 << 10}, Parallel: 6, Attempts: 5, MinFreeBytes: 1 << 30}, ""},
		{"the command line's first", file, Overrides{VMs: 1, CPUs: 2, Parallel: 1, Attempts: 1, Memory: "4GiB", MinFree: "2GiB"},
			Settings{Slots: pipeline.Resources{VMs: 1, CPUs: 2, MemoryMiB: 4 << 10}, Parallel: 1, Attempts: 1, MinFreeBytes: 2 << 30}, ""},
		{"a bad memory size", Spec{}, Overrides{Memory: "lots"}, Settings{}, "--memory lots: "},
		{"a bad free size", Spec{}, Overrides{MinFree: "-1"}, Settings{}, "--min-free -1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.spec.Resolve(tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
