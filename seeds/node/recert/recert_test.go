package recert

import (
	"slices"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestArgsKeepContract(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want []string
	}{
		{"seed-time without defrag", Config{EtcdEndpoint: EtcdEndpoint, CryptoDirs: CryptoDirs(), CustomizationDirs: CustomizationDirs(),
			ForceExpire: true, KubeadminPasswordHash: ptr("$2a$10$x"), SummaryFileClean: "/etc/kubernetes/recert-seed-creation-summary.yaml"},
			[]string{"--force-expire", "--kubeadmin-password-hash $2a$10$x", "--summary-file-clean /etc/kubernetes/recert-seed-creation-summary.yaml"}},
		{"site", Config{EtcdEndpoint: EtcdEndpoint, ClusterRename: "store-1:edge.example:store-1-abcde",
			CNSANReplace: []string{"system:node:seed,system:node:sno-1", "seed:sno-1", "fd00::1,fd00::2"}, Hostname: "sno-1",
			IPs: []string{"10.0.0.5"}, PullSecret: `{"auths":{}}`, KubeadminPasswordHash: ptr(""),
			UseKeys: []string{"kube-apiserver-lb-signer /var/lib/snofactory/crypto/lb.key"}, UseCerts: []string{"/var/lib/snofactory/crypto/admin-ca.crt"},
			ExtendExpiration:     true,
			Proxy:                FormatProxy(ProxySettings{"http://p:3128", "", ".svc"}, ProxySettings{"http://p:3128", "", ".svc"}),
			ProxyTrustedCABundle: UserCABundleConfigMap + ":"},
			[]string{"--proxy http://p:3128||.svc|http://p:3128||.svc", "--proxy-trusted-ca-bundle user-ca-bundle:", "--cluster-rename store-1:edge.example:store-1-abcde", "--pull-secret {\"auths\":{}}", "--kubeadmin-password-hash  --use-key",
				"--use-cert /var/lib/snofactory/crypto/admin-ca.crt", "--extend-expiration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := Args(tc.c)
			if err := Check(args, nil); err != nil {
				t.Fatal(err)
			}
			line := strings.Join(args, " ")
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("lacks %q:\n%s", w, line)
				}
			}
		})
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "defines no flag"},
		{[]string{"--hostname"}, "takes a value"},
		{[]string{"--hostname", "a", "--hostname", "b"}, "given 2 times"},
		{[]string{"--force-expire", "--extend-expiration"}, "exclude each other"},
		{[]string{"--cluster-rename", "justaname"}, "NAME:DOMAIN"},
		{[]string{"--cn-san-replace", "a:b:c"}, "exactly one"},
		{[]string{"--crypto-dir", "/missing"}, "does not exist"},
		{[]string{"--proxy", "http://p:3128|http://p:3128|.svc"}, "six parts separated by '|'"},
		{[]string{"--proxy", "a|b|c|d|e|f|g"}, "found 7"},
		{[]string{"--proxy-trusted-ca-bundle", "user-ca-bundle"}, "two parts separated by ':'"},
		{[]string{"--proxy-trusted-ca-bundle", "proxy-ca:-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}, "only certificates"},
		{[]string{"--proxy-trusted-ca-bundle", "proxy-ca:not pem\n"}, "at least one certificate"},
	} {
		err := Check(tc.args, func(string) bool { return false })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestRunArgvMountsEveryPath(t *testing.T) {
	c := Config{EtcdEndpoint: EtcdEndpoint, CryptoDirs: []string{"/etc/kubernetes"}, CustomizationFiles: []string{"/etc/chrony.conf"},
		UseKeys: []string{"cn /var/lib/snofactory/crypto/k.key"}, SummaryFileClean: "/var/tmp/recert-summary.yaml", ExtendExpiration: true}
	argv := RunArgv("quay.io/recert@sha256:1", "/sysroot", c)
	for _, m := range []string{"/sysroot/etc/kubernetes:/etc/kubernetes", "/sysroot/etc/chrony.conf:/etc/chrony.conf",
		"/sysroot/var/lib/snofactory/crypto:/var/lib/snofactory/crypto", "/sysroot/var/tmp:/var/tmp"} {
		if i := slices.Index(argv, m); i < 1 || argv[i-1] != "-v" {
			t.Errorf("no mount %s in %q", m, argv)
		}
	}
	i := slices.Index(argv, "quay.io/recert@sha256:1")
	if i < 0 || !slices.Equal(argv[i+1:], Args(c)) {
		t.Errorf("recert's arguments do not follow its image: %q", argv)
	}
}

// The seed-time run forces expiry and defragments etcd together, which only the
// RECERT_CONFIG file allows: on the command line recert refuses the pair.
func TestSeedTimeRunNeedsTheConfigFile(t *testing.T) {
	c := Config{EtcdEndpoint: EtcdEndpoint, CryptoDirs: CryptoDirs(), ForceExpire: true, EtcdDefrag: true,
		KubeadminPasswordHash: ptr("$2a$10$x"), SummaryFileClean: "/etc/kubernetes/recert-seed-creation-summary.yaml"}
	if err := Check(Args(c), nil); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("the command line with --force-expire --etcd-defrag passed the contract: %v", err)
	}
	b, err := ConfigJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"force_expire": true`, `"etcd_defrag": true`, `"kubeadmin_password_hash": "$2a$10$x"`,
		`"summary_file_clean": "/etc/kubernetes/recert-seed-creation-summary.yaml"`, `"etcd_endpoint": "localhost:2379"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("config lacks %s:\n%s", w, b)
		}
	}
	if _, err := ConfigJSON(Config{ForceExpire: true, ExtendExpiration: true}); err == nil {
		t.Error("force_expire with extend_expiration was accepted")
	}
	argv := RunConfigArgv("img", "/", "/var/tmp/backup/recert_config.json", c)
	if !slices.Contains(argv, "RECERT_CONFIG=/var/tmp/backup/recert_config.json") || argv[len(argv)-1] != "img" {
		t.Errorf("argv %q", argv)
	}
}
