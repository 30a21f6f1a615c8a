package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const compareHelp = `kbench compare drives the same Produce (or Fetch) load, in one run, at the null broker
directly, through kproxy, and through any other proxy given with --other,
alternating targets for --rounds rounds to smooth out noise (each round
starting one target further on), and prints
each target's figures with its ratio to direct.

The null broker listens on --broker-listen (default 127.0.0.1:39092), so an
L4 proxy for comparison can be started in front of it beforehand:

  socat TCP-LISTEN:39094,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:39092 &
  # or HAProxy in mode tcp (haproxy -f h.cfg), h.cfg:
  #   defaults
  #     mode tcp
  #     timeout connect 5s
  #     timeout client 60s
  #     timeout server 60s
  #   listen kafka
  #     bind 127.0.0.1:39095
  #     server broker 127.0.0.1:39092

  go build -o /tmp/kproxy ./cmd/kproxy
  kbench compare --kproxy-bin /tmp/kproxy \
      --other socat=127.0.0.1:39094 --other haproxy=127.0.0.1:39095,pid=$(pidof haproxy) \
      -c 64 -d 8 -s 100 -t 5s

--tls makes every hop TLS: the null broker listens with TLS, the load
speaks TLS to every target (direct included), and the kproxy compare
starts is configured with tls.listener and tls.upstream (verifying the
broker against the run's CA). The certificates (ECDSA P-256, for 127.0.0.1
and localhost) are made at start in a temp dir, or read from --tls-dir,
written beforehand by "kbench certs --dir DIR" so an --other proxy can be
started with them first: HAProxy with "bind ... ssl crt DIR/tls.pem" and
"server ... ssl verify required ca-file DIR/ca.crt".

--cluster also starts a kproxy in cluster mode (a cluster: section with
one node port, for the null broker's node id, --broker-node-id with
--broker-addr) and drives its node port, where a cluster client's Produce
and Fetch go, reporting it against the single-broker kproxy round by
round. Its responses go through the address rewriter: Produce v10+ and
Fetch v16+ are walked for KIP-951's NodeEndpoints, so --cluster sends
Produce v10 unless --produce-version says otherwise (Fetch is v16 by
default). --api fetch loads Fetch instead of Produce: every response
carries -s bytes of records.

",pid=PID" makes compare report that process's CPU time per request too
(read from /proc/PID/stat); a kproxy it starts itself is always measured.
It counts that one process only: socat's fork mode serves each connection
in a child process, so its pid says nothing; HAProxy's does.

Flags:
`

// other is a proxy the user started, named on the command line.
type other struct {
	name, addr string
	pid        int // 0 when unknown
}

type otherFlags []other

func (o *otherFlags) String() string { return fmt.Sprint(*o) }

// Set parses NAME=HOST:PORT[,pid=PID].
func (o *otherFlags) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" || rest == "" {
		return errors.New("want NAME=HOST:PORT[,pid=PID]")
	}
	t := other{name: name}
	addr, pid, hasPID := strings.Cut(rest, ",pid=")
	t.addr = addr
	if hasPID {
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			return fmt.Errorf("pid %q: want a process id", pid)
		}
		t.pid = n
	}
	*o = append(*o, t)
	return nil
}

