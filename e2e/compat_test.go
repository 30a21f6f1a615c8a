package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// Sizes of one scenario: enough records to span several batches and all
// partitions, few enough that ~100 scenario runs take minutes.
const (
	compatRecords  = 1000
	compatAborted  = 200
	compatTimeout  = 60 * time.Second
	compatParts    = 4
	compatPerfRecs = 50_000
)

// TestCompat runs every client library through every scenario it
// supports, against each Apache Kafka version run.sh fetched, once direct
// to the broker (the control) and once through kproxy, and writes the
// pass/fail matrix to COMPAT.md. The newest broker runs every scenario,
// older ones the core scenarios.
func TestCompat(t *testing.T) {
	versions := harness.KafkaVersions(t)
	m := newMatrix(driverEntries, compatScenarios)
	for i, v := range versions {
		t.Run("kafka-"+v, func(t *testing.T) {
			var opts []harness.KafkaOption
			if i == 0 { // so do the sasl-origination and oauth columns
				opts = append(opts, harness.WithOrigination(len(driverEntries)), harness.WithOAuthIssuer(harness.StartHydra(t)))
			}
			k := harness.StartKafka(t, v, opts...)
			env := &compatEnv{
				kafka: k,
				plain: harness.StartKproxy(t, "kproxy-plain", k.ProxyAddr, k.Proxied),
				sasl:  harness.StartKproxy(t, "kproxy-sasl", k.ProxySASLAddr, k.ProxiedSASL),
				tls:   startTLSKproxies(t, k),
			}
			if i == 0 { // the cluster column runs on the newest broker only
				env.cluster = startClusterFixture(t, v)
				env.stitch = startStitchFixture(t, k)
				env.governance = startGovernanceFixture(t, k)
				env.rack = startRackFixture(t, env.cluster.kafka, env.stitch.jaeger)
				env.clientMetrics = startClientMetricsFixture(t, env.cluster.kafka)
			}
			t.Run("tls-refusals", env.tls.requireRefusals)
			if i == 0 {
				env.runOriginations(t, m, v)
			}
			for _, e := range driverEntries {
				t.Run(e.id, func(t *testing.T) {
					d := e.driver(t)
					m.named(e, d.Name())
					for _, s := range compatScenarios {
						if i > 0 && !s.core || s.origination {
							continue
						}
						if why := s.unsupported(d); why != "" {
							m.set(v, e, s.name, cellUnsupported, why)
							continue
						}
						t.Run(s.name, func(t *testing.T) {
							// A t.Fatal inside the scenario must still show
							// as a failed cell.
							m.set(v, e, s.name, cellFail, "failed before it finished; see the test log")
							if err := env.runCell(t, d, s); err != nil {
								m.set(v, e, s.name, cellFail, err.Error())
								t.Fatal(err)
							}
							// A pass without a part the library lacks
							// says which.
							m.set(v, e, s.name, cellPass, s.narrowed(d))
						})
					}
				})
			}
			env.requireNoOpenConnections(t)
		})
	}
	if !m.complete(versions) {
		t.Logf("part of the matrix ran: COMPAT.md is left as it was")
		return
	}
	path := filepath.Join(harness.E2EDir(t), "COMPAT.md")
	if err := os.WriteFile(path, []byte(m.markdown(versions)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// compatEnv is one broker with its kproxies: PLAINTEXT, SASL, and the
// four of the TLS cells; with the newest broker, also the three-node
// cluster of the cluster cells and its cluster-mode kproxy, and the
// kproxies of the trace-stitch, governance and rack cells.
type compatEnv struct {
	kafka       *harness.Kafka
	plain, sasl *harness.Kproxy
	tls         *tlsKproxies
	cluster     *clusterFixture    // nil but for the newest broker
	stitch      *stitchFixture     // nil but for the newest broker
	governance  *governanceFixture // nil but for the newest broker
	rack        *rackFixture       // nil but for the newest broker
	// clientMetrics is nil but for the newest broker.
	clientMetrics *clientMetricsFixture
}

// path is a way to reach the broker.
type path struct {
	name    string // "direct", "kproxy", or one of the TLS paths
	proxied bool
	// term is where TLS ends on a TLS cell's proxied path: at kproxy's
	// listener (termListener) or at the broker, kproxy originating it
	// (termUpstream).
	term termination
}

var paths = []path{{name: "direct"}, {name: "kproxy", proxied: true}}

// kproxy is the kproxy a proxied run of s on p goes through.
func (e *compatEnv) kproxy(s scenario, p path) *harness.Kproxy {
	switch {
	case s.stitch:
		return e.stitch.produce
	case s.governance:
		return e.governance.kproxy
	case s.rack:
		kp, _, _ := e.rack.of(p)
		return kp.Kproxy
	case s.clientMetrics:
		return e.clientMetrics.kproxy.Kproxy
	case s.cluster:
		return e.cluster.kproxy.Kproxy
	case s.tls != "":
		return e.tls.of(s.tls, p.term)
	case s.sasl != "":
		return e.sasl
	}
	return e.plain
}

// runCell runs s with d direct (the control) then through kproxy (each
// way of terminating TLS for a TLS cell). All must pass. Through kproxy
// each of the scenario's APIs must have passed through kproxy (the broker
// advertises kproxy's address there, so the client cannot leave it);
// direct, the client must not touch kproxy.
func (e *compatEnv) runCell(t *testing.T, d kclients.Driver, s scenario) error {
	for _, p := range s.paths() {
		start := time.Now()
		conns := e.connections(t)
		kp := e.kproxy(s, p)
		mark := e.tls.mark(t, s, p)
		before := make([]float64, len(s.apis))
		for i, api := range s.apis {
			before[i] = kp.Metric(t, requestsOf(api))
		}
		c := &cell{t: t, env: e, driver: d, path: p, tls: s.tls, cluster: s.cluster, governance: s.governance, topic: slug(fmt.Sprintf("%s-%s-%s", d.Name(), s.name, p.name))}
		if err := s.run(c); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if delta := e.connections(t) - conns; !p.proxied && delta != 0 {
			return fmt.Errorf("direct: the control run made %v connections through kproxy", delta)
		}
		if p.proxied {
			for i, api := range s.apis {
				if kp.Metric(t, requestsOf(api)) == before[i] {
					return fmt.Errorf("%s: the client passed but sent no %s through kproxy", p.name, api)
				}
			}
			if err := e.tls.check(t, s, p, mark); err != nil {
				return err
			}
		}
		t.Logf("%s: pass in %v", p.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// requestsOf is kproxy's request counter series for api.
func requestsOf(api string) string { return `kproxy_requests_total{api="` + api + `"}` }

// kproxies are every kproxy of the environment.
func (e *compatEnv) kproxies() []*harness.Kproxy {
	kps := append([]*harness.Kproxy{e.plain, e.sasl}, e.tls.all()...)
	if e.cluster != nil {
		kps = append(kps, e.cluster.kproxy.Kproxy)
	}
	kps = append(kps, e.stitch.kproxies()...)
	kps = append(kps, e.governance.kproxies()...)
	kps = append(kps, e.rack.kproxies()...)
	kps = append(kps, e.clientMetrics.kproxies()...)
	return kps
}

func (e *compatEnv) connections(t *testing.T) float64 {
	n := 0.0
	for _, kp := range e.kproxies() {
		n += kp.Metric(t, "kproxy_connections_total")
	}
	return n
}

// requireNoOpenConnections fails unless every client connection through
// the kproxies has closed (each with its upstream), a few seconds after
// the last client exited.
func (e *compatEnv) requireNoOpenConnections(t *testing.T) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		open := 0.0
		for _, kp := range e.kproxies() {
			open += kp.Metric(t, "kproxy_connections_open")
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v connections still open through kproxy 15s after the last client finished", open)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// cell is one scenario run by one driver over one path.
type cell struct {
	t       *testing.T
	env     *compatEnv
	driver  kclients.Driver
	path    path
	tls     string // the scenario's: "", "tls" or "mtls"
	cluster bool   // a cluster cell: on e.cluster
	// governance cells go through e.governance's kproxy.
	governance bool
	topic      string
}

// conn is how the driver reaches the broker on this path, with sasl ("",
// "PLAIN" or "SCRAM-SHA-512").
func (c *cell) conn(sasl string) kclients.Conn {
	k := c.env.kafka
	if c.tls != "" {
		return c.tlsConn()
	}
	if c.cluster {
		return kclients.Conn{Bootstrap: c.env.cluster.bootstrap(c.path)}
	}
	if c.governance && c.path.proxied {
		return kclients.Conn{Bootstrap: k.ProxyGovernance}
	}
	switch {
	case sasl == "" && c.path.proxied:
		return kclients.Conn{Bootstrap: k.ProxyAddr}
	case sasl == "":
		return kclients.Conn{Bootstrap: k.Direct}
	}
	cn := kclients.Conn{Bootstrap: k.DirectSASL}
	if c.path.proxied {
		cn.Bootstrap = k.ProxySASLAddr
	}
	cn.SASL = kclients.SASL{Mechanism: sasl, User: harness.ScramUser, Password: harness.ScramPassword}
	if sasl == "PLAIN" {
		cn.SASL.User, cn.SASL.Password = harness.PlainUser, harness.PlainPassword
	}
	return cn
}

func (c *cell) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*compatTimeout)
}

// slug makes a name safe for topics, groups and test names.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
