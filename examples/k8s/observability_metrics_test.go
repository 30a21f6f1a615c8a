package k8s_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/internal/syncbuf"
	"github.com/kproxy/kproxy/internal/testcerts"
)

// Fixed loopback ports of the processes this test starts: kproxy takes
// its addresses from its config file, so they are chosen beforehand,
// below the kernel's ephemeral range.
const (
	mainListen  = "127.0.0.1:29410" // kproxy A: TLS, tracing, policies, kfake behind it
	mainAdmin   = "127.0.0.1:29411"
	faultListen = "127.0.0.1:29420" // kproxy B: plaintext, an upstream that never answers
	faultAdmin  = "127.0.0.1:29421"
	brokerAddr  = "127.0.0.1:29430"
	otlpAddr    = "127.0.0.1:29431"
	stalledAddr = "127.0.0.1:29432"
	saslListen  = "127.0.0.1:29440" // kproxy C: sasl.upstream in front of a SASL-only kfake
	saslAdmin   = "127.0.0.1:29441"
	saslBroker  = "127.0.0.1:29442"
)

// Every metric the dashboard and the alerts use is in the /metrics of
// kproxy processes that relayed real franz-go traffic, with series, and
// has the labels they group it by: a renamed metric or label, or one that
// only exists in a dashboard, fails here.
//
// Three kproxy processes run, each from the binary built from this
// repository. A terminates TLS from clients, traces to an OTLP/HTTP sink
// the test serves, has a reject and a throttle rule, and fronts a kfake
// broker: a client produces (throttled), produces to a rejected topic, a
// plaintext client knocks on its TLS port, one client sends an oversized
// frame and one a malformed header. B fronts an upstream that reads and
// never answers, with max_connections 1: a flood is closed at
// max_unread_bytes, a second client is refused, and once the upstream is
// gone a client's dial fails. C authenticates to a kfake broker that
// requires SASL/PLAIN with credentials files: a client without SASL
// produces through it, then, the password file rewritten wrong, a client
// is reset. The metric families of the three scrapes are compared with
// the names the PromQL of both files selects, and the label values it
// filters on with the series kproxy exports.
func TestObservabilityMetricsExist(t *testing.T) {
	names, groupedBy, filters := metricNames(t)
	if t.Failed() {
		t.FailNow()
	}
	bin := filepath.Join(t.TempDir(), "kproxy")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/kproxy/kproxy/cmd/kproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build kproxy: %v\n%s", err, out)
	}

	main := startMain(t, bin)
	driveMain(t, main)
	fault := startFault(t, bin)

	// The counters the traffic must have moved; then every name used.
	series := map[string]float64{}
	waitMetrics(t, mainAdmin, main.proc, series, []string{
		`kproxy_requests_total{api="Produce"}`,
		`kproxy_policy_rejected_total{rule="audit-is-read-only"}`,
		`kproxy_policy_throttled_total{rule="orders-4kib"}`,
		`kproxy_oversize_closes_total{side="client"}`,
		`kproxy_protocol_errors_total{kind="malformed_client"}`,
		`kproxy_tls_handshakes_total{result="not_tls",side="client"}`,
		`kproxy_trace_spans_exported_total`,
		`kproxy_ready`,
		`kproxy_consumer_lag_records{client_id="observability-consumer",group="observability",partition="0",topic="orders"}`,
		`kproxy_client_metrics_pushes_total{result="ok"}`,
		`kproxy_client_metrics_exported_total`,
	})
	driveFault(t, fault)
	waitMetrics(t, faultAdmin, fault, series, []string{
		`kproxy_unread_overflow_closes_total{side="client"}`,
		`kproxy_connections_refused_total{reason="max_connections"}`,
		`kproxy_upstream_dial_failures_total`,
	})
	sasl := startSASL(t, bin)
	driveSASL(t, sasl)
	waitMetrics(t, saslAdmin, sasl.proc, series, []string{
		`kproxy_sasl_authentications_total{kind="initial",result="ok"}`,
		`kproxy_sasl_authentications_total{kind="initial",result="error"}`,
	})

	have := map[string]bool{}
	labels := map[string]map[string]bool{}
	byName := map[string][]map[string]string{} // each series' labels
	for s := range series {
		name := seriesName(s)
		have[name] = true
		if labels[name] == nil {
			labels[name] = map[string]bool{}
		}
		ls := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(s[len(name):], -1) {
			labels[name][m[1]] = true
			ls[m[1]] = m[2]
		}
		byName[name] = append(byName[name], ls)
	}
	for _, f := range filters {
		if have[f.name] && !slices.ContainsFunc(byName[f.name], f.matches) {
			t.Errorf("%s selects %s, which matches none of kproxy's series of it: a label value kproxy does not use", f.where, f)
		}
	}
	for name, ls := range groupedBy {
		for l, where := range ls {
			if have[name] && !labels[name][l] {
				t.Errorf("%s groups %s by %s, a label kproxy does not put on it", where, name, l)
			}
		}
	}
	var used []string
	for name, where := range names {
		used = append(used, family(name))
		if !have[name] {
			t.Errorf("%s uses %s, which kproxy's /metrics does not have", where, name)
		}
	}
	slices.Sort(used)
	t.Logf("metric families the dashboard and rules use: %v", slices.Compact(used))
}