// compareCmd runs compare and prints its table.
func compareCmd(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), compareHelp)
		fs.PrintDefaults()
	}
	var cfg loadConfig
	loadFlags(fs, &cfg)
	var others otherFlags
	bin := fs.String("kproxy-bin", "", "kproxy binary to start in front of the null broker")
	kaddr := fs.String("kproxy-addr", "", "a kproxy already running in front of the null broker, HOST:PORT")
	kpid := fs.Int("kproxy-pid", 0, "process id of the --kproxy-addr kproxy, to report its CPU time per request")
	kargs := fs.String("kproxy-args", "", "extra arguments for the started kproxy, space-separated (e.g. \"--config k.yaml\")")
	fs.Var(&others, "other", "another proxy in front of the null broker, NAME=HOST:PORT[,pid=PID] (repeatable)")
	listen := fs.String("broker-listen", "127.0.0.1:39092", "where the null broker compare starts listens")
	external := fs.String("broker-addr", "", "use this already running broker (e.g. from kbench broker) instead of starting one")
	rounds := fs.Int("rounds", 3, "rounds; each runs every target once, for -t")
	traced := fs.Bool("traced", false, "also start a second kproxy (--kproxy-bin) tracing to a null OTLP/HTTP sink, and report it against the untraced one")
	ratio := fs.Float64("trace-ratio", 1, "with --traced: the traced kproxy's tracing.sample_ratio")
	inject := fs.Bool("inject", false, "with --traced: the traced kproxy also has tracing.propagation.inject on (sampled produces get a traceparent in their records)")
	sinkWalk := fs.Bool("sink-walk", false, "with --traced: the null sink counts spans by walking the protobuf wire format instead of decoding every span, taking most of a collector's cost off the shared cores")
	clustered := fs.Bool("cluster", false, "also start a kproxy (--kproxy-bin) in cluster mode, load its node port, and report it against the single-broker one")
	brokerNode := fs.Int("broker-node-id", 0, "the null broker's node id (the one compare starts gets it; give the one of --broker-addr's)")
	useTLS := fs.Bool("tls", false, "TLS on every hop: load to target, and target to the null broker (see above)")
	tlsDir := fs.String("tls-dir", "", "with --tls: the certificates from kbench certs (default: made at start in a temp dir)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *bin != "" && *kaddr != "" {
		return usageError{errors.New("give --kproxy-bin or --kproxy-addr, not both")}
	}
	if *bin == "" && *kaddr == "" && len(others) == 0 {
		return usageError{errors.New("nothing to compare: give --kproxy-bin, --kproxy-addr or --other")}
	}
	if *ratio < 0 || *ratio > 1 {
		return usageError{errors.New("--trace-ratio must be between 0 and 1")}
	}
	if *traced && *bin == "" {
		return usageError{errors.New("--traced needs --kproxy-bin")}
	}
	if *clustered && *bin == "" {
		return usageError{errors.New("--cluster needs --kproxy-bin")}
	}
	if *brokerNode < 0 || *brokerNode > math.MaxInt32 {
		return usageError{fmt.Errorf("--broker-node-id %d: want 0-%d", *brokerNode, math.MaxInt32)}
	}
	if *clustered && !flagSet(fs, "produce-version") {
		cfg.ProduceVersion = 10 // the first whose response the rewriter walks
	}
	if *rounds < 1 {
		return usageError{errors.New("--rounds must be at least 1")}
	}
	if *tlsDir != "" && !*useTLS {
		return usageError{errors.New("--tls-dir needs --tls")}
	}
	if *useTLS && (*traced || *clustered || *external != "") {
		return usageError{errors.New("--tls starts its own TLS broker and kproxy config: not with --traced, --cluster or --broker-addr")}
	}
	kextra := strings.Fields(*kargs)
	var certs *benchCerts
	if *useTLS {
		var err error
		if certs, err = compareCerts(*tlsDir); err != nil {
			return err
		}
		if *tlsDir == "" {
			defer os.RemoveAll(certs.dir)
		}
		cfg.TLS = certs.clientConfig()
		if *bin != "" {
			path := filepath.Join(certs.dir, "kproxy-tls.yaml")
			if err := os.WriteFile(path, []byte(tlsKproxyConfig(certs)), 0o600); err != nil {
				return err
			}
			kextra = append([]string{"--config", path}, kextra...)
		}
	}

	brokerAddr := *external
	if brokerAddr == "" {
		bc := brokerConfig{Listen: *listen, Topic: cfg.Topic, Partitions: 1, NodeID: int32(*brokerNode)}
		if certs != nil {
			bc.TLS = certs.serverConfig()
		}
		b, err := startBroker(bc)
		if err != nil {
			return fmt.Errorf("null broker: %w", err)
		}
		defer b.close()
		brokerAddr = b.Addr()
	}
	targets := []other{{name: "direct", addr: brokerAddr}}
	var tracedKproxy *kproxyChild
	var tracedSink *otlpSink
	switch {
	case *bin != "":
		k, err := startKproxy(*bin, brokerAddr, kextra)
		if err != nil {
			return err
		}
		defer k.stop()
		targets = append(targets, other{name: "kproxy", addr: k.addr, pid: k.cmd.Process.Pid})
		if *traced {
			tk, sink, err := startTraced(*bin, brokerAddr, *ratio, *inject, *sinkWalk, kextra)
			if err != nil {
				return err
			}
			defer sink.close()
			defer tk.stop()
			targets = append(targets, other{name: "kproxy+trace", addr: tk.addr, pid: tk.cmd.Process.Pid})
			tracedKproxy, tracedSink = tk, sink
		}
		if *clustered {
			ck, nodeAddr, err := startClustered(*bin, brokerAddr, int32(*brokerNode), kextra)
			if err != nil {
				return err
			}
			defer ck.stop()
			targets = append(targets, other{name: clusterTarget, addr: nodeAddr, pid: ck.cmd.Process.Pid})
		}
	case *kaddr != "":
		targets = append(targets, other{name: "kproxy", addr: *kaddr, pid: *kpid})
	}
	targets = append(targets, others...)

	rows, err := compare(cfg, targets, *rounds)
	if err != nil {
		return err
	}
	over := ""
	if certs != nil {
		over = ", TLS on every hop"
	}
	fmt.Printf("kbench compare: %d conns x %d in flight, %s, %d rounds x %v per target, null broker %s%s%s\n",
		cfg.Conns, cfg.Depth, cfg.describe(rows[0].res.FrameLen), *rounds, cfg.Duration, brokerAddr, over, cfg.pacing())
	printTable(os.Stdout, rows, &rows[0].res)
	if *clustered {
		printRoundRatios(os.Stdout, rowNamed(rows, clusterTarget), rows[1])
		printMedianCI(os.Stdout, rowNamed(rows, clusterTarget), rows[1])
	}
	if *traced {
		plain, tr := rows[1].res, rows[2].res
		with := ""
		if *inject {
			with = ", propagation.inject on"
		}
		fmt.Printf("tracing (sample_ratio %g%s) keeps %.1f%% of untraced kproxy's req/s (%.0f of %.0f)\n",
			*ratio, with, 100*tr.reqPerSec()/plain.reqPerSec(), tr.reqPerSec(), plain.reqPerSec())
		tracedKproxy.stop() // flushes its spans
		got := tracedSink.spans.Load()
		fmt.Printf("the null OTLP sink received %d spans; the traced kproxy relayed %d requests, %.1f%% of them at sample_ratio %g (%d undecodable exports)\n",
			got, tr.Requests, 100*float64(got)/max(1, float64(tr.Requests)*(*ratio)), *ratio, tracedSink.bad.Load())
	}
	return nil
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// rowNamed is the row of the target called name.
func rowNamed(rows []row, name string) row {
	for _, r := range rows {
		if r.name == name {
			return r
		}
	}
	return row{name: name}
}

