package kube

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/snofactory/snofactory/pipeline/tekton"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// DemoRepo is where the demo blueprint pushes its seed in the registry SetUpDemo runs.
const DemoRepo = "demo/seed:1.0"

// Demo is the demo blueprint ready to build through pipeline/tekton's Pipeline on a
// cluster: the snofactory image loaded, a registry with basic auth on the cluster's
// bridge, the blueprint on the claim "build", the Secrets and the Tasks and Pipeline.
type Demo struct {
	c        *Cluster
	reg      *registry.Registry
	iso      string // the conformance ISO the blueprint installs
	bin      string // the snofactory binary the image carries, run on the host
	ref      string // the snofactory image
	keys     string // the depot's key pair (depot.key, depot.pub, pass), another's, auth.json
	out      string // the output volume's directory
	src      string // the source volume's directory
	wantSeed string // where the blueprint pushes the seed
}

// SetUpDemo builds and loads the image, starts the registry, fills the volumes, makes the
// Secrets and creates the Tasks and the Pipeline; dir is its scratch space. It hands the
// registry to started as soon as it runs: from then on stopping it is the caller's,
// also when SetUpDemo fails.
func SetUpDemo(ctx context.Context, c *Cluster, dir string, started func(*registry.Registry)) (*Demo, error) {
	iso, err := conformance.Cached(ctx, nil)
	if err != nil {
		return nil, err
	}
	d := &Demo{c: c, iso: iso, bin: ImageBinary(dir), keys: filepath.Join(dir, "keys")}
	var archive string
	if d.ref, archive, err = SnofactoryImage(ctx, dir); err != nil {
		return nil, err
	}
	if err := c.ImportArchive(ctx, archive, SnofactoryRepo); err != nil {
		return nil, err
	}
	password, err := randomHex(12)
	if err != nil {
		return nil, err
	}
	// On the bridge, the only address besides the apiserver's that pods reach.
	if d.reg, err = registry.Start(ctx, registry.Options{Host: c.NodeIP, Username: "depot", Password: password}); err != nil {
		return nil, fmt.Errorf("starting the demo's registry: %w", err)
	}
	started(d.reg)
	d.wantSeed = d.reg.Ref(DemoRepo)
	// One claim for the three workspaces: Tekton's default coschedule (workspaces) refuses
	// a TaskRun that binds two claims (pkg/workspace/validate.go, ValidateOnlyOnePVCIsUsed).
	vol, err := c.Volume(ctx, "default", "build", "source", "cache", "output")
	if err != nil {
		return nil, err
	}
	d.out, d.src = filepath.Join(vol, "output"), filepath.Join(vol, "source")
	if _, err := d.WriteSource(d.src, d.wantSeed); err != nil {
		return nil, err
	}
	if err := d.makeSecrets(ctx); err != nil {
		return nil, err
	}
	for _, task := range []string{"snofactory-prepare", "snofactory-factory-vm", "snofactory-publish"} {
		if err := c.ApplyFile(ctx, Tasks, tekton.TasksDir+"/"+task+".yaml"); err != nil {
			return nil, err
		}
	}
	return d, c.ApplyFile(ctx, Pipelines, tekton.PipelineFile)
}

// WriteSource fills dir as the source workspace: the demo blueprint and its fragments
// pushing to push, without its extra image (pods reach nothing off the bridge), and the
// conformance ISO beside them. It returns the blueprint's path.
func (d *Demo) WriteSource(dir, push string) (string, error) {
	return fillSource(dir, d.iso, map[string]string{"push: " + testbin.DemoRegistry + "/" + DemoRepo: "push: " + push})
}

// fillSource writes the demo and the ISO into dir; edits are more of CopyDemo's
// replacements.
func fillSource(dir, iso string, edits map[string]string) (string, error) {
	if err := copyFile(iso, filepath.Join(dir, "conformance.iso")); err != nil {
		return "", fmt.Errorf("copying the conformance ISO into the source: %w", err)
	}
	all := map[string]string{
		testbin.DemoISOLine: "path: ../conformance.iso",
		"  extraImages:\n    - " + testbin.DemoImage + "\n": "",
	}
	maps.Copy(all, edits)
	return testbin.CopyDemo(dir, all)
}

// Bin is the snofactory binary the image carries, for the host to run the same code.
func (d *Demo) Bin() string { return d.bin }

// Registry is the registry the demo pushes to.
func (d *Demo) Registry() *registry.Registry { return d.reg }

// SigningFlags are snofactory build's flags that sign with the depot's key, as the
// publish task signs with the Secret holding it.
func (d *Demo) SigningFlags() []string {
	return []string{"--sign-by", filepath.Join(d.keys, "depot.key"), "--passphrase-file", filepath.Join(d.keys, "pass")}
}

