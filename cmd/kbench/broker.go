package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kproxy/kproxy/framing"
)

// brokerConfig is what the null broker says about itself.
type brokerConfig struct {
	Listen     string
	Advertise  string      // HOST:PORT in Metadata; the listen address when empty
	Topic      string      // the topic Metadata lists when asked for all topics
	Partitions int         // partitions of every topic it knows
	TLS        *tls.Config // when set, clients must speak TLS
	// NodeID is the node id it names itself by in Metadata, as leader of
	// every partition. A cluster-mode kproxy serves it on a node port only
	// when it is within the kproxy's cluster.node_ids.
	NodeID int32
}

// nullBroker answers the requests a producer, a consumer and kbench's load
// generator send, at once and with valid responses of the request's
// version, and stores nothing. It is the fastest broker there can be, so a
// proxy in front of it is measured rather than the broker.
type nullBroker struct {
	cfg  brokerConfig
	ln   net.Listener
	host string
	port int32

	offsets   atomic.Int64 // next base offset handed to a produce
	producers atomic.Int64 // last producer id handed out
	members   atomic.Int64 // last group member id handed out

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// startBroker listens and serves in the background until close.
func startBroker(cfg brokerConfig) (*nullBroker, error) {
	if cfg.Partitions < 1 {
		return nil, fmt.Errorf("partitions must be at least 1, not %d", cfg.Partitions)
	}
	if cfg.Topic == "" {
		cfg.Topic = "kbench"
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, port, err := splitHostPort(adv)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("advertise: %w", err)
	}
	b := &nullBroker{cfg: cfg, ln: ln, host: host, port: port, conns: make(map[net.Conn]struct{})}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func splitHostPort(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, int32(port), nil
}

// Addr is where the broker listens.
func (b *nullBroker) Addr() string { return b.ln.Addr().String() }

// close stops accepting, closes every connection and waits for their
// goroutines.
func (b *nullBroker) close() {
	b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *nullBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serve(c)
	}
}

// serve is one connection's loop: read a frame, answer it into the
// buffered writer, and flush only when no more input is buffered, so
// pipelined requests that arrived together leave in one write.
func (b *nullBroker) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	setNoDelay(c)
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	var in, out []byte
	for {
		frame, err := readFrame(r, &in)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				fmt.Fprintln(os.Stderr, "kbench broker:", c.RemoteAddr(), err)
			}
			return
		}
		h, err := framing.ParseRequestHeader(frame)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kbench broker:", c.RemoteAddr(), err)
			return
		}
		if out, err = b.answer(out[:0], h, frame); err != nil {
			fmt.Fprintln(os.Stderr, "kbench broker:", c.RemoteAddr(), err)
			return
		}
		if _, err := w.Write(out); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin one huge response's buffer
		}
	}
}

// brokerCmd runs the null broker until SIGINT or SIGTERM.
func brokerCmd(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	var cfg brokerConfig
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:39092", "address to listen on, HOST:PORT")
	fs.StringVar(&cfg.Advertise, "advertise", "", "HOST:PORT to advertise in Metadata (default: the listen address)")
	fs.StringVar(&cfg.Topic, "topic", "kbench", "topic listed when a client asks for all topics (any topic asked for is known)")
	fs.IntVar(&cfg.Partitions, "partitions", 1, "partitions of every topic")
	node := fs.Int("node-id", 0, "node id it gives itself in Metadata (within a cluster-mode kproxy's cluster.node_ids)")
	tlsDir := fs.String("tls-dir", "", "speak TLS only, presenting the server certificate of this directory (from kbench certs)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *node < 0 || *node > math.MaxInt32 {
		return usageError{fmt.Errorf("--node-id %d: want 0-%d", *node, math.MaxInt32)}
	}
	cfg.NodeID = int32(*node)
	if *tlsDir != "" {
		certs, err := loadCerts(*tlsDir)
		if err != nil {
			return err
		}
		cfg.TLS = certs.serverConfig()
	}
	b, err := startBroker(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("kbench null broker listening on %s (advertising node %d at %s:%d)\n", b.Addr(), cfg.NodeID, b.host, b.port)
	waitForStop()
	b.close()
	return nil
}
