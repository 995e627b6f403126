package handoff

import (
	"slices"
	"testing"
)

// Each record names the stage that writes it, and Deps keeps the order it is given and
// drops repeats.
func TestDepsFromRecords(t *testing.T) {
	for _, tc := range []struct {
		reads []Record
		want  []string
	}{
		{nil, []string{}},
		{[]Record{Resolve{}}, []string{StageResolve}},
		{[]Record{Seal{}, Validate{}, Seal{}}, []string{StageSeal, StageValidate}},
		{[]Record{Resolve{}, Render{}, LiveISO{}, Precache{}, Install{}, Validate{}, Seal{}},
			[]string{StageResolve, StageRender, StageLiveISO, StagePrecache, StageInstall, StageValidate, StageSeal}},
	} {
		if got := Deps(tc.reads...); !slices.Equal(got, tc.want) {
			t.Errorf("Deps(%T...) = %v, want %v", tc.reads, got, tc.want)
		}
	}
}
