package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The tls and mtls columns. Each cell runs a produce/consume round trip
// three ways, all on the one broker (harness.KafkaTLS):
//
//   - direct: the client's TLS to the broker's SSL listener (the control);
//   - termListener: the client's TLS to kproxy's tls.listener, kproxy
//     plaintext to the broker (the broker-pod sidecar);
//   - termUpstream: the client plaintext to kproxy, kproxy's tls.upstream
//     to the broker's SSL listener (the client-pod sidecar).
//
// mtls adds client certificates: the client's to the broker (direct) and
// to kproxy (client_ca_file, client_auth require), and kproxy's own to a
// broker listener with ssl.client.auth=required.

// termination is where TLS ends on a TLS cell's proxied path.
type termination int

const (
	termListener termination = iota + 1 // kproxy terminates the client's TLS
	termUpstream                        // kproxy originates TLS to the broker
)

// paths are the ways a cell of s reaches the broker.
func (s scenario) paths() []path {
	if s.stitch {
		return stitchPaths
	}
	if s.rack {
		return rackPaths
	}
	if s.clientMetrics {
		return clientMetricsPaths
	}
	if s.tls == "" {
		return paths
	}
	return []path{
		{name: "direct"},
		{name: "kproxy-terminates", proxied: true, term: termListener},
		{name: "kproxy-originates", proxied: true, term: termUpstream},
	}
}

