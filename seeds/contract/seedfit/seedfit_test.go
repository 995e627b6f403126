package seedfit

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFamilies(t *testing.T) {
	for _, tc := range []struct {
		cidrs      []string
		want, desc string
		err        bool
	}{
		{nil, "", "without an IP family", false},
		{[]string{"192.168.127.0/24"}, "ipv4", "single-stack IPv4", false},
		{[]string{"fd00::/64"}, "ipv6", "single-stack IPv6", false},
		{[]string{"fd00::/64", "10.0.0.0/16", "10.1.0.0/16"}, "ipv4,ipv6", "dual-stack (IPv4+IPv6)", false},
		{[]string{"10.0.0.0"}, "", "", true},
	} {
		got, err := Families(tc.cidrs)
		if (err != nil) != tc.err || strings.Join(got, ",") != tc.want {
			t.Errorf("Families(%q) = %q, %v; want %q", tc.cidrs, got, err, tc.want)
			continue
		}
		if err == nil && Describe(got) != tc.desc {
			t.Errorf("Describe(%q) = %q, want %q", got, Describe(got), tc.desc)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Record
		want string // "" valid
	}{
		{"empty", Record{Version: 1}, ""},
		{"dual", Record{Version: 1, IPFamilies: []string{IPv4, IPv6}}, ""},
		{"version 2", Record{Version: 2}, ""},
		{"unknown version", Record{Version: 3}, "version: 3 is not 1 or 2"},
		{"unknown family", Record{Version: 1, IPFamilies: []string{"ipv5"}}, `ipFamilies[0]: "ipv5"`},
		{"twice", Record{Version: 1, IPFamilies: []string{IPv4, IPv4}}, "ipFamilies[1]"},
		{"IPv6 first", Record{Version: 1, IPFamilies: []string{IPv6, IPv4}}, "IPv4 comes first"},
	} {
		err := tc.r.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A version 1 record (proxy always written) reads as it was written; from version 2 an
// absent proxy says the seed has none to compare, and the summary leaves it out.
func TestProxyRecord(t *testing.T) {
	for _, tc := range []struct {
		doc              string
		proxy, applies   bool
		summary, missing string
	}{
		{`{"version":1,"proxy":false,"fips":false}`, false, true, "no proxy", ""},
		{`{"version":1,"proxy":true,"fips":false}`, true, true, ", proxy", ""},
		{`{"version":1,"fips":false}`, false, true, "no proxy", ""},
		{`{"version":2,"proxy":true,"fips":false}`, true, true, ", proxy", ""},
		{`{"version":2,"proxy":false,"fips":false}`, false, true, "no proxy", ""},
		{`{"version":2,"fips":false}`, false, false, "no FIPS", "proxy"},
	} {
		var r Record
		if err := json.Unmarshal([]byte(tc.doc), &r); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", tc.doc, err)
		}
		proxy, applies := r.HasProxy()
		s := r.Summary()
		if proxy != tc.proxy || applies != tc.applies || !strings.Contains(s, tc.summary) || tc.missing != "" && strings.Contains(s, tc.missing) {
			t.Errorf("%s: HasProxy = %v, %v; Summary %q", tc.doc, proxy, applies, s)
		}
	}
	// What the seal writes for the conformance OS leaves the field out.
	b, _ := json.Marshal(Record{Version: Version})
	if strings.Contains(string(b), "proxy") {
		t.Errorf("conformance record %s", b)
	}
}
