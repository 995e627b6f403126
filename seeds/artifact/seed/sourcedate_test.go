package seed_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

func TestSourceDate(t *testing.T) {
	fixed := time.Date(2026, 11, 23, 10, 0, 0, 500, time.UTC)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if got, err := seed.SourceDate(func() time.Time { return fixed }); err != nil || !got.Equal(fixed.Truncate(time.Second)) {
		t.Errorf("without SOURCE_DATE_EPOCH: %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if got, err := seed.SourceDate(nil); err != nil || got.Unix() != 1700000000 || got.Location() != time.UTC {
		t.Errorf("SOURCE_DATE_EPOCH: %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := seed.SourceDate(nil); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("bad SOURCE_DATE_EPOCH: %v", err)
	}
}
