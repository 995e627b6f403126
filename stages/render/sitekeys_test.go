package render

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// siteKeys makes key pairs and returns render options' labels, host files and public keys.
func siteKeys(t *testing.T, names ...string) ([]string, map[string]string, []trust.PublicKey) {
	t.Helper()
	dir := t.TempDir()
	var labels []string
	host := map[string]string{}
	var keys []trust.PublicKey
	for _, n := range names {
		prefix := filepath.Join(dir, n)
		k := trusttest.Generate(t, prefix, "pass").Public
		label := "keys/" + n + ".pub"
		labels, host[label], keys = append(labels, label), trust.PubFile(prefix), append(keys, k)
	}
	return labels, host, keys
}

// A coreos node gets each site key at NodeKeysDir/FINGERPRINT.pub, readable by the hook,
// in a config the real ignition-validate accepts; render.json lists the fingerprints.
func TestSiteKeysOnCoreOSNode(t *testing.T) {
	labels, host, keys := siteKeys(t, "a", "b")
	out := renderTo(t, Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", SiteKeys: labels, HostFiles: host})
	cfgPath := filepath.Join(out, ConfigPath)
	ignitionValidate(t, cfgPath)
	cfg := parse33(t, cfgPath)
	for i, k := range keys {
		path := siteconfig.NodeKeysDir + "/" + k.Fingerprint + ".pub"
		got, ok := fileContents(t, cfg, path)
		want, _ := os.ReadFile(host[labels[i]])
		if !ok || got != string(want) {
			t.Errorf("%s = %q (present %v), want the key file %s", path, got, ok, want)
		}
		if again, err := trust.ParsePublicKey(path, []byte(got)); err != nil || again.Fingerprint != k.Fingerprint {
			t.Errorf("the node's %s does not load as the key: %v", path, err)
		}
	}
	for _, f := range cfg.Storage.Files {
		if strings.HasPrefix(f.Path, siteconfig.NodeKeysDir) && (f.Mode == nil || *f.Mode != 0o644) {
			t.Errorf("%s mode %v, want 0644", f.Path, f.Mode)
		}
	}
	var rep Report
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.SiteKeys, ",") != keys[0].Fingerprint+","+keys[1].Fingerprint {
		t.Errorf("render.json siteKeys = %v", rep.SiteKeys)
	}
}

// On OpenShift the keys come in a MachineConfig of their own, which the MCO keeps in place.
func TestSiteKeysOnOpenShiftNode(t *testing.T) {
	labels, host, keys := siteKeys(t, "a")
	o := clusterOptions(t)
	o.SiteKeys, o.HostFiles = labels, host
	out := renderTo(t, o)
	mc := string(mustRead(t, filepath.Join(out, ManifestDir, "90-master-snofactory-site-keys.yaml")))
	if !strings.Contains(mc, "kind: MachineConfig") || !strings.Contains(mc, siteconfig.NodeKeysDir+"/"+keys[0].Fingerprint+".pub") {
		t.Errorf("the site keys MachineConfig:\n%s", mc)
	}
	var rep Report
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range rep.Manifests {
		found = found || (m.Concern == siteKeysConcern && m.Kind == "MachineConfig")
	}
	if !found || len(rep.SiteKeys) != 1 || rep.SiteKeys[0] != keys[0].Fingerprint {
		t.Errorf("render.json: manifests %+v, siteKeys %v", rep.Manifests, rep.SiteKeys)
	}
}

// The keys' contents are part of the stage's key (through Stage.Files, under their labels,
// never their host paths): another key in the same file renders again; the same key does not.
func TestSiteKeysInCacheKey(t *testing.T) {
	labels, host, _ := siteKeys(t, "a")
	_, otherHost, _ := siteKeys(t, "b")
	cache := &pipeline.Cache{Dir: t.TempDir()}
	key := func() string {
		t.Helper()
		s := New(Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", SiteKeys: labels, HostFiles: host})
		plan, err := pipeline.Plan(context.Background(), &pipeline.Graph{Blueprint: "t", Stages: []pipeline.Stage{s}}, cache, pipeline.SecretSet{}, pipeline.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		kj, _ := json.Marshal(plan[0].Inputs)
		if strings.Contains(string(kj), filepath.Dir(host[labels[0]])) {
			t.Errorf("the key inputs hold a host path: %s", kj)
		}
		return plan[0].Key
	}
	first := key()
	if again := key(); again != first {
		t.Errorf("the same key file keyed %s, then %s", first, again)
	}
	b, _ := os.ReadFile(otherHost["keys/b.pub"])
	if err := os.WriteFile(host[labels[0]], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := key(); changed == first {
		t.Error("another key in the file left the render key unchanged")
	}
}

// A file that is not a public key fails the render, naming the label.
func TestSiteKeysRefused(t *testing.T) {
	labels, host, _ := siteKeys(t, "a")
	host[labels[0]] = strings.TrimSuffix(host[labels[0]], ".pub") + ".key"
	err := Render(context.Background(), Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", SiteKeys: labels, HostFiles: host},
		testSecrets(t), t.TempDir(), testLog(t))
	if err == nil || !strings.Contains(err.Error(), "site-config key keys/a.pub") || !strings.Contains(err.Error(), "never the private .key") {
		t.Errorf("Render with a private key as site key: %v", err)
	}
	err = Render(context.Background(), Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", SiteKeys: []string{"keys/x.pub"}, HostFiles: map[string]string{}},
		testSecrets(t), t.TempDir(), testLog(t))
	if err == nil || !strings.Contains(err.Error(), "siteKeys[0]") {
		t.Errorf("Render with a key label without a host path: %v", err)
	}
}
