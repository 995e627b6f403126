package tekton_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/yaml"

	"github.com/snofactory/snofactory/pipeline/tekton"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/stages/publish"
	"github.com/snofactory/snofactory/test/testbin"
)

// wantTasks is what each task file must be: the last stage its build runs and the results
// it reports.
var wantTasks = map[string]struct {
	until   string
	results []string
}{
	"tasks/snofactory-prepare.yaml":    {until: "precache"},
	"tasks/snofactory-factory-vm.yaml": {until: "seal"},
	"tasks/snofactory-publish.yaml":    {until: "publish", results: []string{"IMAGE_URL", "IMAGE_DIGEST"}},
}

// paramFlags maps the task params that are CLI flags to their flag; the other params are
// the blueprint argument and the step image. A new param must be added to one of them.
var (
	paramFlags = map[string]string{
		"PROGRESS":      "--progress",
		"LOCKED":        "--locked",
		"KEEP_ON_ERROR": "--keep-on-error",
		"OUTPUT_DIR":    "--output-dir",
	}
	nonFlagParams = []string{"BLUEPRINT", "SNOFACTORY_IMAGE"}
)

var (
	digestPinned = regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)
	// tektonVar is a Tekton variable: $(params.X), $(workspaces.x.path), $(results.X.path)...
	tektonVar = regexp.MustCompile(`\$\((params|workspaces|results|context|tasks|steps|step)[.\[]`)
	scriptCmd = regexp.MustCompile(`(?m)^\s*(?:exec\s+)?snofactory((?:\s+[a-z][a-z-]*)+)`)
	flagRef   = regexp.MustCompile(`(?:^|[\s"'])(--[a-z][a-z0-9-]*)`)
	helpFlag  = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)`)
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(tekton.Files(), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func taskFiles(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(tekton.Files(), tekton.TasksDir+"/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no task files embedded")
	}
	return names
}

// validateCtx is the context the Tekton webhook validates a new object in, with the
// default feature flags (stable API fields only).
func validateCtx() context.Context { return apis.WithinCreate(context.Background()) }

// decodeTask decodes strictly (unknown fields are errors), defaults and validates as the
// Tekton webhook does, then checks this project's rules.
func decodeTask(name string, data []byte) (*v1.Task, error) {
	var task v1.Task
	if err := yaml.UnmarshalStrict(data, &task); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if task.APIVersion != "tekton.dev/v1" || task.Kind != "Task" {
		return nil, fmt.Errorf("%s %s: want tekton.dev/v1 Task", task.APIVersion, task.Kind)
	}
	if want := strings.TrimSuffix(path.Base(name), ".yaml"); task.Name != want {
		return nil, fmt.Errorf("task %q is in %s: want the file named after the task", task.Name, name)
	}
	task.SetDefaults(validateCtx())
	if err := task.Validate(validateCtx()); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	if err := catalogMetadata(task.ObjectMeta.Labels, task.ObjectMeta.Annotations); err != nil {
		return nil, err
	}
	return &task, taskPolicy(name, data, &task)
}

func decodePipeline(data []byte) (*v1.Pipeline, error) {
	var p v1.Pipeline
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if p.APIVersion != "tekton.dev/v1" || p.Kind != "Pipeline" {
		return nil, fmt.Errorf("%s %s: want tekton.dev/v1 Pipeline", p.APIVersion, p.Kind)
	}
	p.SetDefaults(validateCtx())
	if err := p.Validate(validateCtx()); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	return &p, catalogMetadata(p.ObjectMeta.Labels, p.ObjectMeta.Annotations)
}

// catalogMetadata checks the Tekton catalog's label and annotations.
func catalogMetadata(labels, annotations map[string]string) error {
	var errs []error
	if v := labels["app.kubernetes.io/version"]; !regexp.MustCompile(`^\d+\.\d+(\.\d+)?$`).MatchString(v) {
		errs = append(errs, fmt.Errorf("label app.kubernetes.io/version %q: want a version", v))
	}
	if v := annotations["tekton.dev/pipelines.minVersion"]; !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		errs = append(errs, fmt.Errorf("annotation tekton.dev/pipelines.minVersion %q: want a version", v))
	}
	for _, a := range []string{"tekton.dev/categories", "tekton.dev/tags", "tekton.dev/displayName", "tekton.dev/platforms"} {
		if strings.TrimSpace(annotations[a]) == "" {
			errs = append(errs, fmt.Errorf("annotation %s is missing", a))
		}
	}
	return errors.Join(errs...)
}

// taskPolicy is this project's rules for a task: params reach scripts only through env,
// images are pinned by digest, nothing runs privileged, no step requires a device (the
// PipelineRun adds KVM where the cluster has it: a Task's device limit cannot be removed,
// and leaves its pod Pending on a cluster without the device plugin).
func taskPolicy(name string, data []byte, task *v1.Task) error {
	want, ok := wantTasks[name]
	if !ok {
		return fmt.Errorf("%s is not a known task file: add it to wantTasks", name)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if regexp.MustCompile(`(?m)^\s*privileged:\s*true`).Match(data) {
		fail("privileged: true: request devices as resources instead")
	}
	if len(task.Spec.Sidecars) > 0 {
		fail("sidecars are not checked by these rules: add them to the test first")
	}
	defaults := map[string]string{}
	for _, p := range task.Spec.Params {
		if p.Default != nil {
			defaults[p.Name] = p.Default.StringVal
		}
		if _, isFlag := paramFlags[p.Name]; !isFlag && !slices.Contains(nonFlagParams, p.Name) {
			fail("param %s is neither a CLI flag (paramFlags) nor a known argument (nonFlagParams)", p.Name)
		}
	}
	declared := map[string]v1.WorkspaceDeclaration{}
	for _, w := range task.Spec.Workspaces {
		declared[w.Name] = w
	}
	for _, w := range []string{"source", "cache", "output", "dockerconfig"} {
		if _, ok := declared[w]; !ok {
			fail("workspace %s is missing", w)
		}
	}
	if !declared["dockerconfig"].Optional {
		fail("workspace dockerconfig must be optional: public registries need no credentials")
	}
	var results []string
	for _, r := range task.Spec.Results {
		results = append(results, r.Name)
	}
	if !slices.Equal(results, want.results) {
		fail("results %v, want %v", results, want.results)
	}
	steps, err := v1.MergeStepsWithStepTemplate(task.Spec.StepTemplate, task.Spec.Steps)
	if err != nil {
		return err
	}
	for _, s := range steps {
		img := s.Image
		if img == "$(params.SNOFACTORY_IMAGE)" {
			img = defaults["SNOFACTORY_IMAGE"]
		}
		if !digestPinned.MatchString(img) {
			fail("step %s: image %q is not pinned by digest", s.Name, img)
		}
		for field, v := range map[string]string{"script": s.Script, "workingDir": s.WorkingDir,
			"args": strings.Join(s.Args, " "), "command": strings.Join(s.Command, " ")} {
			// workingDir may name a workspace path: it is not a script, nothing is interpreted.
			if (field != "workingDir" && tektonVar.MatchString(v)) || strings.Contains(v, "$(params") {
				fail("step %s: %s uses a Tekton variable: pass it through env", s.Name, field)
			}
		}
		sc := s.SecurityContext
		switch {
		case sc == nil:
			fail("step %s: no securityContext", s.Name)
		case sc.Privileged != nil && *sc.Privileged:
			fail("step %s: privileged", s.Name)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			fail("step %s: runAsNonRoot is not set", s.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			fail("step %s: allowPrivilegeEscalation is not false", s.Name)
		}
		for r := range s.ComputeResources.Limits {
			if strings.Contains(string(r), "/") { // an extended resource: a device plugin's
				fail("step %s: limit %s: a pod on a node without that device never starts; request it in the PipelineRun's taskRunSpecs", s.Name, r)
			}
		}
		if !strings.Contains(s.Script, "--until "+want.until+" ") {
			fail("step %s: the build does not stop after %s", s.Name, want.until)
		}
	}
	return errors.Join(errs...)
}

func TestEveryFileIsEmbedded(t *testing.T) {
	var onDisk []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			onDisk = append(onDisk, filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	embedded := append(taskFiles(t), tekton.PipelineFile)
	slices.Sort(onDisk)
	slices.Sort(embedded)
	if !slices.Equal(onDisk, embedded) {
		t.Errorf("YAML files on disk %v, embedded %v", onDisk, embedded)
	}
	if len(embedded) != len(wantTasks)+1 {
		t.Errorf("embedded %v, want the pipeline and the tasks of wantTasks", embedded)
	}
}

func TestTasks(t *testing.T) {
	for _, name := range taskFiles(t) {
		t.Run(path.Base(name), func(t *testing.T) {
			if _, err := decodeTask(name, readFile(t, name)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTaskRulesCatch breaks a good task one way at a time: each must be refused, so the
// checks above can fail.
func TestTaskRulesCatch(t *testing.T) {
	const prepare, vm = "tasks/snofactory-prepare.yaml", "tasks/snofactory-factory-vm.yaml"
	for _, tc := range []struct {
		name, file, old, new, wantErr string
	}{
		{"unknown step field", prepare, "workingDir:", "workdir:", "unknown field"},
		{"unknown spec field", prepare, "  stepTemplate:", "  stepTemplates:", "unknown field"},
		{"undeclared param", prepare, "$(params.PROGRESS)", "$(params.PROGRES)", "non-existent variable"},
		{"param in script", prepare, `--progress "$PROGRESS"`, `--progress "$(params.PROGRESS)"`, "pass it through env"},
		{"workspace in script", prepare, `--cache-dir "$CACHE_DIR"`, `--cache-dir "$(workspaces.cache.path)"`, "pass it through env"},
		{"image by tag", prepare, "image: $(params.SNOFACTORY_IMAGE)", "image: ghcr.io/snofactory/snofactory:latest", "not pinned by digest"},
		{"default by tag", prepare, "snofactory@sha256:0000000000000000000000000000000000000000000000000000000000000000", "snofactory:0.1", "not pinned by digest"},
		{"privileged", vm, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: false\n      privileged: true", "privileged"},
		{"root", prepare, "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"},
		{"kvm required", vm, "      workingDir:", "      computeResources: {limits: {devices.kubevirt.io/kvm: \"1\"}}\n      workingDir:", "limit devices.kubevirt.io/kvm"},
		{"wrong stage", vm, "--until seal", "--until precache", "does not stop after seal"},
		{"required dockerconfig", prepare, "      optional: true\n", "", "dockerconfig must be optional"},
		{"missing annotation", prepare, "    tekton.dev/platforms:", "    example.com/platforms:", "tekton.dev/platforms is missing"},
		{"unsynced param", vm, "KEEP_ON_ERROR", "KEEP_FAILED", "KEEP_FAILED is neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := string(readFile(t, tc.file))
			if !strings.Contains(good, tc.old) {
				t.Fatalf("%s no longer contains %q", tc.file, tc.old)
			}
			_, err := decodeTask(tc.file, []byte(strings.ReplaceAll(good, tc.old, tc.new)))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// pipelineProblems checks the Pipeline runs this directory's tasks in order, hands every
// param and workspace down unchanged, and reports the publish task's results.
func pipelineProblems(p *v1.Pipeline, tasks map[string]*v1.Task) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	pipelineDefaults := map[string]string{}
	for _, pp := range p.Spec.Params {
		if pp.Default != nil {
			pipelineDefaults[pp.Name] = pp.Default.StringVal
		}
	}
	used := map[string]bool{}
	for _, pt := range p.Spec.Tasks {
		task := tasks[pt.TaskRef.Name]
		if task == nil {
			fail("pipeline task %s: %s is not one of this directory's tasks", pt.Name, pt.TaskRef.Name)
			continue
		}
		used[task.Name] = true
		passed := map[string]string{}
		for _, param := range pt.Params {
			passed[param.Name] = param.Value.StringVal
		}
		// Every param is handed down unchanged, so one PipelineRun param sets it everywhere;
		// the defaults must agree, or a Task run alone would build something else.
		for _, tp := range task.Spec.Params {
			if got, want := passed[tp.Name], "$(params."+tp.Name+")"; got != want {
				fail("pipeline task %s: param %s = %q, want %q", pt.Name, tp.Name, got, want)
			}
			if pipelineDefaults[tp.Name] != tp.Default.StringVal {
				fail("param %s: pipeline default %q, task %s default %q", tp.Name, pipelineDefaults[tp.Name], task.Name, tp.Default.StringVal)
			}
		}
		bound := map[string]string{}
		for _, w := range pt.Workspaces {
			bound[w.Name] = w.Workspace
		}
		for _, w := range task.Spec.Workspaces {
			if bound[w.Name] != w.Name {
				fail("pipeline task %s: workspace %s bound to %q, want the pipeline's %s", pt.Name, w.Name, bound[w.Name], w.Name)
			}
		}
	}
	if len(used) != len(tasks) {
		fail("the pipeline runs %d of the %d tasks", len(used), len(tasks))
	}
	if order := runOrder(p); !slices.Equal(order, []string{"prepare", "factory-vm", "publish"}) {
		fail("tasks run in the order %v, want prepare, factory-vm, publish", order)
	}
	var results []string
	for _, r := range p.Spec.Results {
		results = append(results, r.Name+"="+r.Value.StringVal)
	}
	if want := []string{"IMAGE_URL=$(tasks.publish.results.IMAGE_URL)", "IMAGE_DIGEST=$(tasks.publish.results.IMAGE_DIGEST)"}; !slices.Equal(results, want) {
		fail("pipeline results %v, want %v", results, want)
	}
	return errors.Join(errs...)
}

func TestPipeline(t *testing.T) {
	tasks := map[string]*v1.Task{}
	for _, name := range taskFiles(t) {
		task, err := decodeTask(name, readFile(t, name))
		if err != nil {
			t.Fatal(err)
		}
		tasks[task.Name] = task
	}
	for _, tc := range []struct {
		name, old, new, wantErr string
	}{
		{name: "as committed"},
		{"unknown field", "  tasks:", "  task:", "unknown field"},
		{"undeclared param", "value: $(params.LOCKED)", "value: $(params.LOCK)", "non-existent variable"},
		{"param not handed down", "        - name: KEEP_ON_ERROR\n          value: $(params.KEEP_ON_ERROR)\n", "", "param KEEP_ON_ERROR = \"\""},
		{"defaults differ", "default: plain", "default: json", "pipeline default \"json\""},
		{"publish in parallel", "runAfter: [factory-vm]", "runAfter: [prepare]", "run in the order []"},
		{"no digest result", "    - name: IMAGE_DIGEST\n      description: The digest of the seed's artifact manifest.\n      value: $(tasks.publish.results.IMAGE_DIGEST)\n", "", "pipeline results"},
		{"missing catalog label", "app.kubernetes.io/version", "app.kubernetes.io/release", "app.kubernetes.io/version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := string(readFile(t, tekton.PipelineFile))
			if !strings.Contains(good, tc.old) {
				t.Fatalf("%s no longer contains %q", tekton.PipelineFile, tc.old)
			}
			p, err := decodePipeline([]byte(strings.ReplaceAll(good, tc.old, tc.new)))
			if err == nil {
				err = pipelineProblems(p, tasks)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Error(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// runOrder follows runAfter from the task that runs first; it is empty if the tasks do not
// form one chain.
func runOrder(p *v1.Pipeline) []string {
	next := map[string]string{}
	var first []string
	for _, pt := range p.Spec.Tasks {
		switch len(pt.RunAfter) {
		case 0:
			first = append(first, pt.Name)
		case 1:
			next[pt.RunAfter[0]] = pt.Name
		default:
			return nil
		}
	}
	if len(first) != 1 || len(next) != len(p.Spec.Tasks)-1 {
		return nil
	}
	order := first
	for n, ok := next[first[0]]; ok; n, ok = next[n] {
		order = append(order, n)
	}
	return order
}

// flagProblems checks a task against the CLI: each step runs one snofactory command, every
// flag its script passes is a flag of that command, and every param that maps to a flag is
// passed. help returns the command's --help output.
func flagProblems(task *v1.Task, help func(cmd []string) (string, error)) error {
	var errs []error
	for _, s := range task.Spec.Steps {
		cmds := scriptCmd.FindAllStringSubmatch(s.Script, -1)
		if len(cmds) != 1 {
			errs = append(errs, fmt.Errorf("step %s runs snofactory %d times: want once, so its flags belong to one command", s.Name, len(cmds)))
			continue
		}
		cmd := strings.Fields(cmds[0][1])
		out, err := help(cmd)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for _, m := range helpFlag.FindAllStringSubmatch(out, -1) {
			known[m[1]] = true
		}
		if !known["--help"] || len(known) < 3 {
			return fmt.Errorf("found no flags in snofactory %s --help:\n%s", cmds[0][1], out)
		}
		passed := map[string]bool{}
		for _, m := range flagRef.FindAllStringSubmatch(s.Script, -1) {
			passed[m[1]] = true
			if !known[m[1]] {
				errs = append(errs, fmt.Errorf("step %s passes %s, which snofactory%s does not have", s.Name, m[1], cmds[0][1]))
			}
		}
		for _, p := range task.Spec.Params {
			if flag, ok := paramFlags[p.Name]; ok && !passed[flag] {
				errs = append(errs, fmt.Errorf("step %s: param %s maps to %s, which the script does not pass", s.Name, p.Name, flag))
			}
		}
	}
	return errors.Join(errs...)
}

// TestFlagsExist checks every task against the real binary's help, then breaks the tasks
// to see the check fail.
func TestFlagsExist(t *testing.T) {
	bin, err := testbin.Binary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	help := func(cmd []string) (string, error) {
		out, err := exec.Command(bin, append(cmd, "--help")...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("snofactory %s --help: %v\n%s", strings.Join(cmd, " "), err, out)
		}
		return string(out), nil
	}
	const vm = "tasks/snofactory-factory-vm.yaml"
	for _, tc := range []struct {
		name, file, old, new, wantErr string
	}{
		{name: "prepare", file: "tasks/snofactory-prepare.yaml"},
		{name: "factory-vm", file: vm},
		{name: "publish", file: "tasks/snofactory-publish.yaml"},
		{"misspelt flag", vm, "--until seal", "--untill seal", "passes --untill, which snofactory build does not have"},
		{"param not passed", vm, `set -- "$@" --keep-on-error`, `set -- "$@"`, "param KEEP_ON_ERROR maps to --keep-on-error"},
		{"flag of another command", vm, `--progress "$PROGRESS"`, `--progress "$PROGRESS" --chunk-size 1MiB`, "passes --chunk-size"},
		{"two commands", vm, "snofactory build", "snofactory plan \"$BLUEPRINT\"\n        snofactory build", "runs snofactory 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := string(readFile(t, tc.file))
			if !strings.Contains(good, tc.old) {
				t.Fatalf("%s no longer contains %q", tc.file, tc.old)
			}
			// Decoded without the other checks: a broken script may still be a valid task.
			var task v1.Task
			if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(good, tc.old, tc.new)), &task); err != nil {
				t.Fatal(err)
			}
			err := flagProblems(&task, help)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Error(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// fakeSnofactory records its arguments and the credentials file it was given.
const fakeSnofactory = `#!/bin/sh
printf '%s\n' "$@" > "$FAKE_ARGS"
printf '%s' "${REGISTRY_AUTH_FILE:-}" > "$FAKE_AUTH"
`

// TestScripts runs each task's script as Tekton would, with its env substituted and a fake
// snofactory on PATH: params arrive as flags, credentials are found, results are written.
func TestScripts(t *testing.T) {
	registry := ociseed.Result{Location: "registry.example.com/depot/seed:1.0", Digest: digest.Digest("sha256:" + strings.Repeat("ab", 32))}
	layout := ociseed.Result{Location: "oci:/workspace/source/out:1.0", Digest: digest.Digest("sha256:" + strings.Repeat("cd", 32))}
	for _, tc := range []struct {
		name, file string
		params     map[string]string
		dockercfg  string   // file in the dockerconfig workspace; "" leaves it unbound
		signing    []string // files in the signing-key workspace; nil leaves it unbound
		published  []ociseed.Result
		wantArgs   string
		wantAuth   string
		wantURL    string
		wantDigest string
		wantErr    string
	}{
		{
			name:     "prepare with defaults",
			file:     "tasks/snofactory-prepare.yaml",
			wantArgs: "build blueprint.yaml --until precache --cache-dir CACHE --output-dir OUTPUT/snofactory-out --progress plain",
		},
		{
			name:      "prepare locked, with a Secret's credentials",
			file:      "tasks/snofactory-prepare.yaml",
			params:    map[string]string{"LOCKED": "true", "BLUEPRINT": "edge/du.yaml", "PROGRESS": "json"},
			dockercfg: ".dockerconfigjson",
			wantArgs:  "build edge/du.yaml --until precache --cache-dir CACHE --output-dir OUTPUT/snofactory-out --progress json --locked",
			wantAuth:  "DOCKERCONFIG/.dockerconfigjson",
		},
		{
			name:     "factory VM keeping failures",
			file:     "tasks/snofactory-factory-vm.yaml",
			params:   map[string]string{"KEEP_ON_ERROR": "true", "OUTPUT_DIR": "runs/42"},
			wantArgs: "build blueprint.yaml --until seal --cache-dir CACHE --output-dir OUTPUT/runs/42 --progress plain --keep-on-error",
		},
		{
			name:       "publish reports the registry push",
			file:       "tasks/snofactory-publish.yaml",
			dockercfg:  "config.json",
			published:  []ociseed.Result{layout, registry},
			wantArgs:   "build blueprint.yaml --until publish --cache-dir CACHE --output-dir OUTPUT/snofactory-out --progress plain",
			wantAuth:   "DOCKERCONFIG/config.json",
			wantURL:    registry.Location,
			wantDigest: registry.Digest.String(),
		},
		{
			name:       "publish signs with the Secret's key",
			file:       "tasks/snofactory-publish.yaml",
			signing:    []string{"cosign.key", "cosign.password", "cosign.pub"},
			published:  []ociseed.Result{registry},
			wantArgs:   "build blueprint.yaml --until publish --cache-dir CACHE --output-dir OUTPUT/snofactory-out --progress plain --sign-by SIGNING/cosign.key --passphrase-file SIGNING/cosign.password",
			wantURL:    registry.Location,
			wantDigest: registry.Digest.String(),
		},
		{
			name:      "publish with a signing Secret lacking its password fails",
			file:      "tasks/snofactory-publish.yaml",
			signing:   []string{"cosign.key"},
			published: []ociseed.Result{registry},
			wantErr:   "needs cosign.key and cosign.password",
		},
		{
			name:      "publish with only an OCI layout fails",
			file:      "tasks/snofactory-publish.yaml",
			published: []ociseed.Result{layout},
			wantErr:   "names no registry push",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := decodeTask(tc.file, readFile(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			ws := map[string]string{}
			for _, w := range []string{"source", "cache", "output", "dockerconfig", "signing-key", "results", "bin"} {
				ws[w] = filepath.Join(dir, w)
				if err := os.MkdirAll(ws[w], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			vars := map[string]string{"workspaces.dockerconfig.bound": "false", "workspaces.signing-key.bound": "false"}
			for _, p := range task.Spec.Params {
				vars["params."+p.Name] = p.Default.StringVal
			}
			for k, v := range tc.params {
				vars["params."+k] = v
			}
			for _, w := range task.Spec.Workspaces {
				vars["workspaces."+w.Name+".path"] = ws[w.Name]
			}
			if tc.dockercfg != "" {
				vars["workspaces.dockerconfig.bound"] = "true"
				writeFile(t, filepath.Join(ws["dockerconfig"], tc.dockercfg), `{"auths":{}}`)
			}
			if tc.signing != nil {
				vars["workspaces.signing-key.bound"] = "true"
				for _, f := range tc.signing {
					writeFile(t, filepath.Join(ws["signing-key"], f), "not read by the fake")
				}
			}
			for _, r := range task.Spec.Results {
				vars["results."+r.Name+".path"] = filepath.Join(ws["results"], r.Name)
			}
			if tc.published != nil {
				// The publish stage's report, encoded as the stage encodes it.
				b, err := json.MarshalIndent(publish.Report{Published: tc.published}, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(ws["output"], vars["params.OUTPUT_DIR"], "publish", publish.ReportFile), string(b)+"\n")
			}
			writeFile(t, filepath.Join(ws["bin"], "snofactory"), fakeSnofactory)
			if err := os.Chmod(filepath.Join(ws["bin"], "snofactory"), 0o755); err != nil {
				t.Fatal(err)
			}

			step := task.Spec.Steps[0]
			script := filepath.Join(dir, "script")
			writeFile(t, script, step.Script)
			cmd := exec.Command("sh", script)
			cmd.Dir = substitute(t, step.WorkingDir, vars)
			cmd.Env = []string{"PATH=" + ws["bin"] + ":/usr/bin:/bin",
				"FAKE_ARGS=" + filepath.Join(dir, "args"), "FAKE_AUTH=" + filepath.Join(dir, "auth")}
			for _, e := range step.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+substitute(t, e.Value, vars))
			}
			out, err := cmd.CombinedOutput()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(string(out), tc.wantErr) {
					t.Fatalf("got %v, want a failure saying %q:\n%s", err, tc.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if cmd.Dir != ws["source"] {
				t.Errorf("ran in %s, want the source workspace", cmd.Dir)
			}
			short := strings.NewReplacer(ws["cache"], "CACHE", ws["output"], "OUTPUT", ws["dockerconfig"], "DOCKERCONFIG", ws["signing-key"], "SIGNING")
			args := strings.Fields(readString(t, filepath.Join(dir, "args")))
			if got := short.Replace(strings.Join(args, " ")); got != tc.wantArgs {
				t.Errorf("snofactory %s\nwant      %s", got, tc.wantArgs)
			}
			if got := short.Replace(readString(t, filepath.Join(dir, "auth"))); got != tc.wantAuth {
				t.Errorf("REGISTRY_AUTH_FILE=%q, want %q", got, tc.wantAuth)
			}
			for name, want := range map[string]string{"IMAGE_URL": tc.wantURL, "IMAGE_DIGEST": tc.wantDigest} {
				got, err := os.ReadFile(filepath.Join(ws["results"], name))
				if want == "" && errors.Is(err, os.ErrNotExist) {
					continue
				}
				if string(got) != want {
					t.Errorf("result %s = %q (%v), want %q", name, got, err, want)
				}
			}
		})
	}
}

var tektonRef = regexp.MustCompile(`\$\(([a-zA-Z0-9_.-]+)\)`)

// substitute replaces Tekton variables as the controller does; an unknown one fails the test.
func substitute(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return tektonRef.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Fatalf("no value for %s", m)
		}
		return v
	})
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
