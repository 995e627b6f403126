package seal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/site/credentials"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// CredentialsFile is the credentials bundle in the seed directory.
const CredentialsFile = "credentials.age"

// writeCredentials encrypts the installer's kubeconfig and kubeadmin password (a tar) to
// the recipients, for the depot: the clear files never enter the seed directory. They open
// the factory's cluster, not a site's: the seal's recert makes the factory password
// disposable, and the site's recert re-keys the signers. A site's own admin kubeconfig and
// kubeadmin password come from `snofactory site-config create --credentials-recipient`.
func writeCredentials(ctx context.Context, in inputs, dir string, recipients []string, env *pipeline.Env) (*seed.Credentials, error) {
	rd := in.render.Out
	if rd.Kubeconfig == "" {
		return nil, nil
	}
	if len(recipients) == 0 {
		env.Log.Warn("no credentials recipients in the blueprint: the seed ships without its cluster's credentials (they stay in the build's render output)")
		return nil, nil
	}
	rcpts, err := credentials.ParseRecipients(recipients)
	if err != nil {
		return nil, err
	}
	var files []credentials.File
	for _, f := range []struct {
		name string
		path handoff.File
	}{{"kubeconfig", rd.Kubeconfig}, {"kubeadmin-password", rd.KubeadminPassword}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(in.render.Path(f.path))
		if err != nil {
			return nil, fmt.Errorf("reading the credentials: %w", err)
		}
		files = append(files, credentials.File{Name: f.name, Data: b})
	}
	var enc bytes.Buffer
	if err := credentials.Encrypt(&enc, rcpts, files); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, CredentialsFile), enc.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return seed.DescribeCredentials(ctx, dir, CredentialsFile, recipients)
}
