package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// loadConfig is one load run: Conns connections, each keeping Depth
// requests in flight, for Duration or until MaxRequests in all have been
// sent, whichever comes first. The requests are Produce frames of about
// Size bytes, or Fetch requests for about Size bytes of records.
type loadConfig struct {
	Addr        string
	Conns       int
	Depth       int
	Size        int
	Duration    time.Duration
	MaxRequests int64
	Topic       string
	// API is apiProduce (also when empty) or apiFetch.
	API string
	// ProduceVersion and FetchVersion are the versions sent; 0 means
	// produceVersion and fetchVersion.
	ProduceVersion, FetchVersion int16
	// Rate, when positive, is the offered load in requests per second
	// in all, spread evenly over the connections (each paced, Depth
	// still bounding what it has in flight); latency is then counted
	// from each request's intended send time. 0: every connection sends
	// as fast as its responses come back.
	Rate float64
	// TLS, when set, is what every connection dials with; the
	// handshakes are done before the run starts, so they are not
	// measured.
	TLS *tls.Config
}

func (c loadConfig) validate() error {
	switch {
	case c.Addr == "":
		return errors.New("--addr is required")
	case c.Conns < 1 || c.Depth < 1:
		return fmt.Errorf("-c and -d must be at least 1 (got %d, %d)", c.Conns, c.Depth)
	case c.Size < 1 || c.Size > maxFrame:
		return fmt.Errorf("-s must be between 1 and %d", maxFrame)
	case c.Duration <= 0 || c.MaxRequests < 1:
		return errors.New("-t and --max-requests must be positive")
	case c.Rate < 0:
		return errors.New("--rate must not be negative")
	case c.API != "" && c.API != apiProduce && c.API != apiFetch:
		return fmt.Errorf("--api %q: want produce or fetch", c.API)
	}
	// Record batches (magic 2) need Produce v3 and Fetch v4.
	if v := c.produceVersion(); v < 3 || v > kmsg.NewPtrProduceRequest().MaxVersion() {
		return fmt.Errorf("--produce-version %d: want 3-%d", v, kmsg.NewPtrProduceRequest().MaxVersion())
	}
	if v := c.fetchVersion(); v < 4 || v > kmsg.NewPtrFetchRequest().MaxVersion() {
		return fmt.Errorf("--fetch-version %d: want 4-%d", v, kmsg.NewPtrFetchRequest().MaxVersion())
	}
	return nil
}

// The requests the load can send (--api).
const (
	apiProduce = "produce"
	apiFetch   = "fetch"
)

func (c loadConfig) fetching() bool { return c.API == apiFetch }

func (c loadConfig) produceVersion() int16 {
	if c.ProduceVersion == 0 {
		return produceVersion
	}
	return c.ProduceVersion
}

func (c loadConfig) fetchVersion() int16 {
	if c.FetchVersion == 0 {
		return fetchVersion
	}
	return c.FetchVersion
}

// template is the request every connection sends, its correlation id
// patched per request.
func (c loadConfig) template() []byte {
	if c.fetching() {
		return fetchFrame(c.fetchVersion(), c.Topic, c.Size, "kbench")
	}
	return produceFrameAt(c.produceVersion(), c.Topic, c.Size, "kbench")
}

// describe says what the load sends, for the first line of a report.
func (c loadConfig) describe(frameLen int) string {
	if c.fetching() {
		return fmt.Sprintf("Fetch v%d asking for %d bytes of records (%d-byte frames)", c.fetchVersion(), c.Size, frameLen)
	}
	return fmt.Sprintf("%d-byte Produce v%d frames (acks=1)", frameLen, c.produceVersion())
}

// pacing says the offered rate, for a report's first line.
func (c loadConfig) pacing() string {
	if c.Rate <= 0 {
		return ""
	}
	return fmt.Sprintf(", offered %.0f req/s (latency from intended send times)", c.Rate)
}

// checkFirst decodes the first response of a connection.
func (c loadConfig) checkFirst(frame []byte) error {
	key, v := framing.KeyProduce, c.produceVersion()
	if c.fetching() {
		key, v = framing.KeyFetch, c.fetchVersion()
	}
	h, err := framing.ParseResponseHeader(frame, key, v)
	if err != nil {
		return err
	}
	if c.fetching() {
		return checkFetchResponse(v, frame[h.BodyOffset:], c.Size)
	}
	return checkProduceResponse(v, frame[h.BodyOffset:])
}

