package ociseed

import (
	"crypto/tls"
	"log/slog"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// DefaultChunkSize is the size of a seed's layers; the last chunk of a file is shorter.
const DefaultChunkSize = 64 << 20

// DefaultJobs bounds the chunks moved at once.
const DefaultJobs = 4

// Option changes how Push, Pull, Inspect and AttachReferrer work.
type Option func(*options)

type options struct {
	chunkSize int64
	jobs      int
	insecure  bool
	keychain  authn.Keychain
	transport http.RoundTripper
	referrers []Referrer
	source    string
	logger    *slog.Logger
	progress  func(Progress)
	from      string
	stats     *PullStats
	// groupBlobs pushes every chunk group as a blob of its own, never a pack blob.
	groupBlobs bool
}

func makeOptions(opts []Option) options {
	o := options{chunkSize: DefaultChunkSize, jobs: DefaultJobs, logger: slog.Default()}
	for _, f := range opts {
		f(&o)
	}
	if o.keychain == nil {
		o.keychain = Keychain()
	}
	if o.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if o.insecure {
			t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for --tls-verify=false
		}
		o.transport = t
	}
	// Every request to a registry, from go-containerregistry or our own blob client, goes
	// through the one stall timeout, body caps and retry policy.
	o.transport = netlimit.Transport(o.transport, netlimit.Registry())
	return o
}

// WithChunkSize sets the size of the chunks Push cuts files into (default DefaultChunkSize).
func WithChunkSize(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.chunkSize = n
		}
	}
}

// WithJobs bounds how many chunks move at once (default DefaultJobs).
func WithJobs(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.jobs = n
		}
	}
}

// WithInsecure reaches registries over plain HTTP or TLS without verification, like
// skopeo's --tls-verify=false. Loopback registries are plain HTTP without it.
func WithInsecure(insecure bool) Option { return func(o *options) { o.insecure = insecure } }

// WithKeychain replaces the credentials lookup (default Keychain()).
func WithKeychain(k authn.Keychain) Option { return func(o *options) { o.keychain = k } }

// WithTransport sets the HTTP transport, e.g. one that trusts a test registry's CA.
func WithTransport(t http.RoundTripper) Option { return func(o *options) { o.transport = t } }

// WithReferrers attaches files to the seed as it is pushed (see AttachReferrer).
func WithReferrers(rs ...Referrer) Option {
	return func(o *options) { o.referrers = append(o.referrers, rs...) }
}

// WithSource sets the org.opencontainers.image.source annotation (e.g. the blueprint's repository).
func WithSource(url string) Option { return func(o *options) { o.source = url } }

// WithLogger sets where progress is logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Progress reports one blob moved (or found already there) by Push or Pull.
type Progress struct {
	What   string // e.g. "disk.qcow2 chunk 3", "seed.json"
	Digest digest.Digest
	Size   int64
	// Moved is the bytes sent (Push) or fetched (Pull) for this blob: 0 when the target
	// already had it or an earlier pull had finished it.
	Moved       int64
	Done, Total int // blobs finished so far, of all blobs
}

// WithProgress calls f after each blob; calls never overlap.
func WithProgress(f func(Progress)) Option { return func(o *options) { o.progress = f } }

// WithFrom names an earlier disk to reuse chunks from: a seed directory with a chunked disk,
// or a raw disk (a file, or the device a seed write is about to rewrite). Pull fetches only
// the chunks it lacks; each chunk taken from it is checked first.
func WithFrom(path string) Option { return func(o *options) { o.from = path } }

// WithPullStats fills st with where a pull's chunks came from (chunked seeds).
func WithPullStats(st *PullStats) Option { return func(o *options) { o.stats = st } }

// WithGroupBlobs makes a push send every chunk group of a disk as a blob of its own, as
// pushes did before pack blobs, for a registry that ignores HTTP range requests: a pull
// from one reads a pack blob from its start to every group it needs.
func WithGroupBlobs() Option { return func(o *options) { o.groupBlobs = true } }
