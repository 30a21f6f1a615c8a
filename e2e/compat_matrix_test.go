package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// driverEntry is a client library of the matrix, registered by its
// driver's file. Its driver is made the first time a test needs it, so a
// library that is not installed fails its own row only.
type driverEntry struct {
	row  int    // place in the matrix, lower first
	id   string // stable test name, e.g. "java"
	make func(t *testing.T) kclients.Driver

	once sync.Once
	d    kclients.Driver
}

var driverEntries []*driverEntry

func registerDriver(row int, id string, make func(t *testing.T) kclients.Driver) {
	driverEntries = append(driverEntries, &driverEntry{row: row, id: id, make: make})
	slices.SortStableFunc(driverEntries, func(a, b *driverEntry) int { return a.row - b.row })
}

// driver makes the entry's driver once; it fails t (with what to
// install) when the library cannot be set up.
func (e *driverEntry) driver(t *testing.T) kclients.Driver {
	first := false
	e.once.Do(func() { first = true; e.d = e.make(t) })
	if e.d == nil && !first {
		t.Fatalf("the %s driver could not be set up: see the first test that tried", e.id)
	}
	return e.d
}

type cellState int

const (
	cellNotRun cellState = iota
	cellPass
	cellFail
	cellUnsupported
)

// matrix collects the result of each client × scenario × broker.
type matrix struct {
	mu        sync.Mutex
	entries   []*driverEntry
	names     map[string]string // entry id → library name and version
	scenarios []scenario
	cells     map[string]cellResult
}

type cellResult struct {
	state cellState
	why   string
}

func newMatrix(es []*driverEntry, ss []scenario) *matrix {
	return &matrix{entries: es, names: map[string]string{}, scenarios: ss, cells: map[string]cellResult{}}
}

// named records the library name of an entry once its driver exists.
func (m *matrix) named(e *driverEntry, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names[e.id] = name
}

func (m *matrix) set(version string, e *driverEntry, s string, st cellState, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells[version+"\x00"+e.id+"\x00"+s] = cellResult{st, why}
}

// complete says whether every cell of every version has a result, so a
// run narrowed with -run does not overwrite COMPAT.md with part of it.
func (m *matrix) complete(versions []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range versions {
		for _, e := range m.entries {
			for _, s := range m.scenarios {
				if (i == 0 || s.core) && m.cells[v+"\x00"+e.id+"\x00"+s.name].state == cellNotRun {
					return false
				}
			}
		}
	}
	return true
}