// loadResult is what a run measured. Latency is from a request's write
// into the connection's buffer (with a rate: its intended send time) to
// its response being read.
type loadResult struct {
	Requests  int64 // responses received
	FrameLen  int   // bytes of each request frame
	RespBytes int64
	Elapsed   time.Duration
	Hist      *histogram
	// Fetched says the load was Fetch: its MB/s counts response bytes.
	Fetched bool
	// Offered is the rate asked for (req/s in all), 0 when unpaced.
	Offered float64
}

func (r loadResult) reqPerSec() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// mbPerSec is request bytes (what a producer pushes), or response bytes
// for a Fetch load (what a consumer pulls), in 10^6 bytes/s.
func (r loadResult) mbPerSec() float64 {
	if r.Fetched {
		return float64(r.RespBytes) / r.Elapsed.Seconds() / 1e6
	}
	return float64(r.Requests) * float64(r.FrameLen) / r.Elapsed.Seconds() / 1e6
}

// add accumulates another run of the same target (compare's rounds).
func (r *loadResult) add(o loadResult) {
	r.Requests += o.Requests
	r.FrameLen = o.FrameLen
	r.Fetched = o.Fetched
	r.Offered = o.Offered
	r.RespBytes += o.RespBytes
	r.Elapsed += o.Elapsed
	if r.Hist == nil {
		r.Hist = newHistogram()
	}
	r.Hist.merge(o.Hist)
}

// runLoad dials every connection first, so connection setup is not
// measured, then drives them all until the deadline or the request budget.
func runLoad(cfg loadConfig) (loadResult, error) {
	if err := cfg.validate(); err != nil {
		return loadResult{}, err
	}
	conns := make([]net.Conn, 0, cfg.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range cfg.Conns {
		c, err := dialLoad(cfg)
		if err != nil {
			return loadResult{}, err
		}
		conns = append(conns, c)
	}
	template := cfg.template()
	budget := (cfg.MaxRequests + int64(cfg.Conns) - 1) / int64(cfg.Conns)
	results := make([]connResult, len(conns))
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for i, c := range conns {
		wg.Go(func() {
			frame := append([]byte(nil), template...) // one frame per connection, patched in place
			if cfg.Rate > 0 {
				// Each connection sends every interval, the connections
				// staggered evenly across it.
				interval := time.Duration(float64(time.Second) * float64(cfg.Conns) / cfg.Rate)
				offset := interval * time.Duration(i) / time.Duration(cfg.Conns)
				results[i] = drivePaced(c, frame, cfg.Depth, interval, offset, deadline, budget, cfg.checkFirst)
				return
			}
			results[i] = driveConn(c, frame, cfg.Depth, deadline, budget, cfg.checkFirst)
		})
	}
	wg.Wait()
	total := loadResult{FrameLen: len(template), Elapsed: time.Since(start), Hist: newHistogram(), Fetched: cfg.fetching(), Offered: cfg.Rate}
	var errs []error
	for i, r := range results {
		total.Requests += r.n
		total.RespBytes += r.respBytes
		total.Hist.merge(r.hist)
		if r.err != nil {
			errs = append(errs, fmt.Errorf("connection %d: %w", i, r.err))
		}
	}
	return total, errors.Join(errs...)
}

// dialLoad opens one load connection, over TLS when cfg says so, with
// its handshake complete.
func dialLoad(cfg loadConfig) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if cfg.TLS == nil {
		return d.Dial("tcp", cfg.Addr)
	}
	c, err := tls.DialWithDialer(d, "tcp", cfg.Addr, cfg.TLS) // checks the certificate against the host dialled
	if err != nil {
		return nil, fmt.Errorf("TLS to %s: %w", cfg.Addr, err)
	}
	return c, nil
}

// connResult is one connection's share of a run.
type connResult struct {
	n, respBytes int64
	hist         *histogram
	err          error
}

