package stages

import (
	"reflect"
	"testing"
)

func TestParseForwards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		specs   []string
		want    []Forward
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"two", []string{"8080:10.0.2.50:80", "2222:10.0.2.50:22"},
			[]Forward{{HostPort: 8080, GuestAddr: "10.0.2.50", GuestPort: 80}, {HostPort: 2222, GuestAddr: "10.0.2.50", GuestPort: 22}}, ""},
		{"too few parts", []string{"8080:80"}, nil, `"8080:80": want HOSTPORT:GUESTADDR:GUESTPORT, e.g. 8080:10.0.2.50:8080`},
		{"not a number", []string{"x:10.0.2.50:80"}, nil, `"x:10.0.2.50:80": ports must be numbers from 1 to 65535`},
		{"out of range", []string{"8080:10.0.2.50:65536"}, nil, `"8080:10.0.2.50:65536": ports must be numbers from 1 to 65535`},
		{"zero", []string{"0:10.0.2.50:80"}, nil, `"0:10.0.2.50:80": ports must be numbers from 1 to 65535`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseForwards(tc.specs)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
