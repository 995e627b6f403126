package seal

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/agessh"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/seed"
)

// CredentialsFile is the credentials bundle in the seed directory.
const CredentialsFile = "credentials.age"

// writeCredentials encrypts the installer's kubeconfig and kubeadmin password (a tar) to
// the recipients, so the site receives the credentials of its cluster and nobody on the
// way can read them. The clear files never enter the seed directory.
func writeCredentials(ctx context.Context, in inputs, dir string, recipients []string, env *pipeline.Env) (*seed.Credentials, error) {
	rd := in.render.Out
	if rd.Kubeconfig == "" {
		return nil, nil
	}
	if len(recipients) == 0 {
		env.Log.Warn("no credentials recipients in the blueprint: the seed ships without its cluster's credentials (they stay in the build's render output)")
		return nil, nil
	}
	rcpts, err := parseRecipients(recipients)
	if err != nil {
		return nil, err
	}
	files := map[string]string{"kubeconfig": in.render.Path(rd.Kubeconfig)}
	if rd.KubeadminPassword != "" {
		files["kubeadmin-password"] = in.render.Path(rd.KubeadminPassword)
	}
	bundle, err := tarFiles(files)
	if err != nil {
		return nil, err
	}
	var enc bytes.Buffer
	w, err := age.Encrypt(&enc, rcpts...)
	if err != nil {
		return nil, fmt.Errorf("encrypting the credentials: %w", err)
	}
	if _, err := w.Write(bundle); err != nil {
		return nil, fmt.Errorf("encrypting the credentials: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypting the credentials: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CredentialsFile), enc.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return seed.DescribeCredentials(ctx, dir, CredentialsFile, recipients)
}

// parseRecipients accepts age X25519 recipients (age1...) and SSH public keys.
func parseRecipients(keys []string) ([]age.Recipient, error) {
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

// tarFiles is a tar of the named files, with fixed owners and times, 0600.
func tarFiles(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"kubeconfig", "kubeadmin-password"} {
		p, ok := files[name]
		if !ok {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading the credentials: %w", err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
