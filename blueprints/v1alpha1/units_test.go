package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"512", 512 * MiB, true},
		{"512MiB", 512 * MiB, true},
		{"512M", 512 * MiB, true},
		{"512mb", 512 * MiB, true},
		{"2GiB", 2 * GiB, true},
		{"2 G", 2 * GiB, true},
		{"1TiB", TiB, true},
		{"4096B", 4 * KiB, true},
		{"64KiB", 64 * KiB, true},
		{"", 0, false},
		{"0", 0, false},
		{"0GiB", 0, false},
		{"1.5GiB", 0, false},
		{"-1", 0, false},
		{"12QB", 0, false},
		{"99999999999999999999", 0, false},
		{"9999999999TiB", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSizeRoundTrip(t *testing.T) {
	for _, s := range []Size{512 * MiB, 2 * GiB, 1536 * MiB, 3 * KiB, 7, TiB} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Size
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Errorf("%v -> %s -> %v (%v)", s, b, back, err)
		}
	}
	if got := (1536 * MiB).String(); got != "1536MiB" {
		t.Errorf("String = %s", got)
	}
	if got := (1536 * MiB).MiB(); got != 1536 {
		t.Errorf("MiB = %d", got)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"20m", 20 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"30d", 30 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"", 0, false},
		{"0s", 0, false},
		{"0d", 0, false},
		{"30", 0, false},
		{"soon", 0, false},
		{"-5m", 0, false},
		{"d", 0, false},
		{"99999999999d", 0, false},
		{"106751d23h", 2562047 * time.Hour, true},
		{"106751d24h", 0, false},
		{"106752d", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || got.D() != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	d := Duration(42 * 24 * time.Hour)
	b, _ := json.Marshal(d)
	var back Duration
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Errorf("round trip %s -> %v (%v)", b, back, err)
	}
}
