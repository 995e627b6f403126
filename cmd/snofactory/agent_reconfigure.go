package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/seeds/node/reconfigure"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// newAgentReconfigureCommand is the seed's site reconfiguration hook.
func newAgentReconfigureCommand() *cobra.Command {
	var (
		o                  reconfigure.Options
		port, seqDir       string
		mediumGlobs        []string
		timeout            time.Duration
		dryRun             bool
		siteConfig, output string
	)
	cmd := &cobra.Command{
		Use:   "reconfigure [--root DIR] [--target coreos|openshift] [--medium PATH]",
		Short: "Apply the site config on the site-config medium to a sealed seed, reporting each step",
		Long: `reconfigure waits for the site-config medium (volume label ` + siteconfig.VolumeLabel + `), showing on the
console that it waits, then applies the site config step by step: network, hostname, DNS,
NTP, pull secret, registry mirrors, SSH keys and manifests. On OpenShift it follows
lifecycle-agent's post-pivot: the dnsmasq records of the new names, recert (cluster name and
infra ID, IP, hostname, the site's pull secret and kubeadmin password hash, certificates
re-signed from now on), kubelet, the API, the seed's mirror objects out, the manifests in,
a new cluster ID, then the waits for ClusterVersion, every ClusterOperator and the Node, and
the unit disabled. --dry-run prints that list with each command and what it changes.
Each step is reported as "` + wire.PhaseReconfigureStep + `" and the outcome as "` + wire.PhaseReconfigured + `".
Progress is kept under the root, so a run cut short resumes; a missing or malformed medium
applies nothing. When the seed carries site keys (ROOT` + siteconfig.NodeKeysDir + `, from the
blueprint's spec.relocation.siteConfigKeys), a medium must be signed by one of them
(site-config create --sign-by): an unsigned one, one changed after signing or one signed by
another key is refused, with the reason on the console and in the medium step's report, and
the hook waits on for a signed one. Secrets the medium carries sealed (site-config create
--seal-to) are opened with the seed's identity (ROOT` + siteconfig.NodeIdentityFile + `). The target defaults to the sealed seed's (` + wire.SealedFile + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				return reconfigurePlan(cmd, o, siteConfig, output)
			}
			if err := o.FromSealedRequest(cmd.Flags().Changed("medium-timeout")); err != nil {
				return badInput(err)
			}
			if cmd.Flags().Changed("medium-glob") {
				o.MediumGlobs = mediumGlobs
			}
			o.Console = cmd.ErrOrStderr()
			o.Reporter = agent.Reporter{Port: port, StateDir: seqDir}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := reconfigure.Run(ctx, o)
			if err != nil {
				return err // Run printed the step and the error on the console (stderr)
			}
			fmt.Fprintln(cmd.OutOrStdout(), res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Root, "root", "/", "root of the installed system")
	fl.Var(&o.Target, "target", oskind.Names()+" (default: the target in "+wire.SealedFile+" under --root)")
	fl.StringVar(&o.Medium, "medium", "", "the site-config medium, an ISO image or device (default: look for the label "+siteconfig.VolumeLabel+")")
	fl.StringArrayVar(&mediumGlobs, "medium-glob", reconfigure.DefaultMediumGlobs(), "where to look for the medium, in order (repeatable)")
	fl.DurationVar(&o.MediumTimeout, "medium-timeout", reconfigure.DefaultMediumTimeout, "give up waiting for the medium after this long")
	fl.StringVar(&o.ResolvConf, "resolv-conf", "/etc/resolv.conf", "the running system's resolv.conf, written besides the root's")
	fl.StringVar(&o.SiteKeysDir, "site-keys", "", "the public keys a medium must be signed by (default ROOT"+siteconfig.NodeKeysDir+"; none there: unsigned media are accepted)")
	fl.StringVar(&o.SiteIdentityFile, "site-identity", "", "the age identity that opens a medium's sealed secrets (default ROOT"+siteconfig.NodeIdentityFile+")")
	fl.StringVar(&o.StateDir, "progress-dir", "", "where progress is kept across reboots (default ROOT"+reconfigure.DefaultStateDir+")")
	fl.StringVar(&o.OpenShift.RecertImage, "recert-image", "", "openshift: the pinned recert image (default: from ROOT"+reconfigure.ImagesFile+")")
	fl.StringVar(&o.OpenShift.EtcdImage, "etcd-image", "", "openshift: the pinned etcd image recert edits through (default: from ROOT"+reconfigure.ImagesFile+")")
	fl.StringVar(&port, "port", "/dev/virtio-ports/"+wire.DefaultPortName, "virtio-serial port device or name")
	fl.StringVar(&seqDir, "state-dir", agent.DefaultStateDir, "where the report sequence counter lives (must be a tmpfs)")
	fl.DurationVar(&timeout, "timeout", 3*time.Hour, "give up after this long")
	fl.BoolVar(&dryRun, "dry-run", false, "print the steps the reconfiguration would take, in order, and touch nothing (needs --target)")
	fl.StringVar(&siteConfig, "site-config", "", "with --dry-run: the site config to plan for (default: placeholders)")
	fl.StringVarP(&output, "output", "o", "text", "with --dry-run: text or json")
	return cmd
}

// reconfigurePlan prints the steps a reconfiguration would take, secrets as placeholders.
func reconfigurePlan(cmd *cobra.Command, o reconfigure.Options, siteConfig, output string) error {
	if o.Target == "" {
		return badInput(fmt.Errorf("--dry-run needs --target %s", oskind.Names()))
	}
	if err := textOrJSON("-o", output); err != nil {
		return err
	}
	var sc *siteconfig.SiteConfig
	if siteConfig != "" {
		var err error
		if sc, err = siteconfig.LoadReported(cmd.ErrOrStderr(), siteConfig); err != nil {
			return err
		}
	}
	plan, err := reconfigure.Plan(o, sc)
	if err != nil {
		return err
	}
	return steps.Print(cmd.OutOrStdout(), plan, output)
}
