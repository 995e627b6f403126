package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// Output paths other stages read by convention (see doc.go).
const (
	ConfigPath  = "ignition/config.ign"
	WorkerPath  = "ignition/worker.ign"
	ManifestDir = "manifests"
)

// agentExecStart is the agent unit's command: the final boot report, spelled with the
// protocol's own constants so the factory host recognises it as the end of the install.
const agentExecStart = AgentBinary + " agent report --phase " + wire.PhaseBootComplete + " --status " + string(wire.StatusOK)

// renderCoreOS writes one Ignition config: snofactory's own units first, then the user's
// fragments merged in order (so a fragment can override ours).
func renderCoreOS(ctx context.Context, opts Options, env *runEnv, rep *Report) error {
	m, err := newMerger(opts.IgnitionVersion)
	if err != nil {
		return err
	}
	own := butane{Variant: "fcos", Version: m.spec.fcos}
	t := true
	own.Systemd = &butaneSystemd{Units: []butaneUnit{{
		Name:    AgentUnit,
		Enabled: &t,
		Contents: `[Unit]
Description=snofactory: report install phases to the factory
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + agentExecStart + `

[Install]
WantedBy=multi-user.target
`,
	}}}
	files, fps, err := siteKeyFiles(opts)
	if err != nil {
		return err
	}
	rep.SiteKeys = fps
	if len(files) > 0 {
		own.Storage = &butaneStorage{Files: files}
	}
	if opts.SSHKey {
		key, err := env.secrets.Secret(SecretSSHKey)
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		own.Passwd = &butanePasswd{Users: []butaneUser{{Name: "core", SSHAuthorizedKeys: []string{strings.TrimSpace(string(key))}}}}
	}
	ign, err := translateOwn("snofactory base config", own, false)
	if err != nil {
		return err
	}
	if err := m.add("snofactory base config", ign); err != nil {
		return err
	}
	for i, f := range opts.Fragments {
		if err := ctx.Err(); err != nil {
			return err
		}
		name, src, h, err := loadFragment(opts, f, i)
		if err != nil {
			return err
		}
		if h.Variant == "openshift" {
			return &ButaneError{Name: name, Err: fmt.Errorf("variant openshift makes MachineConfigs; a %s target takes a CoreOS variant such as fcos %s", oskind.CoreOS, m.spec.fcos)}
		}
		out, err := translate(name, src, false)
		if err != nil {
			return err
		}
		if err := m.add(name, out); err != nil {
			return fmt.Errorf("butane config %s (variant %s %s): %w", name, h.Variant, h.Version, err)
		}
		rep.Fragments = append(rep.Fragments, FragmentResult{Name: name, Variant: h.Variant, Version: h.Version, Output: ConfigPath})
		env.log.Info("merged Butane fragment", "fragment", name, "variant", h.Variant, "version", h.Version)
	}
	cfg, err := m.bytes(ConfigPath)
	if err != nil {
		return err
	}
	// 0600 always: a fragment may carry anything a node needs, secrets included.
	if err := writeFile(env.out, ConfigPath, cfg, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", ConfigPath, err)
	}
	rep.Ignition = map[string]IgnitionFile{handoff.ConfigNode: {Path: ConfigPath, Version: m.spec.version, Size: len(cfg), Secret: opts.SSHKey}}
	env.log.Info("wrote Ignition config", "path", ConfigPath, "ignition", m.spec.version, "bytes", len(cfg), "fragments", len(opts.Fragments))
	return nil
}
