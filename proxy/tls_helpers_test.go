package proxy

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/internal/testcerts"
	"github.com/kproxy/kproxy/tlsconf"
	"github.com/kproxy/kproxy/tracing"
)

// tlsSides says which sides of kproxy speak TLS in a test: client (clients
// to kproxy), mutual (kproxy asks clients for a certificate), upstream
// (kproxy to kfake) and upstreamMutual (kfake asks kproxy for one).
type tlsSides struct{ client, mutual, upstream, upstreamMutual bool }

func (s tlsSides) String() string {
	name := func(on, mutual bool) string {
		switch {
		case mutual:
			return "mtls"
		case on:
			return "tls"
		}
		return "plain"
	}
	return name(s.client, s.mutual) + "-to-" + name(s.upstream, s.upstreamMutual)
}

// tlsWorld is a kproxy with TLS on the sides asked for, in front of kfake
// (itself TLS when the upstream side is), with the certificates made for
// the test.
type tlsWorld struct {
	*testEnv
	ca       *testcerts.Cert
	listener *testcerts.SecretDir // the listener's Secret (tls.crt, tls.key, ca.crt); nil when plaintext
	store    *tlsconf.Store
	tm       *prometheus.Registry
	metrics  *tlsconf.Metrics
}

// startTLSKfake runs the world for sides; cfg may change the tls section
// before it is loaded.
func startTLSKfake(t testing.TB, sides tlsSides, kopts []kfake.Opt, cfg func(*tlsconf.Config), opts ...envOpt) *tlsWorld {
	t.Helper()
	return startTracedTLSKfake(t, sides, kopts, cfg, nil, opts...)
}

// startTracedTLSKfake is startTLSKfake with a tracer.
func startTracedTLSKfake(t testing.TB, sides tlsSides, kopts []kfake.Opt, cfg func(*tlsconf.Config), tr *tracing.Tracer, opts ...envOpt) *tlsWorld {
	t.Helper()
	w, broker := newTLSWorld(t, sides, cfg)
	if broker != nil {
		kopts = append(kopts, kfake.TLS(broker))
	}
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	w.testEnv = startProxyWith(t, b.Addr(), tr, func(s *Server) { s.SetTLS(w.store, w.metrics) }, opts...)
	c, err := b.Start(w.addr, kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w.cluster = c
	return w
}

// startTLSProxy is a kproxy with TLS on the client side only, in front of
// upstream (a plaintext HOST:PORT, such as a scripted broker).
func startTLSProxy(t testing.TB, upstream string, mutual bool, opts ...envOpt) *tlsWorld {
	t.Helper()
	w, _ := newTLSWorld(t, tlsSides{client: true, mutual: mutual}, nil)
	w.testEnv = startProxyWith(t, upstream, nil, func(s *Server) { s.SetTLS(w.store, w.metrics) }, opts...)
	return w
}

// newTLSWorld makes the certificates and the loaded tls section for
// sides, and the broker's TLS when the upstream side speaks it.
func newTLSWorld(t testing.TB, sides tlsSides, cfg func(*tlsconf.Config)) (*tlsWorld, *tls.Config) {
	t.Helper()
	w := &tlsWorld{ca: testcerts.NewCA(t, "kproxy test CA"), tm: prometheus.NewRegistry()}
	tc := tlsconf.Defaults()
	if sides.client {
		w.listener = testcerts.NewSecretDir(t, testcerts.Files(w.ca.Server(t), w.ca))
		tc.Listener = &tlsconf.Listener{CertFile: w.listener.Path("tls.crt"), KeyFile: w.listener.Path("tls.key")}
		if sides.mutual {
			tc.Listener.ClientCAFile = w.listener.Path("ca.crt")
		}
	}
	var broker *tls.Config
	if sides.upstream {
		broker = &tls.Config{Certificates: []tls.Certificate{w.ca.Server(t).TLS(t)}}
		if sides.upstreamMutual {
			broker.ClientAuth, broker.ClientCAs = tls.RequireAndVerifyClientCert, w.ca.Pool()
		}
		up := testcerts.NewSecretDir(t, testcerts.Files(w.ca.Client(t, "kproxy"), w.ca))
		tc.Upstream = &tlsconf.Upstream{CAFile: up.Path("ca.crt")}
		if sides.upstreamMutual {
			tc.Upstream.CertFile, tc.Upstream.KeyFile = up.Path("tls.crt"), up.Path("tls.key")
		}
	}
	if cfg != nil {
		cfg(&tc)
	}
	if err := tc.Validate(); err != nil {
		t.Fatal(err)
	}
	w.metrics = tlsconf.NewMetrics(w.tm)
	store, err := tlsconf.New(tc, w.metrics, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	w.store = store
	return w, broker
}

// clientTLS is what a client of kproxy needs for sides: nil for a
// plaintext listener; with mutual, a certificate naming the client as
// cn and uris.
func (w *tlsWorld) clientTLS(t testing.TB, sides tlsSides, cn string, uris ...string) *tls.Config {
	if !sides.client {
		return nil
	}
	c := &tls.Config{RootCAs: w.ca.Pool(), MinVersion: tls.VersionTLS12}
	if sides.mutual {
		c.Certificates = []tls.Certificate{w.ca.Client(t, cn, uris...).TLS(t)}
	}
	return c
}

// handshakes is kproxy_tls_handshakes_total for side and result.
func (w *tlsWorld) handshakes(side, result string) float64 {
	mfs, _ := w.tm.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_tls_handshakes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var s, r string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "side":
					s = l.GetValue()
				case "result":
					r = l.GetValue()
				}
			}
			if s == side && r == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitHandshakes waits until side has counted n handshakes with result.
func (w *tlsWorld) waitHandshakes(t testing.TB, side, result string, n float64) {
	t.Helper()
	waitFor(t, 10*time.Second, side+" handshakes "+result, func() bool { return w.handshakes(side, result) >= n })
}

// opened is kproxy_connections_open.
func (w *tlsWorld) opened() float64 { return testutil.ToFloat64(w.m.Open) }