// proc is a kproxy process and its output, for failure messages.
type proc struct {
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

// startBroker starts an in-process kfake on addr that advertises kproxy's
// listen address, closes it when the test ends, and returns the address
// kproxy dials.
func startBroker(t *testing.T, addr, listen string, opts ...kfake.Opt) (upstream string) {
	t.Helper()
	b, err := embedded.ReserveAt(addr)
	if err != nil {
		t.Fatalf("broker port %s: %v", addr, err)
	}
	cluster, err := b.Start(listen, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return b.Addr()
}

func runKproxy(t *testing.T, bin, config, admin string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, "run", "--config", path), out: &syncbuf.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	c := http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := c.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("kproxy did not serve /healthz on %s within 30s: %v\n%s", admin, err, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mainEnv is kproxy A and what its clients need.
type mainEnv struct {
	*proc
	ca *testcerts.Cert
}

func startMain(t *testing.T, bin string) mainEnv {
	ca := testcerts.NewCA(t, "observability CA")
	crt, key := ca.Server(t).Write(t, t.TempDir(), "tls.crt", "tls.key")

	// The OTLP/HTTP sink: it accepts every export, as a collector does.
	ln, err := net.Listen("tcp", otlpAddr)
	if err != nil {
		t.Fatalf("OTLP sink: %v", err)
	}
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go sink.Serve(ln)
	t.Cleanup(func() { sink.Close() })

	upstream := startBroker(t, brokerAddr, mainListen, kfake.SeedTopics(1, "orders", "audit.log"))

	config := fmt.Sprintf(`proxy:
  listen: %s
  upstream: %s
admin:
  listen: %s
framing:
  max_request_bytes: 1048576
tracing:
  enabled: true
  protocol: http/protobuf
  endpoint: http://%s
  sample_ratio: 1
tls:
  listener:
    cert_file: %s
    key_file: %s
policies:
  rules:
    - name: audit-is-read-only
      match: {apis: [Produce], topics: ["audit.*"]}
      action: reject
    - name: orders-4kib
      match: {apis: [Produce], topics: [orders]}
      limits: {bytes_per_second: 4096, key: client_id}
      action: throttle
telemetry:
  lag:
    enabled: true
  clients:
    enabled: true
    push_interval: 1s
`, mainListen, upstream, mainAdmin, otlpAddr, crt, key)
	p := runKproxy(t, bin, config, mainAdmin)
	return mainEnv{proc: p, ca: ca}
}

func driveMain(t *testing.T, env mainEnv) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tlsConfig := &tls.Config{RootCAs: env.ca.Pool()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(mainListen), kgo.DialTLSConfig(tlsConfig),
		kgo.ClientID("observability"), kgo.RecordRetries(1), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Two produces of 8 KiB, over the rule's 4 KiB/s,: the second is throttled (or
	// the first, if the bucket starts empty).
	for i := range 2 {
		r := &kgo.Record{Topic: "orders", Value: make([]byte, 8<<10)}
		rand.Read(r.Value)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d to orders: %v\n%s", i, err, env.out.String())
		}
	}
	// A group consumer reads them back: its lag is measured.
	cons, err := kgo.NewClient(kgo.SeedBrokers(mainListen), kgo.DialTLSConfig(tlsConfig), kgo.ClientID("observability-consumer"),
		kgo.ConsumerGroup("observability"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for read := 0; read < 2; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the 2 records of orders: %v\n%s", read, ctx.Err(), env.out.String())
		}
		read += fs.NumRecords()
	}
	cons.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "audit.log", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to audit.log: %v, want TOPIC_AUTHORIZATION_FAILED from the reject rule", err)
	}

	// A plaintext Kafka client on the TLS port.
	plain, err := net.Dial("tcp", mainListen)
	if err != nil {
		t.Fatal(err)
	}
	plain.Write(apiVersionsV0(1))
	expectEOF(t, plain, "a plaintext client on the TLS port")

	// A frame over framing.max_request_bytes, and a header too short to
	// be one, each on a TLS connection of its own.
	for _, c := range []struct {
		what  string
		frame []byte
	}{
		{"an oversized frame", binary.BigEndian.AppendUint32(nil, 64<<20)},
		{"a malformed header", append(binary.BigEndian.AppendUint32(nil, 4), 0, 18, 0, 0)},
	} {
		conn, err := tls.Dial("tcp", mainListen, tlsConfig)
		if err != nil {
			t.Fatalf("%s: dial: %v", c.what, err)
		}
		conn.Write(c.frame)
		expectEOF(t, conn, c.what)
	}
}

func startFault(t *testing.T, bin string) *proc {
	ln, err := net.Listen("tcp", stalledAddr)
	if err != nil {
		t.Fatalf("stalled upstream: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }() // reads, never answers
		}
	}()
	stalledListener = ln
	config := fmt.Sprintf(`proxy:
  listen: %s
  upstream: %s
  max_unread_bytes: 1048576
  max_connections: 1
  dial_timeout: 2s
admin:
  listen: %s
framing:
  max_request_bytes: 65536
  max_response_bytes: 65536
correlate:
  max_in_flight: 8
`, faultListen, stalledAddr, faultAdmin)
	return runKproxy(t, bin, config, faultAdmin)
}

// stalledListener is B's upstream, closed to make B's dials fail.
var stalledListener net.Listener

func driveFault(t *testing.T, p *proc) {
	t.Helper()
	flood, err := net.Dial("tcp", faultListen)
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	// While the flood holds B's one connection, a second client is refused.
	// The flood's first request makes sure B has accepted it.
	if _, err := flood.Write(apiVersionsV0(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, faultAdmin, "kproxy_connections_open 1", p)
	expectClosedOnArrival(t, faultListen, "a client over max_connections")

	batch := make([]byte, 0, 64<<10)
	for frame := apiVersionsV0(2); len(batch)+len(frame) <= cap(batch); {
		batch = append(batch, frame...)
	}
	flood.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent := 0; sent < 64<<20; sent += len(batch) {
		if _, err := flood.Write(batch); err != nil {
			break
		}
	}
	expectEOF(t, flood, "a flood at an upstream that never answers")
	waitFor(t, faultAdmin, "kproxy_connections_open 0", p)

	stalledListener.Close()
	expectClosedOnArrival(t, faultListen, "a client whose upstream dial fails")
}

// apiVersionsV0 is an ApiVersions v0 request frame with correlation id id
// and a null client id.
func apiVersionsV0(id int32) []byte {
	body := binary.BigEndian.AppendUint16(nil, 18)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(id))
	body = binary.BigEndian.AppendUint16(body, 0xffff)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// expectClosedOnArrival dials addr and expects kproxy to close or reset
// the connection; a reset can reach the dialler before its connect
// returns.
func expectClosedOnArrival(t *testing.T, addr, what string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatalf("%s: dial: %v", what, err)
	}
	expectEOF(t, c, what)
}

// expectEOF reads c until kproxy closes it.
func expectEOF(t *testing.T, c net.Conn, what string) {
	t.Helper()
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
		t.Fatalf("%s: kproxy did not close the connection: %v", what, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// scrape returns admin's /metrics as series (name and labels as printed)
// to values.
func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", admin, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("scrape %s: unreadable line %q", admin, line)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", admin, err)
	}
	return out
}

// labelPair finds the label names and values in a series'
// {name="value",...}; a value is as printed, escapes and all.
var labelPair = regexp.MustCompile(`[{,]([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// seriesName is the metric name of a series as printed.
func seriesName(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		return s[:i]
	}
	return s
}

// waitMetrics scrapes admin until every series in want is above zero,
// then adds the scrape to into. Export and counting happen after the
// client is answered, so the test waits for them rather than sleeping.
func waitMetrics(t *testing.T, admin string, p *proc, into map[string]float64, want []string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		got := scrape(t, admin)
		var missing []string
		for _, w := range want {
			if got[w] <= 0 {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			for k, v := range got {
				into[k] = v
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 60s these are still absent or zero: %v\nkproxy's output:\n%s", admin, missing, p.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitFor scrapes admin until its /metrics has the line want.
func waitFor(t *testing.T, admin, want string, p *proc) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\n"+want+"\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /metrics never had %q\n%s", admin, want, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