// makeSecrets generates the depot's key pair and makes the two Secrets the PipelineRun
// binds: the registry's credentials as a kubernetes.io/dockerconfigjson Secret and the
// signing key under the names the publish task reads.
func (d *Demo) makeSecrets(ctx context.Context) error {
	phrase, err := randomHex(8)
	if err != nil {
		return err
	}
	pass := filepath.Join(d.keys, "pass")
	if err := os.MkdirAll(d.keys, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(pass, []byte("depot-"+phrase+"\n"), 0o600); err != nil {
		return err
	}
	for _, name := range []string{"depot", "other"} {
		if out, err := exec.CommandContext(ctx, d.bin, "keys", "generate", "--passphrase-file", pass, filepath.Join(d.keys, name)).CombinedOutput(); err != nil {
			return fmt.Errorf("keys generate: %w: %s", err, out)
		}
	}
	// The same credentials for the host's pull.
	auth, err := WriteAuth(filepath.Join(d.keys, "auth.json"), d.reg)
	if err != nil {
		return err
	}
	key, _ := os.ReadFile(filepath.Join(d.keys, "depot.key"))
	passphrase, _ := os.ReadFile(pass)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "seed-push"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: auth}},
		{ObjectMeta: metav1.ObjectMeta{Name: "depot-signing"}, Data: map[string][]byte{"cosign.key": key, "cosign.password": passphrase}},
	} {
		if _, err := d.c.Client.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s: %w", s.Name, err)
		}
	}
	return nil
}

// WriteAuth writes a docker config file with reg's credentials to path and returns it.
func WriteAuth(path string, reg *registry.Registry) ([]byte, error) {
	user, password := reg.Credentials()
	auth, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Addr(): map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	if err != nil {
		return nil, err
	}
	return auth, os.WriteFile(path, auth, 0o600)
}

// Run starts a PipelineRun of the demo named name with its own output directory, waits
// for it to succeed and returns its results; a failure names each failed step's log.
func (d *Demo) Run(ctx context.Context, name string, logf func(string, ...any)) (map[string]string, error) {
	pr, err := d.c.RunToEnd(ctx, PipelineRuns, 30*time.Minute, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: `+name+`, namespace: default}
spec:
  pipelineRef: {name: snofactory}
  params:
  - {name: BLUEPRINT, value: blueprints/demo.yaml}
  - {name: OUTPUT_DIR, value: `+name+`}
  - {name: SNOFACTORY_IMAGE, value: `+d.ref+`}
  - {name: PROGRESS, value: json}
  workspaces:
  - {name: source, persistentVolumeClaim: {claimName: build}, subPath: source}
  - {name: cache, persistentVolumeClaim: {claimName: build}, subPath: cache}
  - {name: output, persistentVolumeClaim: {claimName: build}, subPath: output}
  - {name: dockerconfig, secret: {secretName: seed-push}}
  - {name: signing-key, secret: {secretName: depot-signing}}
`, logf)
	if err != nil {
		return nil, err
	}
	if got := conditionStatus(pr, "Succeeded"); got != "True" {
		return nil, fmt.Errorf("PipelineRun %s did not succeed: %v%s", name, pr.Object["status"], d.failedSteps(ctx, name))
	}
	results := map[string]string{}
	list, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	for _, r := range list {
		m, _ := r.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		results[n] = v
	}
	return results, nil
}

// failedSteps is the step log of each failed TaskRun of a PipelineRun.
func (d *Demo) failedSteps(ctx context.Context, pipelineRun string) string {
	list, err := d.c.Dynamic.Resource(TaskRuns).Namespace("default").List(ctx,
		metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + pipelineRun})
	if err != nil {
		return "\n(listing its TaskRuns: " + err.Error() + ")"
	}
	var b strings.Builder
	for i := range list.Items {
		if tr := &list.Items[i]; conditionStatus(tr, "Succeeded") != "True" {
			fmt.Fprintf(&b, "\n--- TaskRun %s: %v\n%s", tr.GetName(), tr.Object["status"], d.c.StepLog(ctx, tr, "step-build"))
		}
	}
	return b.String()
}

// ApplyFile creates the object in one of pipeline/tekton's files (as gvr) in the default
// namespace, exactly as it ships.
func (c *Cluster) ApplyFile(ctx context.Context, gvr schema.GroupVersionResource, file string) error {
	b, err := fs.ReadFile(tekton.Files(), file)
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := c.Dynamic.Resource(gvr).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s from %s: %w", u.GetKind(), file, err)
	}
	return nil
}

// RunToEnd creates a TaskRun or PipelineRun (gvr) and watches it until it has finished or
// limit (a ceiling for a loaded machine) has passed. An error carries the servers' logs.
func (c *Cluster) RunToEnd(ctx context.Context, gvr schema.GroupVersionResource, limit time.Duration, doc string, logf func(string, ...any)) (*unstructured.Unstructured, error) {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	began := time.Now()
	if _, err := c.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	done, err := c.WaitObject(ctx, gvr, u.GetNamespace(), u.GetName(), func(o *unstructured.Unstructured) bool {
		s := conditionStatus(o, "Succeeded")
		return s == "True" || s == "False"
	})
	if err != nil {
		return nil, c.withLogs(fmt.Errorf("waiting for %s %s to finish: %w", u.GetKind(), u.GetName(), err))
	}
	logf("%s %s finished in %s", u.GetKind(), u.GetName(), time.Since(began).Round(time.Second))
	return done, nil
}

// StepLog is the log of a TaskRun's step container, for a failure's message.
func (c *Cluster) StepLog(ctx context.Context, tr *unstructured.Unstructured, container string) string {
	pod, _, _ := unstructured.NestedString(tr.Object, "status", "podName")
	if pod == "" {
		return "(no pod)"
	}
	rc, err := c.Client.CoreV1().Pods(tr.GetNamespace()).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return strings.TrimSpace(string(b))
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
