package wire

// Inventory is the software the installed node carries, as the agent reports it in its
// facts: what the seed's SBOM lists besides the seed's images. Every string in it comes
// from the node, so readers treat it as untrusted and the agent bounds it (MaxPackages,
// MaxPackageField).
type Inventory struct {
	// Packages are the OS packages of the installed root; nil from an agent that predates
	// them.
	Packages *PackageFacts `json:"packages,omitempty"`
	// Binaries are the snofactory binaries on the node: the agent at AgentPath on the
	// installed root (where the conformance OS's installer copies it) or, when the root
	// has none, the running agent (the one an OpenShift seal installs there).
	Binaries []BinaryFact `json:"binaries,omitempty"`
}

// AgentPath is where a node carries the snofactory agent: the conformance OS's installer
// copies it there, and an OpenShift seal installs it there for the site's hook.
const AgentPath = "/usr/local/bin/snofactory"

// Package managers whose database PackageFacts lists.
const (
	ManagerRPM  = "rpm"
	ManagerDpkg = "dpkg"
)

// Bounds on what the agent reports of the package database.
const (
	// MaxPackages caps the list; RHCOS has about 600 packages, a full Debian a few thousand.
	MaxPackages = 8192
	// MaxPackageField caps each field's bytes (longer values are cut).
	MaxPackageField = 256
)

// PackageFacts is the package database of the installed root.
type PackageFacts struct {
	// Manager is the database read, ManagerRPM or ManagerDpkg; "" when the root has none.
	Manager string `json:"manager,omitempty"`
	// DistroID and DistroVersion are ID and VERSION_ID of the root's os-release.
	DistroID      string `json:"distroID,omitempty"`
	DistroVersion string `json:"distroVersion,omitempty"`
	// Packages are the installed packages, sorted by name, version and architecture.
	Packages []PackageFact `json:"packages,omitempty"`
	// Total is how many installed packages the database lists; more than len(Packages)
	// when the list was cut to bound the report.
	Total int `json:"total"`
	// Reason says why Packages is empty or incomplete: no database, or the query failed.
	Reason string `json:"reason,omitempty"`
}

// PackageFact is one installed package, its fields as the package manager gives them.
type PackageFact struct {
	Name string `json:"name"`
	// Epoch and Release are rpm's (Epoch "" when the package has none); a deb's Version is
	// the whole Debian version, epoch and revision included.
	Epoch   string `json:"epoch,omitempty"`
	Version string `json:"version"`
	Release string `json:"release,omitempty"`
	Arch    string `json:"arch,omitempty"`
}

// BinaryFact is one snofactory binary on the node.
type BinaryFact struct {
	// Path is where the node has it: a path on the installed root when Installed, else the
	// running agent's own path on the live system.
	Path      string `json:"path"`
	Installed bool   `json:"installed,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Size      int64  `json:"size,omitempty"`
	// Module and Version come from the binary's Go build information.
	Module  string `json:"module,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}
