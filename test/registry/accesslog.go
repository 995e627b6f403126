package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// Request is one line of the registry's access log.
type Request struct {
	Method string
	Path   string // without the query string
	Status int
	Bytes  int64 // response body bytes written
	User   string
}

// Kind of object the request addressed.
func (q Request) Kind() string {
	switch {
	case strings.Contains(q.Path, "/blobs/uploads"):
		return "upload"
	case strings.Contains(q.Path, "/blobs/"):
		return "blob"
	case strings.Contains(q.Path, "/manifests/"):
		return "manifest"
	default:
		return "other"
	}
}

// Stats summarises requests served.
type Stats struct {
	Total         int
	BlobGets      int   // successful (2xx) blob GETs
	BlobGetBytes  int64 // body bytes of those GETs
	BlobHeads     int
	ManifestGets  int // successful manifest GETs
	ManifestHeads int
	Pushes        int // PUT/POST/PATCH requests
	Errors        int // responses with status >= 400
}

// Summarize counts requests by kind.
func Summarize(reqs []Request) Stats {
	var s Stats
	for _, q := range reqs {
		s.Total++
		ok := q.Status >= 200 && q.Status < 300
		if q.Status >= 400 {
			s.Errors++
		}
		switch q.Method {
		case http.MethodPut, http.MethodPost, http.MethodPatch:
			s.Pushes++
			continue
		}
		switch {
		case q.Kind() == "blob" && q.Method == http.MethodGet && ok:
			s.BlobGets++
			s.BlobGetBytes += q.Bytes
		case q.Kind() == "blob" && q.Method == http.MethodHead:
			s.BlobHeads++
		case q.Kind() == "manifest" && q.Method == http.MethodGet && ok:
			s.ManifestGets++
		case q.Kind() == "manifest" && q.Method == http.MethodHead:
			s.ManifestHeads++
		}
	}
	return s
}

// combined matches the Apache combined log format the registry writes:
// host ident user [time] "METHOD PATH PROTO" status bytes "referer" "agent".
var combined = regexp.MustCompile(`^\S+ \S+ (\S+) \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-)`)

// syncPrefix marks the probe requests Sync uses to find the end of the log.
const syncPrefix = "/snofactory-sync/"

// accessLog is the registry's stdout, split into lines and parsed.
type accessLog struct {
	*pipeline.LineWriter
	mu   sync.Mutex
	reqs []Request
	seen map[string]chan struct{} // sync nonce -> closed when logged
}

func newAccessLog() *accessLog {
	l := &accessLog{seen: map[string]chan struct{}{}}
	l.LineWriter = pipeline.NewLineWriter(l.parse)
	return l
}

func (l *accessLog) parse(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := combined.FindStringSubmatch(line)
	if m == nil {
		return
	}
	path := m[3]
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if strings.HasPrefix(path, syncPrefix) {
		if ch, ok := l.seen[strings.TrimPrefix(path, syncPrefix)]; ok {
			close(ch)
			delete(l.seen, strings.TrimPrefix(path, syncPrefix))
		}
		return
	}
	status, _ := strconv.Atoi(m[4])
	n, _ := strconv.ParseInt(m[5], 10, 64) // "-" is 0
	user := m[1]
	if user == "-" {
		user = ""
	}
	l.reqs = append(l.reqs, Request{Method: m[2], Path: path, Status: status, Bytes: n, User: user})
}

// sync makes a marker request and waits until the registry has logged it.
// Log lines are written after each response, so a client that has finished
// reading could otherwise look at the log before its own line arrives. An error
// means this registry did not log it: it exited, or another process answered.
func (r *Registry) sync() error {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b)
	ch := make(chan struct{})
	r.log.mu.Lock()
	r.log.seen[nonce] = ch
	r.log.mu.Unlock()
	client := &http.Client{Transport: r.Transport(), Timeout: 5 * time.Second}
	resp, err := client.Get(r.URL() + syncPrefix + nonce)
	if err == nil {
		resp.Body.Close()
		select {
		case <-ch:
			return nil
		case <-r.exited:
			err = fmt.Errorf("the registry exited (%v)", r.waitErr)
		case <-time.After(5 * time.Second):
			err = errors.New("the registry did not log the request")
		}
	}
	r.log.mu.Lock()
	delete(r.log.seen, nonce)
	r.log.mu.Unlock()
	r.opts.Logger.Warn("registry access log did not catch up", "addr", r.addr, "err", err)
	return err
}

// Requests returns every request logged since start (or the last Reset),
// after making sure requests already answered are in the log.
func (r *Registry) Requests() []Request {
	_ = r.sync() // it logs why it failed; the requests logged so far are still the answer
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return append([]Request(nil), r.log.reqs...)
}

// Stats summarises Requests.
func (r *Registry) Stats() Stats { return Summarize(r.Requests()) }

// Reset forgets the requests logged so far, so a test can count only what
// a later step fetched.
func (r *Registry) Reset() {
	_ = r.sync() // it logs why it failed; forgetting what was logged is still right
	r.log.mu.Lock()
	r.log.reqs = nil
	r.log.mu.Unlock()
}
