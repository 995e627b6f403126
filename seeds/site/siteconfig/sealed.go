package siteconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"gopkg.in/yaml.v3"
)

// NodeIdentityFile holds, on a seed's node, the age identity that opens the secrets a medium
// carries sealed (the blueprint's spec.relocation.siteConfigIdentity). Mode 0600.
const NodeIdentityFile = "/etc/snofactory/site-identity"

const (
	// sealedArmor starts spec.sealedSecrets: age's ASCII armor.
	sealedArmor = "-----BEGIN AGE ENCRYPTED FILE-----"
	// maxSealed bounds spec.sealedSecrets as the decoder bounds every string of a site
	// config; a pull secret and the retained keys, armored, are a few KiB.
	maxSealed = 256 << 10
	// maxIdentityFile bounds an identity file: one is a line of 74 bytes.
	maxIdentityFile = 64 << 10
)

// ParseIdentities reads an age identity file (AGE-SECRET-KEY-1... lines, as age-keygen
// writes it). Its errors never quote the file: it is a secret.
func ParseIdentities(b []byte) ([]age.Identity, error) {
	if len(b) > maxIdentityFile {
		return nil, fmt.Errorf("not an age identity file: larger than %d bytes", maxIdentityFile)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, errors.New("not an age identity file (AGE-SECRET-KEY-1... lines, as age-keygen writes it)")
	}
	return ids, nil
}

// ErrNothingToSeal: the site config carries none of the secrets Seal seals.
var ErrNothingToSeal = errors.New("the site config has no pull secret, kubeadmin password hash or retained signer keys to seal")

// sealed is what spec.sealedSecrets decrypts to: the secrets a lost medium must not leak.
type sealed struct {
	PullSecret            string            `yaml:"pullSecret,omitempty"`
	KubeadminPasswordHash string            `yaml:"kubeadminPasswordHash,omitempty"`
	KubeconfigCrypto      *KubeconfigCrypto `yaml:"kubeconfigCrypto,omitempty"`
}

// EncryptSecrets moves sc's secrets (the pull secret, the kubeadmin password hash and the signer keys
// recert keeps) into spec.sealedSecrets, age-encrypted to rcpts in ASCII armor; the medium
// then carries them in no other form. Only a holder of a matching identity, the seed's
// (NodeIdentityFile), opens them.
func (sc *SiteConfig) EncryptSecrets(rcpts []age.Recipient) error {
	s := &sc.Spec
	if len(rcpts) == 0 {
		return errors.New("sealing the site's secrets: no recipients")
	}
	if s.SealedSecrets != "" {
		return errors.New("the site config's secrets are sealed already (spec.sealedSecrets)")
	}
	doc := sealed{PullSecret: s.PullSecret, KubeadminPasswordHash: s.KubeadminPasswordHash, KubeconfigCrypto: s.KubeconfigCrypto}
	if doc == (sealed{}) {
		return ErrNothingToSeal
	}
	plain, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("sealing the site's secrets: %w", err)
	}
	var out bytes.Buffer
	if err := armorEncrypt(&out, plain, rcpts...); err != nil {
		return fmt.Errorf("sealing the site's secrets: %w", err)
	}
	s.SealedSecrets = out.String()
	s.PullSecret, s.PullSecretFile, s.KubeadminPasswordHash, s.KubeconfigCrypto = "", "", "", nil
	return nil
}

// armorEncrypt writes plain age-encrypted to rcpts, in ASCII armor.
func armorEncrypt(out io.Writer, plain []byte, rcpts ...age.Recipient) error {
	aw := armor.NewWriter(out)
	w, err := age.Encrypt(aw, rcpts...)
	if err != nil {
		return err
	}
	if _, err := w.Write(plain); err != nil {
		return err
	}
	return errors.Join(w.Close(), aw.Close())
}

// DecryptSecrets opens spec.sealedSecrets with ids and puts the secrets back in place, checked as
// strictly as secrets given in clear; no message quotes them.
func (sc *SiteConfig) DecryptSecrets(ids ...age.Identity) error {
	s := &sc.Spec
	if s.SealedSecrets == "" {
		return nil
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(s.SealedSecrets)), ids...)
	if err != nil {
		return fmt.Errorf("opening the sealed secrets (spec.sealedSecrets): %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, maxSealed+1))
	if err != nil {
		return fmt.Errorf("opening the sealed secrets (spec.sealedSecrets): %w", err)
	}
	if len(plain) > maxSealed {
		return fmt.Errorf("the sealed secrets (spec.sealedSecrets) open to more than %d bytes", maxSealed)
	}
	var doc sealed
	dec := yaml.NewDecoder(bytes.NewReader(plain))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		// yaml's messages can quote the input: say only that it is not ours.
		return errors.New("the sealed secrets (spec.sealedSecrets) open to something other than the secrets site-config create seals")
	}
	if s.PullSecret != "" || s.KubeadminPasswordHash != "" || s.KubeconfigCrypto != nil {
		return errors.New("spec.sealedSecrets comes with secrets in clear as well; a medium carries them one way")
	}
	c := &checker{}
	probe := Spec{PullSecret: doc.PullSecret, KubeadminPasswordHash: doc.KubeadminPasswordHash, KubeconfigCrypto: doc.KubeconfigCrypto}
	c.pullSecret(&probe)
	c.identity(&probe)
	if c.Len() > 0 {
		msgs := make([]string, c.Len())
		for i, e := range c.Errs {
			msgs[i] = e.Path + ": " + e.Message
		}
		return fmt.Errorf("the sealed secrets (spec.sealedSecrets) are not valid: %s", strings.Join(msgs, "; "))
	}
	s.PullSecret, s.KubeadminPasswordHash, s.KubeconfigCrypto = doc.PullSecret, doc.KubeadminPasswordHash, doc.KubeconfigCrypto
	s.SealedSecrets = ""
	return nil
}

// sealedSecrets checks spec.sealedSecrets' form; only the seed's identity opens it.
func (c *checker) sealedSecrets(s *Spec) {
	if s.SealedSecrets == "" {
		return
	}
	const p = "spec.sealedSecrets"
	switch {
	case len(s.SealedSecrets) > maxSealed:
		c.Add(p, fmt.Sprintf("longer than %d bytes", maxSealed), "")
	case !strings.HasPrefix(strings.TrimSpace(s.SealedSecrets), sealedArmor):
		c.Add(p, "is not age-encrypted secrets in ASCII armor", "site-config create --seal-to RECIPIENT seals a site's secrets")
	}
	if s.PullSecret != "" || s.PullSecretFile != "" || s.KubeadminPasswordHash != "" || s.KubeconfigCrypto != nil {
		c.Add(p, "comes with secrets in clear as well (pullSecret, kubeadminPasswordHash or kubeconfigCrypto)", "seal them all, or none")
	}
}

// IdentityHint is how a node's missing or wrong identity is explained.
const IdentityHint = "the seed opens sealed secrets with the identity its blueprint names in spec.relocation.siteConfigIdentity; seal them to its recipient (age-keygen -y IDENTITY)"