// driveConn keeps depth requests in flight on c. It runs in one goroutine:
// each response read frees a slot for the next request, written into the
// buffered writer, which is flushed only when no more response bytes are
// buffered, so requests batch the way responses arrive. Responses must
// come back in request order: their correlation ids are checked against
// the next expected one, and the first is decoded by checkFirst. Nothing
// in the loop allocates.
func driveConn(c net.Conn, frame []byte, depth int, deadline time.Time, budget int64, checkFirst func([]byte) error) (res connResult) {
	res.hist = newHistogram()
	setNoDelay(c)
	c.SetDeadline(deadline.Add(10 * time.Second)) // bound a peer that stops answering
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	base := time.Now()
	stop := deadline.Sub(base)
	sentAt := make([]time.Duration, depth) // by correlation id modulo depth
	var next, expect uint32                // correlation ids, as sent and as due
	var sent int64
	send := func() error {
		framing.SetRequestCorrelationID(frame, int32(next))
		sentAt[next%uint32(depth)] = time.Since(base)
		next++
		sent++
		_, err := w.Write(frame)
		return err
	}
	inFlight := 0
	for inFlight < depth && sent < budget {
		if res.err = send(); res.err != nil {
			return res
		}
		inFlight++
	}
	var first []byte
	for inFlight > 0 {
		if r.Buffered() == 0 {
			if res.err = w.Flush(); res.err != nil {
				return res
			}
		}
		hdr, err := r.Peek(8)
		if err != nil {
			res.err = err
			return res
		}
		size, err := checkResponseHeader(hdr, expect)
		if err != nil {
			res.err = err
			return res
		}
		now := time.Since(base)
		res.hist.record(now - sentAt[expect%uint32(depth)])
		if res.err = takeResponse(r, &first, expect, size, checkFirst); res.err != nil {
			return res
		}
		expect++
		inFlight--
		res.n++
		res.respBytes += int64(framing.SizeLen + size)
		if sent < budget && now < stop {
			if res.err = send(); res.err != nil {
				return res
			}
			inFlight++
		}
	}
	res.err = w.Flush()
	return res
}

// loadFlags registers the flags load and compare share.
func loadFlags(fs *flag.FlagSet, cfg *loadConfig) {
	fs.IntVar(&cfg.Conns, "c", 8, "connections")
	fs.IntVar(&cfg.Depth, "d", 8, "requests in flight per connection (pipelined)")
	fs.IntVar(&cfg.Size, "s", 100, "bytes per Produce request frame, size prefix included; with --api fetch, bytes of records per response")
	fs.DurationVar(&cfg.Duration, "t", 3*time.Second, "duration of a run")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", 50_000_000, "stop a run after this many requests in all")
	fs.StringVar(&cfg.Topic, "topic", "kbench", "topic produced to or fetched from (partition 0)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "offered load, requests per second in all, spread over the connections (-d still bounds each one's in flight; latency counted from each request's intended send time); 0: as fast as responses come back")
	fs.StringVar(&cfg.API, "api", apiProduce, "request to send: produce, or fetch (each response carries -s bytes of records from the null broker)")
	fs.Func("produce-version", fmt.Sprintf("Produce version sent (default %d; 10+ lets responses carry KIP-951 NodeEndpoints)", produceVersion),
		versionFlag(&cfg.ProduceVersion))
	fs.Func("fetch-version", fmt.Sprintf("Fetch version sent with --api fetch (default %d, the first whose responses can carry NodeEndpoints)", fetchVersion),
		versionFlag(&cfg.FetchVersion))
}

// versionFlag parses an API version into v; validate checks its range.
func versionFlag(v *int16) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 16)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want a version number", s)
		}
		*v = int16(n)
		return nil
	}
}

// loadCmd runs one load against one address and prints what it measured.
func loadCmd(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	var cfg loadConfig
	fs.StringVar(&cfg.Addr, "addr", "", "address to load, HOST:PORT (a broker, or a proxy in front of one)")
	loadFlags(fs, &cfg)
	if err := parse(fs, args); err != nil {
		return err
	}
	res, err := runLoad(cfg)
	if res.Requests > 0 {
		fmt.Printf("kbench load: %s, %d conns x %d in flight, %s, %v%s\n",
			cfg.Addr, cfg.Conns, cfg.Depth, cfg.describe(res.FrameLen), cfg.Duration, cfg.pacing())
		printTable(os.Stdout, []row{{name: cfg.Addr, res: res}}, nil)
	}
	return err
}

// setNoDelay turns Nagle off on c, or on the TCP connection under a TLS
// one.
func setNoDelay(c net.Conn) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// checkResponseHeader checks a response's size and correlation id (its
// first 8 bytes) and returns the size: responses come back in order, so
// the id is the count of responses read before it.
func checkResponseHeader(hdr []byte, expect uint32) (size int, err error) {
	size = int(int32(binary.BigEndian.Uint32(hdr)))
	if size < 4 || size > maxFrame {
		return 0, fmt.Errorf("response size %d out of range", size)
	}
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != int32(expect) {
		return 0, fmt.Errorf("response correlation id %d, want %d: responses out of order", corr, int32(expect))
	}
	return size, nil
}

// takeResponse reads the response whose header was checked: the first
// (expect 0) whole, checked once by checkFirst and kept in first; the
// others skipped.
func takeResponse(r *bufio.Reader, first *[]byte, expect uint32, size int, checkFirst func([]byte) error) error {
	if expect != 0 {
		_, err := r.Discard(framing.SizeLen + size)
		return err
	}
	var err error
	if *first, err = readFrame(r, first); err != nil {
		return err
	}
	return checkFirst(*first)
}
