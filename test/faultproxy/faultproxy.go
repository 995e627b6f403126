package faultproxy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is one kind of fault.
type Kind string

// The faults the proxy can inject.
const (
	// Reset closes the client connection with a TCP RST before forwarding.
	Reset Kind = "reset"
	// Error500, Error502 and Error503 answer with that status without
	// forwarding.
	Error500 Kind = "500"
	Error502 Kind = "502"
	Error503 Kind = "503"
	// Error503RetryAfter answers 503 with a Retry-After header.
	Error503RetryAfter Kind = "503-retry-after"
	// Error429RetryAfter answers 429 Too Many Requests with Retry-After.
	Error429RetryAfter Kind = "429-retry-after"
	// Truncate forwards the request, sends the headers (with the real
	// Content-Length) and part of the body, then drops the connection.
	Truncate Kind = "truncate"
	// ResetMidBody is Truncate ending in a TCP RST instead of a clean close,
	// the way a dropped link usually shows up during a large download.
	ResetMidBody Kind = "reset-mid-body"
	// Slow forwards the request and sends the body at Options.SlowBandwidth.
	Slow Kind = "slow"
)

// AllKinds is the default set of faults.
var AllKinds = []Kind{Reset, Error500, Error502, Error503, Error503RetryAfter, Error429RetryAfter, Truncate, ResetMidBody, Slow}

// Options configure a proxy. The zero value forwards everything untouched.
type Options struct {
	// Seed makes the fault schedule reproducible.
	Seed int64
	// Rate is the fraction of eligible requests that fail, 0..1.
	Rate float64
	// Kinds are the faults to choose from, uniformly. Default AllKinds.
	Kinds []Kind
	// Eligible limits faults to matching requests (nil: all). See BlobGets.
	Eligible func(*http.Request) bool
	// MaxFaultsPerPath stops injecting faults into a method+path after
	// that many, so clients with bounded retries can finish. 0: no limit.
	MaxFaultsPerPath int
	// RetryAfter is the Retry-After value sent with the *RetryAfter kinds.
	// Default 1s; rounded up to whole seconds.
	RetryAfter time.Duration
	// TruncateFraction is how much of the body a Truncate fault lets
	// through, 0..1. Default 0.5.
	TruncateFraction float64
	// SlowBandwidth is the bytes/second of a Slow fault. Default 256 KiB/s.
	SlowBandwidth int64
	// Bandwidth, when > 0, limits all responses together to that many
	// bytes/second: a slow link rather than a slow request.
	Bandwidth int64
	// Hold, when set, is asked about each request before the fault schedule: a non-nil
	// channel holds the request part-way until the channel is closed (or the proxy is),
	// then drops its connection. A request with a body has half of it read and is never
	// forwarded, so the target keeps nothing of it; any other request is forwarded and its
	// response sent up to half its body. A test kills a client there: a transfer cut at a
	// point the test chose, where a timer would race the machine's load.
	Hold func(*http.Request) <-chan struct{}
	// Held, when set, is called once a held request has stopped part-way.
	Held func(*http.Request)
	// Transport reaches the target (e.g. one trusting a TLS registry).
	Transport http.RoundTripper
	// Logger receives one line per fault. Nil discards.
	Logger *slog.Logger
}

// Stats counts what the proxy did.
type Stats struct {
	Requests int          // requests received
	Passed   int          // requests forwarded without a fault
	Faults   map[Kind]int // injected faults by kind
	BytesOut int64        // response body bytes sent to clients
	// PacedBytes are the body bytes a limiter paced (Bandwidth or a Slow fault): the
	// event that shows a rate applied, where a duration would race the machine's load.
	PacedBytes int64
	// Held counts requests stopped part-way (Options.Hold).
	Held int
}

// Total is the number of injected faults.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	opts   Options
	target *url.URL
	ln     net.Listener
	srv    *http.Server
	rp     *httputil.ReverseProxy
	link   *limiter // shared by all responses; nil without Bandwidth

	mu       sync.Mutex
	seen     map[string]int // method+path -> requests so far
	faulted  map[string]int // method+path -> faults so far
	stats    Stats
	closeErr error
	once     sync.Once
	closed   chan struct{} // closed once Close has stopped the server
}

// BlobGets makes only blob downloads eligible: the requests that carry the
// bytes, where real links fail most.
func BlobGets(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:")
}

