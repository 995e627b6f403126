package stages

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseForwards reads port forwards written HOSTPORT:GUESTADDR:GUESTPORT, as seed boot's
// --forward takes them.
func ParseForwards(specs []string) ([]Forward, error) {
	var out []Forward
	for _, s := range specs {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q: want HOSTPORT:GUESTADDR:GUESTPORT, e.g. 8080:10.0.2.50:8080", s)
		}
		hp, err1 := strconv.Atoi(parts[0])
		gp, err2 := strconv.Atoi(parts[2])
		if err := errors.Join(err1, err2); err != nil || hp <= 0 || hp > 65535 || gp <= 0 || gp > 65535 {
			return nil, fmt.Errorf("%q: ports must be numbers from 1 to 65535", s)
		}
		out = append(out, Forward{HostPort: hp, GuestPort: gp, GuestAddr: parts[1]})
	}
	return out, nil
}