// tlsConn is how the driver reaches the broker on a TLS cell's path.
func (c *cell) tlsConn() kclients.Conn {
	k := c.env.kafka.TLS
	mtls := c.tls == "mtls"
	client := kclients.TLS{CAFile: k.Certs.CA}
	if mtls {
		client.CertFile, client.KeyFile = k.Certs.ClientCert, k.Certs.ClientKey
	}
	switch {
	case !c.path.proxied:
		return kclients.Conn{Bootstrap: pick(mtls, k.DirectMTLS, k.DirectTLS), TLS: client}
	case c.path.term == termListener:
		return kclients.Conn{Bootstrap: pick(mtls, k.ProxyTermMTLSAddr, k.ProxyTermTLSAddr), TLS: client}
	}
	return kclients.Conn{Bootstrap: pick(mtls, k.ProxyOrigMTLSAddr, k.ProxyOrigTLSAddr)}
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// tlsKproxies are the four kproxies of the TLS cells, each in front of
// its own broker listener, which advertises the kproxy's address.
type tlsKproxies struct {
	kafka             *harness.Kafka
	termTLS, termMTLS *harness.Kproxy // tls.listener
	origTLS, origMTLS *harness.Kproxy // tls.upstream
}

// startTLSKproxies starts them with their tls: sections written to files.
func startTLSKproxies(t *testing.T, k *harness.Kafka) *tlsKproxies {
	c := k.TLS.Certs
	dir := t.TempDir()
	conf := func(name, yaml string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	listener := fmt.Sprintf("tls:\n  listener:\n    cert_file: %q\n    key_file: %q\n", c.ServerCert, c.ServerKey)
	mlistener := listener + fmt.Sprintf("    client_ca_file: %q\n    client_auth: require\n", c.CA)
	upstream := fmt.Sprintf("tls:\n  upstream:\n    ca_file: %q\n", c.CA)
	mupstream := upstream + fmt.Sprintf("    cert_file: %q\n    key_file: %q\n", c.ProxyCert, c.ProxyKey)
	return &tlsKproxies{
		kafka:    k,
		termTLS:  harness.StartKproxy(t, "kproxy-tls-listener", k.TLS.ProxyTermTLSAddr, k.TLS.TermTLS, "--config", conf("listener", listener)),
		termMTLS: harness.StartKproxy(t, "kproxy-mtls-listener", k.TLS.ProxyTermMTLSAddr, k.TLS.TermMTLS, "--config", conf("mlistener", mlistener)),
		origTLS:  harness.StartKproxy(t, "kproxy-tls-upstream", k.TLS.ProxyOrigTLSAddr, k.TLS.OrigTLS, "--config", conf("upstream", upstream)),
		origMTLS: harness.StartKproxy(t, "kproxy-mtls-upstream", k.TLS.ProxyOrigMTLSAddr, k.TLS.OrigMTLS, "--config", conf("mupstream", mupstream)),
	}
}

func (k *tlsKproxies) all() []*harness.Kproxy {
	return []*harness.Kproxy{k.termTLS, k.termMTLS, k.origTLS, k.origMTLS}
}

// of is the kproxy of mode ("tls" or "mtls") and termination.
func (k *tlsKproxies) of(mode string, term termination) *harness.Kproxy {
	switch {
	case term == termListener && mode == "mtls":
		return k.termMTLS
	case term == termListener:
		return k.termTLS
	case mode == "mtls":
		return k.origMTLS
	}
	return k.origTLS
}

// handshakeSeries is kproxy's counter of completed handshakes on the side
// that a path's kproxy speaks TLS on: client (tls.listener) or upstream
// (labels in the exposition's order, by name).
func handshakeSeries(term termination) string {
	side := "client"
	if term == termUpstream {
		side = "upstream"
	}
	return `kproxy_tls_handshakes_total{result="ok",side="` + side + `"}`
}

// tlsMark is what a TLS cell's proxied run is checked against afterwards.
type tlsMark struct {
	handshakes float64 // kproxy's completed handshakes on its TLS side
	principals int     // "connection opened" lines naming the client's identity
}

// principalField is how kproxy's "connection opened" line names the
// identity of the client certificate (its subject CN here).
const principalField = `"principal":"` + harness.ClientCN + `"`

// mark notes the counts of a TLS cell's proxied run before it starts.
func (k *tlsKproxies) mark(t *testing.T, s scenario, p path) tlsMark {
	if s.tls == "" || !p.proxied {
		return tlsMark{}
	}
	kp := k.of(s.tls, p.term)
	return tlsMark{kp.Metric(t, handshakeSeries(p.term)), strings.Count(kp.Output(), principalField)}
}

// check requires that the run did its TLS at kproxy (the handshake count
// grew) and, where kproxy verified the client's certificate, that kproxy
// logged the client's identity on the connections it opened.
func (k *tlsKproxies) check(t *testing.T, s scenario, p path, m tlsMark) error {
	if s.tls == "" || !p.proxied {
		return nil
	}
	kp := k.of(s.tls, p.term)
	if n := kp.Metric(t, handshakeSeries(p.term)); n <= m.handshakes {
		return fmt.Errorf("%s: the client passed but kproxy counted no new TLS handshake (%s stayed at %v)", p.name, handshakeSeries(p.term), n)
	}
	if s.tls == "mtls" && p.term == termListener && strings.Count(kp.Output(), principalField) <= m.principals {
		return fmt.Errorf("%s: the client passed but kproxy logged no connection with its identity (%s)", p.name, principalField)
	}
	return nil
}

// requireRefusals checks that the mTLS listeners the mtls cells pass
// through do require a client certificate: without one, the broker's and
// kproxy's refuse the connection; with one, both answer. Otherwise an
// mtls cell would prove no more than a tls cell.
func (k *tlsKproxies) requireRefusals(t *testing.T) {
	c := k.kafka.TLS.Certs
	anon := kclients.TLS{CAFile: c.CA}
	withCert := kclients.TLS{CAFile: c.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey}
	for _, target := range []struct{ name, addr string }{
		{"broker mTLS listener", k.kafka.TLS.DirectMTLS},
		{"kproxy mTLS listener", k.kafka.TLS.ProxyTermMTLSAddr},
	} {
		if err := tlsMetadata(anon, target.addr); err == nil {
			t.Errorf("%s at %s answered a client without a certificate", target.name, target.addr)
		} else {
			t.Logf("%s refused a client without a certificate: %v", target.name, err)
		}
		if err := tlsMetadata(withCert, target.addr); err != nil {
			t.Errorf("%s at %s refused the client certificate: %v", target.name, target.addr, err)
		}
	}
}

// tlsMetadata asks addr for Metadata over TLS with franz-go, without
// retries.
func tlsMetadata(tc kclients.TLS, addr string) error {
	cfg, err := tc.Config()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	return err
}
