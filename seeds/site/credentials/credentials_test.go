package credentials_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/agessh"
	"golang.org/x/crypto/ssh"

	"github.com/snofactory/snofactory/seeds/site/credentials"
)

func TestParseRecipients(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sshLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	tests := []struct {
		name string
		keys []string
		n    int
		want string // error substring, "" for none
	}{
		{"none", nil, 0, ""},
		{"age", []string{id.Recipient().String()}, 1, ""},
		{"ssh", []string{sshLine}, 1, ""},
		{"both", []string{id.Recipient().String(), sshLine}, 2, ""},
		{"bad age", []string{"age1notakey"}, 0, `credentials recipient "age1notakey"`},
		{"bad ssh", []string{"ssh-rsa AAAAnot a key at all"}, 0, "credentials recipient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := credentials.ParseRecipients(tt.keys)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ...%s...", err, tt.want)
				}
				return
			}
			if err != nil || len(rs) != tt.n {
				t.Fatalf("ParseRecipients = %d, %v; want %d", len(rs), err, tt.n)
			}
		})
	}
}

func TestEncryptDecrypt(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	sshID, err := agessh.NewEd25519Identity(priv)
	if err != nil {
		t.Fatal(err)
	}
	rcpts, err := credentials.ParseRecipients([]string{id.Recipient().String(), string(ssh.MarshalAuthorizedKey(sshPub))})
	if err != nil {
		t.Fatal(err)
	}
	files := []credentials.File{{Name: "kubeconfig", Data: []byte("apiVersion: v1\n")}, {Name: "kubeadmin-password", Data: []byte("secret")}, {Name: "empty", Data: []byte{}}}
	var sealed bytes.Buffer
	if err := credentials.Encrypt(&sealed, rcpts, files); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed.Bytes(), []byte("secret")) {
		t.Fatal("the sealed bundle holds a file in clear")
	}
	other, _ := age.GenerateX25519Identity()
	tests := []struct {
		name string
		id   age.Identity
		ok   bool
	}{
		{"age owner", id, true},
		{"ssh owner", sshID, true},
		{"stranger", other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := credentials.Decrypt(bytes.NewReader(sealed.Bytes()), tt.id)
			if !tt.ok {
				if err == nil || !strings.Contains(err.Error(), "decrypting the credentials") {
					t.Fatalf("a stranger opened the bundle: %v, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(files) {
				t.Fatalf("Open = %d files, want %d", len(got), len(files))
			}
			for i := range files {
				if got[i].Name != files[i].Name || !bytes.Equal(got[i].Data, files[i].Data) {
					t.Errorf("file %d = %s %q, want %s %q", i, got[i].Name, got[i].Data, files[i].Name, files[i].Data)
				}
			}
		})
	}
	if err := credentials.Encrypt(&bytes.Buffer{}, nil, files); err == nil {
		t.Error("Seal with no recipient succeeded")
	}
}
