package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"gopkg.in/yaml.v3"
)

// Size is an amount of bytes. In a blueprint it is written as a number of MiB (512) or as
// a number with a binary unit (512MiB, 2GiB, 2G); units are always powers of 1024, since
// that is what qemu and disk tools mean.
type Size int64

// Byte multiples.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

var sizeUnits = map[string]Size{
	"": MiB, "b": 1,
	"k": KiB, "kb": KiB, "kib": KiB,
	"m": MiB, "mb": MiB, "mib": MiB,
	"g": GiB, "gb": GiB, "gib": GiB,
	"t": TiB, "tb": TiB, "tib": TiB,
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

// ParseSize reads a size as written in a blueprint; a bare number is MiB.
func ParseSize(s string) (Size, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q: want a number of MiB or a number with a unit (MiB, GiB, ...)", suggest.Clip(s))
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB or TiB)", suggest.Clip(s), suggest.Clip(m[2]))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("invalid size %q: too large", suggest.Clip(s))
	}
	if n == 0 {
		// Zero would read as "unset" and silently become the default.
		return 0, fmt.Errorf("invalid size %q: must be positive", suggest.Clip(s))
	}
	return Size(n) * unit, nil
}

// MiB returns the size in whole MiB, rounded up.
func (s Size) MiB() int64 { return (int64(s) + int64(MiB) - 1) / int64(MiB) }

// String writes the size with the largest unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		n    Size
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if s != 0 && s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// UnmarshalYAML accepts an integer (MiB) or a string with a unit.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
		return errors.New("expected a size: a number of MiB or a string such as 512MiB or 2GiB")
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalJSON writes the size as a string with a unit, so it reads back the same.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON accepts what MarshalJSON writes, or a number of MiB.
func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		str = string(b)
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes the size as a string with a unit.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// Duration is a time span written as a Go duration (90s, 20m, 1h30m) with an optional
// leading number of days (30d, 1d12h).
type Duration time.Duration

var daysRE = regexp.MustCompile(`^([0-9]+)d(.*)$`)

// ParseDuration reads a duration as written in a blueprint.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var total time.Duration
	rest := s
	if m := daysRE.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || days > int64(math.MaxInt64/int64(24*time.Hour)) {
			return 0, fmt.Errorf("invalid duration %q: too large", suggest.Clip(s))
		}
		total = time.Duration(days) * 24 * time.Hour
		rest = m[2]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: want a number with a unit, e.g. 90s, 20m, 1h30m or 30d", suggest.Clip(s))
		}
		if d < 0 || total > math.MaxInt64-d {
			return 0, fmt.Errorf("invalid duration %q: must be positive and not too large", suggest.Clip(s))
		}
		total += d
	}
	if total == 0 {
		// Zero would read as "unset" and silently become the default.
		return 0, fmt.Errorf("invalid duration %q: must be positive", suggest.Clip(s))
	}
	return Duration(total), nil
}

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String writes the duration as Go does (720h0m0s).
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a string duration; a bare number is refused because its unit
// would be a guess.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
			return fmt.Errorf("a duration needs a unit, e.g. %ss or %sm", n.Value, n.Value)
		}
		return errors.New("expected a duration such as 90s, 20m, 1h30m or 30d")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }
