package reconfigure

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kdomanski/iso9660"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// siteKey is a key pair for signing media in tests.
type siteKey struct {
	signer *trust.Signer
	pub    trust.PublicKey
	pem    []byte
}

func newSiteKey(t *testing.T, name string) siteKey {
	t.Helper()
	k := trusttest.New(t, name)
	return siteKey{k.Signer, k.Public, mustRead(t, k.PubFile())}
}

// install puts the keys where render puts them on a node.
func (h *harness) install(t *testing.T, keys ...siteKey) {
	t.Helper()
	dir := filepath.Join(h.root, siteconfig.NodeKeysDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := os.WriteFile(filepath.Join(dir, k.pub.Fingerprint+".pub"), k.pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// signedMedium writes the site config src (siteconfig testdata) on a medium signed by k.
func signedMedium(t *testing.T, src string, k siteKey) string {
	t.Helper()
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "site.iso")
	if err := siteconfig.WriteMedium(context.Background(), sc, p, siteconfig.MediumOptions{Signer: k.signer}); err != nil {
		t.Fatal(err)
	}
	return p
}

// isoWith writes an ISO labelled label holding files, as a hand-made medium would.
func isoWith(t *testing.T, label string, files map[string][]byte) string {
	t.Helper()
	w, err := iso9660.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cleanup()
	for name, b := range files {
		if err := w.AddFile(bytes.NewReader(b), name); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "hand.iso")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := w.WriteTo(f, label); err != nil {
		t.Fatal(err)
	}
	return p
}

// flipInFile changes one byte of the first occurrence of old in the file at p (a copy), so
// that it reads new: one byte of a medium changed after signing.
func flipInFile(t *testing.T, p, old, new string) string {
	t.Helper()
	b := mustRead(t, p)
	i := bytes.Index(b, []byte(old))
	if i < 0 || len(old) != len(new) {
		t.Fatalf("%q is not in %s", old, p)
	}
	copy(b[i:], new)
	out := filepath.Join(t.TempDir(), "changed.iso")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// tree lists every file under root with its content, to see that nothing changed.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A seed with site keys takes a medium signed by one of them and reports which.
func TestSignedMediumAccepted(t *testing.T) {
	a, b := newSiteKey(t, "a"), newSiteKey(t, "b")
	h := newHarness(t)
	h.install(t, a, b)
	h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
	res, err := Run(context.Background(), h.options(oskind.CoreOS, signedMedium(t, "dhcp.yaml", b)))
	if err != nil {
		t.Fatalf("%v\n%s", err, h.console.String())
	}
	if res.SignedBy != b.pub.Fingerprint {
		t.Errorf("signed by %q, want %s", res.SignedBy, b.pub.Fingerprint)
	}
	if m, ok := h.rep.step(StepMedium, wire.StatusOK); !ok || m.Details["signedBy"] != b.pub.Fingerprint {
		t.Errorf("medium step report %v", m.Details)
	}
	if !strings.Contains(h.console.String(), "signed by site key "+trust.ShortFingerprint(b.pub.Fingerprint)) {
		t.Errorf("the console does not say which key signed:\n%s", h.console.String())
	}
	if h.read(t, "/etc/hostname") != "edge-dhcp\n" {
		t.Error("the signed site config was not applied")
	}
}

// Every medium a seed with site keys must not trust is refused, with its reason on the
// console, in the medium step's report and in the final one; the node is left as it was:
// no command run, no file written, no progress; the hook waits for another medium until
// its timeout.
func TestMediaRefused(t *testing.T) {
	good, other := newSiteKey(t, "good"), newSiteKey(t, "other")
	signed := signedMedium(t, "dhcp.yaml", good)
	m, err := siteconfig.OpenMedium(signed)
	if err != nil {
		t.Fatal(err)
	}
	imageBased := isoWith(t, siteconfig.ImageBasedVolumeLabel, map[string][]byte{
		"cluster-configuration/manifest.json": []byte(`{"api_version":1,"hostname":"sno-0042"}`)})
	for _, tc := range []struct {
		name, medium string
		want         []string
		reason       error
	}{
		{"unsigned", medium(t, "dhcp.yaml", nil), []string{"is not signed (no site_config.sig)", "site-config create --sign-by KEY"}, trust.ErrBlobUnsigned},
		{"one byte changed", flipInFile(t, signed, "hostname: edge-dhcp", "hostname: edge-dhcq"),
			[]string{"changed after it was signed", "signature by site key " + trust.ShortFingerprint(good.pub.Fingerprint)}, trust.ErrBlobNoKey},
		{"signed by another key", signedMedium(t, "dhcp.yaml", other),
			[]string{"signed by key " + trust.ShortFingerprint(other.pub.Fingerprint), "only media signed by one of its site keys (" + trust.ShortFingerprint(good.pub.Fingerprint) + ")"}, trust.ErrBlobNoKey},
		{"signature changed", isoWith(t, siteconfig.VolumeLabel, map[string][]byte{siteconfig.ConfigFileName: m.Config,
			siteconfig.SignatureFileName: []byte("bm90IGEgc2lnbmF0dXJl")}), []string{"its signature (site_config.sig) is unusable (malformed signature"}, trust.ErrBlobSignatureMalformed},
		{"no signer named", isoWith(t, siteconfig.VolumeLabel, map[string][]byte{siteconfig.ConfigFileName: append(append([]byte{}, m.Config...), "# changed\n"...),
			siteconfig.SignatureFileName: m.Signature}), []string{"no site key of this seed", "another key made it, or the medium changed"}, trust.ErrBlobNoKey},
		{"the image-based installer's medium", imageBased, []string{"image-based installer's medium", "carries no signature"}, trust.ErrBlobUnsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.install(t, good)
			before := tree(t, h.root)
			o := h.options(oskind.CoreOS, tc.medium)
			o.MediumTimeout = 20 * time.Second
			res, err := Run(context.Background(), o)
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			if !errors.Is(err, siteconfig.ErrRefused) || !errors.Is(err, tc.reason) {
				t.Errorf("error %v does not wrap ErrRefused and %v", err, tc.reason)
			}
			refusal, ok := h.rep.step(StepMedium, wire.StatusFailed)
			final := h.rep.final()
			for _, want := range tc.want {
				for what, got := range map[string]string{"error": err.Error(), "console": h.console.String(),
					"final report": final.Details[wire.DetailError], "step report": refusal.Details[wire.DetailError]} {
					if !strings.Contains(got, want) {
						t.Errorf("%s lacks %q:\n%s", what, want, got)
					}
				}
			}
			if !ok || final.Phase != wire.PhaseReconfigured || final.Status != wire.StatusFailed {
				t.Errorf("reports: medium step failed %v, final %+v", ok, final)
			}
			if !strings.Contains(h.console.String(), "waiting for a site-config medium signed by one of this seed's site keys") ||
				!strings.Contains(err.Error(), "no other site-config medium came within 20s") {
				t.Errorf("the hook did not wait for another medium:\n%s", h.console.String())
			}
			if len(h.cmds.lines) > 0 {
				t.Errorf("commands ran on the node: %q", h.cmds.lines)
			}
			after := tree(t, h.root)
			if len(after) != len(before) {
				t.Errorf("the node changed: %d files before, %d after", len(before), len(after))
			}
			for p, c := range before {
				if after[p] != c {
					t.Errorf("%s changed", p)
				}
			}
		})
	}
}

// While the hook waits after a refusal, a correctly signed medium is taken: inserted in
// another drive, or in place of the refused one.
func TestSignedMediumAfterRefusal(t *testing.T) {
	key := newSiteKey(t, "site")
	unsigned, signed := mustRead(t, medium(t, "dhcp.yaml", nil)), mustRead(t, signedMedium(t, "dhcp.yaml", key))
	for _, tc := range []struct{ name, insertAs string }{{"another drive", "sr1"}, {"same drive", "sr0"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.install(t, key)
			devs := t.TempDir()
			os.WriteFile(filepath.Join(devs, "sr0"), unsigned, 0o644)
			h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
			h.clock.OnSleep = func(n int, _ time.Time) {
				if n == 3 { // the technician swaps in the signed medium
					os.WriteFile(filepath.Join(devs, tc.insertAs), signed, 0o644)
				}
			}
			o := h.options(oskind.CoreOS, "")
			o.MediumGlobs = []string{filepath.Join(devs, "sr*")}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("%v\n%s", err, h.console.String())
			}
			if res.Medium != filepath.Join(devs, tc.insertAs) || res.SignedBy != key.pub.Fingerprint {
				t.Errorf("took %s signed by %q", res.Medium, res.SignedBy)
			}
			c := h.console.String()
			refused, accepted := strings.Index(c, "is not signed"), strings.Index(c, "signed by site key")
			if refused < 0 || accepted < refused || strings.Count(c, "medium: failed") != 1 {
				t.Errorf("want one refusal, then the signed medium:\n%s", c)
			}
		})
	}
}

