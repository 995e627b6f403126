package validate

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// gzipDataURL is contents gzipped into a data URL, as Butane inlines a compressed file.
func gzipDataURL(t *testing.T, contents []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(contents); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// An inline file's declared sha256 is computed as a stream, and the decompressed size is
// capped: a gzip data URL that expands past the cap (a gzip bomb: a few KiB of config
// that would otherwise be gunzipped whole) is refused with the cap named.
func TestDataSHA256CapsDecompression(t *testing.T) {
	gz := "gzip"
	const limit = 1 << 20
	small := []byte("kernel.panic = 10\n")
	sum := sha256.Sum256(small)
	for _, tc := range []struct {
		name, src   string
		compression *string
		want, err   string
	}{
		{"plain", "data:;base64," + base64.StdEncoding.EncodeToString(small), nil, hex.EncodeToString(sum[:]), ""},
		{"gzip", gzipDataURL(t, small), &gz, hex.EncodeToString(sum[:]), ""},
		{"gzip at the cap", gzipDataURL(t, make([]byte, limit)), &gz, "", ""},
		{"gzip bomb", gzipDataURL(t, make([]byte, 8*limit)), &gz, "", "larger than 1048576 bytes"},
		{"plain over the cap", "data:;base64," + base64.StdEncoding.EncodeToString(make([]byte, limit+1)), nil, "", "larger than 1048576 bytes"},
		{"not gzip", "data:,plain", &gz, "", "gunzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dataSHA256Max(tc.src, tc.compression, limit)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("dataSHA256 = %s, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || tc.want != "" && got != tc.want {
				t.Errorf("dataSHA256 = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	if MaxInlineContents < 64<<20 {
		t.Errorf("MaxInlineContents %d refuses files Butane inlines in real configs", MaxInlineContents)
	}
}