// Start listens on 127.0.0.1 (a free port) and proxies to target, which is
// "host:port" (plain HTTP) or a URL. The proxy stops when ctx is done or
// Close is called.
func Start(ctx context.Context, target string, opts Options) (*Proxy, error) {
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad target %q: %v", target, err)
	}
	if opts.Rate < 0 || opts.Rate > 1 {
		return nil, fmt.Errorf("faultproxy: rate %v outside 0..1", opts.Rate)
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = AllKinds
	}
	for _, k := range opts.Kinds {
		if !validKind(k) {
			return nil, fmt.Errorf("faultproxy: unknown fault kind %q", k)
		}
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.TruncateFraction <= 0 || opts.TruncateFraction >= 1 {
		opts.TruncateFraction = 0.5
	}
	if opts.SlowBandwidth <= 0 {
		opts.SlowBandwidth = 256 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		opts:    opts,
		target:  u,
		ln:      ln,
		seen:    map[string]int{},
		faulted: map[string]int{},
		stats:   Stats{Faults: map[Kind]int{}},
		closed:  make(chan struct{}),
	}
	if opts.Bandwidth > 0 {
		p.link = newLimiter(opts.Bandwidth)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			// Keep the client's Host so the registry writes Location
			// headers (upload URLs) that point back through the proxy.
			pr.Out.Host = pr.In.Host
		},
		Transport: opts.Transport,
		// Injected faults make the proxy's own copies fail; that is
		// expected, not worth a line on stderr.
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			opts.Logger.Warn("faultproxy: upstream", "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)}
	go func() { _ = p.srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	return p, nil
}

func validKind(k Kind) bool {
	for _, a := range AllKinds {
		if a == k {
			return true
		}
	}
	return false
}

// Addr is "127.0.0.1:PORT", usable as the registry part of image references.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Faults = make(map[Kind]int, len(p.stats.Faults))
	for k, v := range p.stats.Faults {
		s.Faults[k] = v
	}
	return s
}

// Close stops the proxy and drops open connections. Safe to call twice.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		p.closeErr = p.srv.Close()
		close(p.closed)
	})
	return p.closeErr
}

// Done is closed once the proxy has stopped listening (Close, or the end of Start's ctx).
func (p *Proxy) Done() <-chan struct{} { return p.closed }

// decide is the fault schedule: a hash of the seed, the request and its
// repetition count, so the same requests get the same faults in any order.
func decide(seed int64, rate float64, kinds []Kind, method, path string, n int) (Kind, bool) {
	if rate <= 0 || len(kinds) == 0 {
		return "", false
	}
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(method + " " + path + "\x00"))
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
	sum := h.Sum(nil)
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / float64(1<<53)
	if u >= rate {
		return "", false
	}
	return kinds[binary.BigEndian.Uint64(sum[8:16])%uint64(len(kinds))], true
}

func (p *Proxy) choose(r *http.Request) (Kind, bool) {
	key := r.Method + " " + r.URL.Path
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	n := p.seen[key]
	p.seen[key] = n + 1
	if p.opts.Eligible != nil && !p.opts.Eligible(r) {
		p.stats.Passed++
		return "", false
	}
	if p.opts.MaxFaultsPerPath > 0 && p.faulted[key] >= p.opts.MaxFaultsPerPath {
		p.stats.Passed++
		return "", false
	}
	k, ok := decide(p.opts.Seed, p.opts.Rate, p.opts.Kinds, r.Method, r.URL.Path, n)
	if !ok {
		p.stats.Passed++
		return "", false
	}
	p.faulted[key]++
	p.stats.Faults[k]++
	return k, true
}

func (p *Proxy) addPaced(n int) {
	p.mu.Lock()
	p.stats.PacedBytes += int64(n)
	p.mu.Unlock()
}

func (p *Proxy) addBytes(n int) {
	p.mu.Lock()
	p.stats.BytesOut += int64(n)
	p.mu.Unlock()
}