// A refused medium leaves the node to boot again: the next boot, with a signed medium,
// reconfigures it.
func TestNextBootTakesSignedMedium(t *testing.T) {
	key := newSiteKey(t, "site")
	h := newHarness(t)
	h.install(t, key)
	o := h.options(oskind.CoreOS, medium(t, "dhcp.yaml", nil))
	o.MediumTimeout = 10 * time.Second
	if _, err := Run(context.Background(), o); !errors.Is(err, trust.ErrBlobUnsigned) {
		t.Fatalf("first boot with an unsigned medium: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.root, DoneFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused medium marked the node reconfigured: %v", err)
	}
	h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
	o.Medium = signedMedium(t, "dhcp.yaml", key)
	res, err := Run(context.Background(), o)
	if err != nil || res.SignedBy != key.pub.Fingerprint {
		t.Fatalf("next boot with a signed medium: %+v, %v\n%s", res, err, h.console.String())
	}
	if strings.TrimSpace(h.read(t, DoneFile)) != res.SiteDigest {
		t.Errorf("done file %q, want %s", h.read(t, DoneFile), res.SiteDigest)
	}
}

// Without site keys a seed takes unsigned and signed media alike, as before; a site key
// that does not load refuses every medium rather than fall back to none.
func TestSiteKeysOnTheNode(t *testing.T) {
	key := newSiteKey(t, "site")
	for _, tc := range []struct {
		name   string
		keys   func(h *harness)
		medium string
		want   string // "" accepted
	}{
		{"no keys, unsigned", func(*harness) {}, medium(t, "dhcp.yaml", nil), ""},
		{"no keys, signed", func(*harness) {}, signedMedium(t, "dhcp.yaml", key), ""},
		{"empty key directory", func(h *harness) { os.MkdirAll(filepath.Join(h.root, siteconfig.NodeKeysDir), 0o755) }, medium(t, "dhcp.yaml", nil), ""},
		{"a key that does not load", func(h *harness) {
			h.install(t, key)
			os.WriteFile(filepath.Join(h.root, siteconfig.NodeKeysDir, "broken.pub"), []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), 0o644)
		}, signedMedium(t, "dhcp.yaml", key), "site key broken.pub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.keys(h)
			h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
			res, err := Run(context.Background(), h.options(oskind.CoreOS, tc.medium))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v\n%s", err, h.console.String())
			case tc.want == "" && res.SignedBy != "":
				t.Errorf("signed by %q on a seed without keys", res.SignedBy)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "no medium can be trusted")):
				t.Errorf("Run = %v, want a refusal naming %q", err, tc.want)
			case tc.want != "" && len(h.cmds.lines) > 0:
				t.Errorf("commands ran: %q", h.cmds.lines)
			}
		})
	}
}
