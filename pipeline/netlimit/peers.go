package netlimit

import (
	"net/http"
	"strings"
)

// Caps on what answers hold. A manifest or an index: the distribution spec has registries
// accept at least 4 MiB (opencontainers/distribution-spec spec.md, "Pushing Manifests"), so
// a longer one is not a manifest anyone can push. The rest are small JSON documents.
const (
	MaxManifest  = 4 << 20  // a manifest, an index, a referrers list, a tag list
	MaxError     = 1 << 20  // the explanation that comes with a failed request
	MaxSmallJSON = 1 << 20  // a token answer, the /v2/ ping
	MaxAPIAnswer = 64 << 20 // one answer of the Kubernetes API: a list of every pod of an SNO is a few MiB
)

// Registry is an OCI registry (and the token service it sends clients to). Blob bodies are
// uncapped here: their readers stop at the size the descriptor declares and check the digest.
func Registry() Peer { return Peer{Kind: "registry", Body: registryBody} }

func registryBody(req *http.Request, resp *http.Response) (string, int64) {
	path := req.URL.Path
	switch {
	case resp.StatusCode >= 300:
		return "error answer", MaxError
	case strings.Contains(path, "/manifests/"):
		return "manifest", MaxManifest
	case strings.Contains(path, "/referrers/"):
		return "referrers list", MaxManifest
	case strings.HasSuffix(path, "/tags/list"):
		return "tag list", MaxManifest
	case strings.Contains(path, "/blobs/"):
		return "blob", 0
	case path == "/v2/" || path == "/v2":
		return "API answer", MaxSmallJSON
	}
	return "token answer", MaxSmallJSON
}

// KubeAPI is a Kubernetes API server; every answer is JSON of at most MaxAPIAnswer. Its
// client (client-go) would ask again on top of the policy: the transport owns the retries.
func KubeAPI() Peer {
	return Peer{Kind: "API server", OwnsRetries: true, Body: func(*http.Request, *http.Response) (string, int64) {
		return "API answer", MaxAPIAnswer
	}}
}

// Download is a server a file is downloaded from: its body is checked against a digest, not
// a cap.
func Download() Peer { return Peer{Kind: "server"} }