// ServeHTTP applies the schedule to one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.opts.Hold != nil {
		if gate := p.opts.Hold(r); gate != nil {
			p.serveHeld(w, r, gate)
			return
		}
	}
	kind, fault := p.choose(r)
	if fault {
		p.opts.Logger.Info("faultproxy: injecting", "kind", kind, "method", r.Method, "path", r.URL.Path)
	}
	var out http.ResponseWriter = &countingWriter{ResponseWriter: w, p: p}
	if p.link != nil {
		out = &slowWriter{ResponseWriter: out, lim: p.link, paced: p.addPaced}
	}
	switch kind {
	case Reset:
		reset(w)
		return
	case Truncate, ResetMidBody:
		if r.Method == http.MethodHead {
			// A HEAD response has no body to cut, so cut the connection.
			reset(w)
			return
		}
		tw := &truncWriter{ResponseWriter: out, fraction: p.opts.TruncateFraction}
		if kind == ResetMidBody {
			tw.rst = w
		}
		p.rp.ServeHTTP(tw, r)
		// The whole body fit before the cut (or had no length): drop the
		// connection anyway so the response never completes cleanly.
		tw.abort()
		return
	case Error500, Error502, Error503:
		code, _ := strconv.Atoi(string(kind))
		http.Error(out, "faultproxy: injected "+string(kind), code)
		return
	case Error503RetryAfter, Error429RetryAfter:
		secs := int((p.opts.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		code := http.StatusServiceUnavailable
		if kind == Error429RetryAfter {
			code = http.StatusTooManyRequests
		}
		http.Error(out, "faultproxy: injected "+string(kind), code)
		return
	case Slow:
		p.rp.ServeHTTP(&slowWriter{ResponseWriter: out, lim: newLimiter(p.opts.SlowBandwidth), paced: p.addPaced}, r)
	default:
		p.rp.ServeHTTP(out, r)
	}
}

// serveHeld stops r part-way (Options.Hold) until gate or the proxy closes, then drops
// the connection.
func (p *Proxy) serveHeld(w http.ResponseWriter, r *http.Request, gate <-chan struct{}) {
	p.mu.Lock()
	p.stats.Requests++
	p.mu.Unlock()
	stop := func() {
		p.mu.Lock()
		p.stats.Held++
		p.mu.Unlock()
		if p.opts.Held != nil {
			p.opts.Held(r)
		}
		select {
		case <-gate:
		case <-p.closed:
		}
	}
	if r.ContentLength > 0 {
		// The client is part-way through sending; the target never sees the request.
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		stop()
		reset(w)
		return
	}
	tw := &truncWriter{ResponseWriter: &countingWriter{ResponseWriter: w, p: p}, fraction: 0.5, stop: stop}
	p.rp.ServeHTTP(tw, r)
	tw.abort()
}

// reset hijacks the connection and closes it with SO_LINGER 0, which makes
// the kernel send a RST instead of a FIN.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// countingWriter counts body bytes sent.
type countingWriter struct {
	http.ResponseWriter
	p *Proxy
}

// Write counts before writing, so a client that has read the bytes never
// sees a smaller count; a short write takes the rest back.
func (c *countingWriter) Write(b []byte) (int, error) {
	c.p.addBytes(len(b))
	n, err := c.ResponseWriter.Write(b)
	c.p.addBytes(n - len(b))
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// truncWriter lets part of the body through, flushes it to the client and
// then aborts the handler, which makes net/http close the connection.
type truncWriter struct {
	http.ResponseWriter
	fraction float64
	limit    int64 // -1 until headers are known
	written  int64
	started  bool
	// rst, when set, is the connection's own ResponseWriter: the cut
	// hijacks it and resets the connection instead of closing it.
	rst http.ResponseWriter
	// stop, when set, runs once what was let through is flushed, before the cut: a held
	// request (Options.Hold) waits there.
	stop func()
}

func (t *truncWriter) WriteHeader(code int) {
	t.limit = -1
	if cl, err := strconv.ParseInt(t.Header().Get("Content-Length"), 10, 64); err == nil && cl > 0 {
		t.limit = int64(float64(cl) * t.fraction)
	}
	t.started = true
	t.ResponseWriter.WriteHeader(code)
	t.Flush()
}

func (t *truncWriter) Write(b []byte) (int, error) {
	if !t.started {
		t.WriteHeader(http.StatusOK)
	}
	if t.limit >= 0 && t.written+int64(len(b)) > t.limit {
		n, _ := t.ResponseWriter.Write(b[:t.limit-t.written])
		t.written += int64(n)
		t.abort()
	}
	n, err := t.ResponseWriter.Write(b)
	t.written += int64(n)
	return n, err
}

func (t *truncWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *truncWriter) abort() {
	t.Flush()
	if t.stop != nil {
		t.stop()
	}
	if t.rst != nil {
		// Hijacking flushes what was written; SO_LINGER 0 then turns the
		// close into a RST.
		reset(t.rst)
	}
	panic(http.ErrAbortHandler)
}

// slowWriter sends the body in small flushed chunks paced by a limiter.
type slowWriter struct {
	http.ResponseWriter
	lim   *limiter
	paced func(n int) // counts what lim paced
}

const chunk = 8 << 10

func (s *slowWriter) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		n := min(len(b), chunk)
		s.lim.wait(n)
		s.paced(n)
		w, err := s.ResponseWriter.Write(b[:n])
		total += w
		if err != nil {
			return total, err
		}
		s.Flush()
		b = b[n:]
	}
	return total, nil
}

func (s *slowWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// limiter paces bytes to a rate: each caller reserves the next slot on a
// virtual clock and sleeps until it.
type limiter struct {
	mu   sync.Mutex
	bps  float64
	next time.Time
}

func newLimiter(bps int64) *limiter { return &limiter{bps: float64(bps)} }

func (l *limiter) wait(n int) {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(time.Duration(float64(n) / l.bps * float64(time.Second)))
	l.mu.Unlock()
	// Sleeping until the slot ends (not starts) keeps small transfers from
	// finishing faster than the rate.
	if d := time.Until(at.Add(time.Duration(float64(n) / l.bps * float64(time.Second)))); d > 0 {
		time.Sleep(d)
	}
}
