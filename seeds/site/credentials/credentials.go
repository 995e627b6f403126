// Package credentials seals a cluster's credentials to their owners: a tar of files,
// age-encrypted to age X25519 or SSH public keys, so only the holders of the matching
// private keys read them, and nobody on the way does. The seal stage uses it for a seed's
// bundle, `site-config create` for each site's admin kubeconfig and kubeadmin password.
package credentials

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/agessh"
)

// File is one file of a bundle.
type File struct {
	Name string
	Data []byte
}

// ParseRecipients accepts age X25519 recipients (age1...) and SSH public keys.
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, k := range keys {
		var r age.Recipient
		var err error
		if strings.HasPrefix(k, "age1") {
			r, err = age.ParseX25519Recipient(k)
		} else {
			r, err = agessh.ParseRecipient(k)
		}
		if err != nil {
			return nil, fmt.Errorf("credentials recipient %.20q...: %w", k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Encrypt writes files as a tar (fixed owners and times, mode 0600) encrypted to rcpts.
func Encrypt(w io.Writer, rcpts []age.Recipient, files []File) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o600, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ew, err := age.Encrypt(w, rcpts...)
	if err != nil {
		return fmt.Errorf("encrypting the credentials: %w", err)
	}
	if _, err := ew.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("encrypting the credentials: %w", err)
	}
	if err := ew.Close(); err != nil {
		return fmt.Errorf("encrypting the credentials: %w", err)
	}
	return nil
}

// Decrypt decrypts a bundle with identities and returns its files (for tests and for a
// technician's tooling).
func Decrypt(r io.Reader, ids ...age.Identity) ([]File, error) {
	dr, err := age.Decrypt(r, ids...)
	if err != nil {
		return nil, fmt.Errorf("decrypting the credentials: %w", err)
	}
	var out []File
	tr := tar.NewReader(io.LimitReader(dr, 64<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the credentials: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(tr, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("reading the credentials: %w", err)
		}
		out = append(out, File{Name: h.Name, Data: b})
	}
}
