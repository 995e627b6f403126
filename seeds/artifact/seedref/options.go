package seedref

import (
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// Option configures Open.
type Option func(*options)

type options struct {
	policy     trust.Policy
	insecure   bool
	jobs       int
	from       string
	stats      *ociseed.PullStats
	staging    staging
	remoteOnly bool
}

// staging says where a seed pulled for use goes.
type staging struct {
	// dir: this directory, the caller's to remove.
	dir string
	// target: a private directory per target under $TMPDIR, kept by a killed run so the
	// same run again resumes its pull.
	target string
	// prefix: a new temporary directory.
	prefix string
}

// WithPolicy sets the trust policy a seed read from a reference must satisfy before its
// content is used; without it, the default policy files (trust.Policy{}).
func WithPolicy(p trust.Policy) Option { return func(o *options) { o.policy = p } }

// WithInsecure allows plain HTTP and unverified certificates, for the registry and the
// trust policy's look-ups alike.
func WithInsecure(insecure bool) Option { return func(o *options) { o.insecure = insecure } }

// WithJobs sets how many chunks move in parallel.
func WithJobs(n int) Option { return func(o *options) { o.jobs = n } }

// WithFrom reuses the chunks of old (an earlier seed directory, a raw disk or a device
// holding an earlier seed) when a seed is pulled.
func WithFrom(old string) Option { return func(o *options) { o.from = old } }

// WithPullStats records where a pull's chunks came from.
func WithPullStats(st *ociseed.PullStats) Option { return func(o *options) { o.stats = st } }

// WithStagingDir pulls a seed for use into dir, which the caller removes.
func WithStagingDir(dir string) Option { return func(o *options) { o.staging = staging{dir: dir} } }

// WithStagingFor pulls a seed for use into a directory private to target (the device it
// is written onto): a run that was killed leaves it, and the same run again resumes the
// pull from the chunks staged there.
func WithStagingFor(target string) Option {
	return func(o *options) { o.staging = staging{target: target} }
}

// WithTempStaging pulls a seed for use into a new temporary directory named prefix*.
func WithTempStaging(prefix string) Option {
	return func(o *options) { o.staging = staging{prefix: prefix} }
}

// RemoteOnly reads every argument as a reference, never as a local directory: for a
// command whose source must be pulled.
func RemoteOnly() Option { return func(o *options) { o.remoteOnly = true } }

// pullOptions are the ociseed options of the reference's registry.
func (o *options) pullOptions(extra ...ociseed.Option) []ociseed.Option {
	opts := []ociseed.Option{ociseed.WithInsecure(o.insecure)}
	if o.jobs > 0 {
		opts = append(opts, ociseed.WithJobs(o.jobs))
	}
	return append(opts, extra...)
}