// markdown renders one table per broker version, with footnotes for the
// reasons a client does not support a scenario and for failures.
func (m *matrix) markdown(versions []string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- written by e2e TestCompat on %s; do not edit -->\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("Each cell ran direct to the broker (the control) and through kproxy; it passes only if both passed and, through kproxy, the scenario's requests (Produce, Fetch, JoinGroup, EndTxn, SaslAuthenticate, ...) were seen passing through kproxy. ")
	b.WriteString("A tls or mtls cell ran three ways: direct to the broker's SSL listener, through a kproxy that terminates the client's TLS (tls.listener) in front of a plaintext listener, and through a kproxy that originates TLS (tls.upstream) to the SSL listener for a plaintext client; mtls adds client certificates, the client's to the broker and to kproxy (client_auth: require), and kproxy's own to a broker listener with ssl.client.auth=required; through kproxy, its TLS handshakes must have been counted and, with mtls, the client's identity logged. ")
	b.WriteString("A cluster cell ran against a three-node KRaft cluster whose brokers advertise their own addresses, on a topic with partitions led by every broker: direct, bootstrapping from one broker, and through a kproxy in cluster mode (a bootstrap listener and a listener per broker, every broker address in responses rewritten); through kproxy, the client's processes, watched in /proc while it ran, must never have held a connection to a broker's real port. ")
	fmt.Fprintf(&b, "A sasl-origination cell ran the client with no credentials through kproxies that authenticate to the broker themselves (sasl.upstream): a producer sending one record every %v through SCRAM-SHA-512 to a SASL_PLAINTEXT listener, and two consumers, through SCRAM-SHA-512 over TLS to a SASL_SSL listener and through OAUTHBEARER (an unsecured JWT), all at once for %v against listeners that end sessions after %v (connections.max.reauth.ms); it passes if both consumers got every record once and each kproxy re-authenticated every connection in use for %d session lifetimes at least %d times, with no failed authentication, no connection closed but by its client and no reconnect; there is no direct run. ",
		originationRun/originationRecords, originationRun, harness.ReauthLifetime, originationMinReauths, originationMinReauths)
	fmt.Fprintf(&b, "An oauth cell ran the client with no credentials through kproxies holding only an OAuth client secret (sasl.upstream.oauth): a real authorization server (Ory Hydra) issued RS256 JWTs of %v lifetime with the client credentials grant, and the broker validated each against Hydra's JWKS with Kafka's OAuthBearerValidatorCallbackHandler, ending each session at its token's expiry; a producer sending one record every %v and a consumer group of one, through a kproxy each, at once for %v; it passes if the consumer got every record once and each kproxy re-authenticated every connection in use for %d token lifetimes at least %d times, with no failed authentication, no connection closed but by its client and no reconnect; there is no direct run. ",
		harness.HydraTokenLifetime, oauthRun/oauthRecords, oauthRun, oauthMinReauths, oauthMinReauths)
	fmt.Fprintf(&b, "A trace-stitch cell produced %d records through a kproxy with tracing.propagation.inject and consumed them through a second kproxy with tracing.links.fetch, both exporting to a real Jaeger; it passes if every record arrived once, byte-equal, carrying (as the consumer library handed it over) a traceparent that names a Produce span of the first kproxy held by Jaeger, and a Fetch span of the second links to each of those spans; there is no direct run. ", stitchRecords)
	fmt.Fprintf(&b, "A governance cell ran through a kproxy with two require rules, acks: all for Produce to %s* topics and partitions: {min: %d} for CreateTopics, and its audit log on: %d records produced with acks=1 must fail with the library's form of INVALID_REQUIRED_ACKS and leave the topic empty, the same records with acks=all must then be read by a consumer group once each, and with an admin client, creating a topic of 1 partition must fail with POLICY_VIOLATION and the rule's message (PolicyViolationException from the Java AdminClient) and leave no topic, creating it with %d partitions and deleting it must succeed, each checked on the broker; the audit log must then hold exactly one line per Produce kproxy refused (INVALID_REQUIRED_ACKS, rule %s) and per CreateTopics and DeleteTopics, each with the outcome the broker's topics bear out; the direct control is the broker taking acks=1 (and the 1-partition topic). ",
		governancePrefix, governanceMinPart, governanceRecords, governanceMinPart, ruleAcks)
	fmt.Fprintf(&b, "A rack cell ran on the three-node cluster, each node in a rack of its own (broker.rack) with replica.selector.class=RackAwareReplicaSelector, with a client that sets no rack: on a topic of one partition led by node %d with a replica on every node, %d records produced and read by a consumer group once each, through a cluster-mode kproxy without proxy.client_rack (the control: every record must be fetched from the leader) and through one with proxy.client_rack set to node %d's rack (every record must be fetched from node %d, the follower in that rack), where each record came from read from the kproxies' Fetch spans in Jaeger (server.address and the records each returned); there is no direct run. ",
		rackLeader, rackRecords, rackClientsNode, rackClientsNode)
	fmt.Fprintf(&b, "A client-metrics cell produced %d records, one every %v, through a cluster-mode kproxy in front of the three-node cluster (whose brokers have no ClientTelemetry plugin) with telemetry.clients on (push_interval %v) exporting over OTLP/HTTP to Prometheus' own OTLP receiver; it passes if the client asked kproxy for its subscription and pushed (GetTelemetrySubscriptions and PushTelemetry seen through kproxy) and Prometheus then held org.apache.kafka.* series of that client sampled since the cell began, with the client id as the client_id and job labels; there is no direct run (a broker without the plugin keeps nothing). ",
		clientMetricsRecords, clientMetricsPace, clientMetricsInterval)
	b.WriteString("pass = passed (pass [n]: without the part the note says the library lacks); FAIL = failed; n/s = the client library does not support it (note); blank = not run for this broker.\n")
	var notes []string
	noteIndex := map[string]int{}
	for i, v := range versions {
		fmt.Fprintf(&b, "\n**Apache Kafka %s**", v)
		if i > 0 {
			b.WriteString(" (core scenarios)")
		}
		b.WriteString("\n\n| client |")
		for _, s := range m.scenarios {
			if i > 0 && !s.core {
				continue
			}
			fmt.Fprintf(&b, " %s |", s.name)
		}
		b.WriteString("\n|---|")
		for _, s := range m.scenarios {
			if i > 0 && !s.core {
				continue
			}
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, e := range m.entries {
			name := m.names[e.id]
			if name == "" {
				name = e.id + " (not set up)"
			}
			fmt.Fprintf(&b, "| %s |", name)
			for _, s := range m.scenarios {
				if i > 0 && !s.core {
					continue
				}
				c := m.cells[v+"\x00"+e.id+"\x00"+s.name]
				text := ""
				switch c.state {
				case cellPass:
					text = "pass"
				case cellFail:
					text = "**FAIL**"
				case cellUnsupported:
					text = "n/s"
				}
				if c.why != "" {
					why := strings.ReplaceAll(strings.SplitN(c.why, "\n", 2)[0], "|", "/")
					n, ok := noteIndex[why]
					if !ok {
						notes = append(notes, why)
						n = len(notes)
						noteIndex[why] = n
					}
					text += fmt.Sprintf(" [%d]", n)
				}
				fmt.Fprintf(&b, " %s |", text)
			}
			b.WriteString("\n")
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
	}
	return b.String()
}
