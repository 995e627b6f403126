package seed

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SourceDate is the time a seed's records carry: SOURCE_DATE_EPOCH when it is set
// (reproducible builds), else now() (time.Now when nil) to the second, in UTC.
func SourceDate(now func() time.Time) (time.Time, error) {
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok && s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds: %w", s, err)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if now == nil {
		now = time.Now
	}
	return now().UTC().Truncate(time.Second), nil
}
