package stages

import (
	"fmt"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/stages/install"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/stages/publish"
	"github.com/snofactory/snofactory/stages/render"
	"github.com/snofactory/snofactory/stages/resolve"
	"github.com/snofactory/snofactory/stages/seal"
	"github.com/snofactory/snofactory/stages/validate"
)

// Publish is the name of the last stage, the only one that signs.
const Publish = publish.Name

// Options are build-time choices that are not part of the blueprint.
type Options struct {
	// LockFile, when set, makes the build refuse to run if anything resolves differently
	// from this lock (build --locked).
	LockFile string
	// Agent is the snofactory binary the node runs as its agent when its OS does not carry
	// one (OpenShift); the precache data disk takes it there. Usually os.Executable().
	Agent string
	// SignKey, when set, signs the published seed with this encrypted sigstore private key
	// instead of the blueprint's spec.outputs.signing (build --sign-by); its passphrase
	// comes from SignPassphraseFile, else from $SNOFACTORY_KEY_PASSPHRASE.
	SignKey, SignPassphraseFile string
}

// Graph maps a loaded blueprint onto the stage graph and the secrets its stages may read.
func Graph(bp *v1alpha1.Blueprint, opts Options) (*pipeline.Graph, pipeline.SecretSource, error) {
	in := mapBlueprint(bp)
	in.resolve.Locked = opts.LockFile
	if bp.Spec.Target.Type == oskind.OpenShift {
		in.precache.Agent = opts.Agent
	}
	sign := signing(bp, opts)
	in.publish.Sign = sign.key != ""
	g := &pipeline.Graph{Blueprint: bp.Metadata.Name, Stages: []pipeline.Stage{
		resolve.New(in.resolve),
		render.New(in.render),
		liveiso.New(in.liveISO),
		precache.New(in.precache),
		install.New(in.install),
		validate.New(in.validate),
		seal.New(in.seal),
		publish.New(in.publish),
	}}
	if err := g.Validate(); err != nil {
		return nil, nil, fmt.Errorf("wiring blueprint %s: %w", bp.Metadata.Name, err)
	}
	return g, secrets(bp, sign), nil
}
