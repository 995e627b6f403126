package seed

import (
	"os"
	"time"
)

// SourceDate is the time a seed's records carry: SOURCE_DATE_EPOCH when it is set
// (reproducible builds), else now() (time.Now when nil) to the second, in UTC.
func SourceDate(now func() time.Time) (time.Time, error) {
	return SourceDateFrom(os.Getenv("SOURCE_DATE_EPOCH"), now)
}

// SourceDateFrom is SourceDate with the SOURCE_DATE_EPOCH value given ("" for not set).
func SourceDateFrom(epoch string, now func() time.Time) (time.Time, error) {
	if t, ok, err := ParseSourceDateEpoch(epoch); ok || err != nil {
		return t, err
	}
	if now == nil {
		now = time.Now
	}
	return now().UTC().Truncate(time.Second), nil
}