// compareCerts loads the certificates of dir, or makes them in a new temp
// dir when dir is empty (the caller removes it).
func compareCerts(dir string) (*benchCerts, error) {
	if dir != "" {
		return loadCerts(dir)
	}
	dir, err := os.MkdirTemp("", "kbench-tls-")
	if err != nil {
		return nil, err
	}
	if err := writeCerts(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := loadCerts(dir)
	if err != nil {
		os.RemoveAll(dir)
	}
	return c, err
}

// tlsKproxyConfig is the kproxy.yaml of a --tls run: the run's server
// certificate to clients, and the broker verified against the run's CA
// (its certificate names 127.0.0.1, the host dialled).
func tlsKproxyConfig(c *benchCerts) string {
	return fmt.Sprintf("tls:\n  listener:\n    cert_file: %s\n    key_file: %s\n  upstream:\n    ca_file: %s\n",
		c.path(certFile), c.path(certKey), c.path(certCA))
}

// startTraced starts kproxy with tracing on, exporting to a new null sink.
func startTraced(bin, broker string, ratio float64, inject, walk bool, extra []string) (*kproxyChild, *otlpSink, error) {
	sink, err := startOTLPSink(walk)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "kbench-traced-")
	if err != nil {
		sink.close()
		return nil, nil, err
	}
	defer os.RemoveAll(dir) // kproxy has read it by the time it listens
	path := filepath.Join(dir, "kproxy.yaml")
	if err := os.WriteFile(path, []byte(tracedConfig(sink, ratio, inject)), 0o600); err != nil {
		sink.close()
		return nil, nil, err
	}
	k, err := startKproxy(bin, broker, append([]string{"--config", path}, extra...))
	if err != nil {
		sink.close()
		return nil, nil, err
	}
	return k, sink, nil
}

// compare runs every target once per round, in turn, each round starting
// one target further on, and sums each target's rounds. The first target
// is the reference (direct).
func compare(cfg loadConfig, targets []other, rounds int) ([]row, error) {
	rows := make([]row, len(targets))
	for i, t := range targets {
		rows[i] = row{name: t.name, hasCPU: t.pid > 0, res: loadResult{Hist: newHistogram()}}
	}
	for r := range rounds {
		// Each round starts one target later than the last, so that no
		// target always runs right after the same one (a proxy that
		// follows another finds the machine as that one left it).
		for k := range targets {
			i := (r + k) % len(targets)
			t := targets[i]
			c := cfg
			c.Addr = t.addr
			var before time.Duration
			if t.pid > 0 {
				var err error
				if before, err = processCPU(t.pid); err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
			}
			res, err := runLoad(c)
			if err != nil {
				return nil, fmt.Errorf("%s (%s), round %d: %w", t.name, t.addr, r+1, err)
			}
			fig := roundFig{reqPerSec: res.reqPerSec()}
			if t.pid > 0 {
				after, err := processCPU(t.pid)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
				rows[i].cpu += after - before
				fig.cpuPerReq = (after - before) / time.Duration(max(res.Requests, 1))
			}
			rows[i].res.add(res)
			rows[i].rounds = append(rows[i].rounds, fig)
			fmt.Fprintf(os.Stderr, "round %d/%d  %-14s %10.0f req/s  p50 %s  p99 %s\n", r+1, rounds, t.name,
				res.reqPerSec(), fmtDur(res.Hist.quantile(0.5)), fmtDur(res.Hist.quantile(0.99)))
		}
	}
	return rows, nil
}
