package blueprints

import "github.com/snofactory/snofactory/blueprints/v1alpha1"

// Names of the current version's types, so the rest of the project can say
// blueprints.Spec without naming the version.
type (
	Spec           = v1alpha1.Spec
	Metadata       = v1alpha1.Metadata
	Target         = v1alpha1.Target
	Source         = v1alpha1.Source
	OpenShift      = v1alpha1.OpenShift
	ClusterNetwork = v1alpha1.ClusterNetwork
	MachineNetwork = v1alpha1.MachineNetwork
	Operator       = v1alpha1.Operator
	ButaneFragment = v1alpha1.ButaneFragment
	RegistryMirror = v1alpha1.RegistryMirror
	VM             = v1alpha1.VM
	Timeouts       = v1alpha1.Timeouts
	Validation     = v1alpha1.Validation
	Relocation     = v1alpha1.Relocation
	Outputs        = v1alpha1.Outputs
	ResolvedPaths  = v1alpha1.ResolvedPaths
	Size           = v1alpha1.Size
	Duration       = v1alpha1.Duration
)

// Constants of the current version.
const (
	APIVersion      = v1alpha1.APIVersion
	Kind            = v1alpha1.Kind
	TargetOpenShift = v1alpha1.TargetOpenShift
	TargetCoreOS    = v1alpha1.TargetCoreOS
)
