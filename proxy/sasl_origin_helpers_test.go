package proxy

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/internal/kfaketest"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// originEnv is kproxy authenticating to a SASL-only kfake with credentials
// it reads from files, in front of clients configured without SASL.
type originEnv struct {
	*testEnv
	sm       *sasl.Metrics
	reg      *prometheus.Registry
	dir      string // the credentials files
	keys     func(key int16) int
	password string
	saslLogs *logBuffer // the originator's log
}

// rightPassword is alice's password at the broker.
const rightPassword = "s3cr3t-Pa55"

// startOrigin runs kfake with SASL on (user alice, password, mechanism
// mech, and kopts) and kproxy originating mech with alice's credentials.
func startOrigin(t testing.TB, mech, password string, kopts []kfake.Opt, opts ...envOpt) *originEnv {
	t.Helper()
	return startOriginWith(t, mech, password, kopts, originSetup{}, opts...)
}

// originSetup is what a test adds to startOrigin's world.
type originSetup struct {
	tr *tracing.Tracer
	// via, when set, returns the address kproxy dials instead of
	// kfake's (a tap in between).
	via func(kfake string) string
	// setup runs on the server before SetSasl (SetTLS).
	setup func(*Server)
	// broker, when set, is kfake's TLS.
	broker *tls.Config
	// upstream, when set, changes sasl.upstream before it is loaded.
	upstream func(*sasl.Upstream)
}

// startOriginWith is startOrigin with what o adds. The originator logs
// to saslLogs, at debug level.
func startOriginWith(t testing.TB, mech, password string, kopts []kfake.Opt, o originSetup, opts ...envOpt) *originEnv {
	t.Helper()
	dir := t.TempDir()
	writeSecret(t, dir, "username", "alice")
	writeSecret(t, dir, "password", password)
	reg := prometheus.NewRegistry()
	sm := sasl.NewMetrics(reg)
	saslLogs := &logBuffer{}
	up := &sasl.Upstream{Mechanism: mech,
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}
	if o.upstream != nil {
		o.upstream(up)
	}
	orig, err := sasl.New(sasl.Config{Upstream: up}, sm,
		zerolog.New(saslLogs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	kopts = append([]kfake.Opt{kfake.EnableSASL(), kfake.Superuser(mech, "alice", rightPassword)}, kopts...)
	if o.broker != nil {
		kopts = append(kopts, kfake.TLS(o.broker))
	}
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	upstream := b.Addr()
	if o.via != nil {
		upstream = o.via(upstream)
	}
	env := startProxyWith(t, upstream, o.tr, func(s *Server) {
		if o.setup != nil {
			o.setup(s)
		}
		s.SetSasl(orig)
	}, opts...)
	c, err := b.Start(env.addr, kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.cluster = c
	keys := kfaketest.CountKeys(c)
	return &originEnv{testEnv: env, sm: sm, reg: reg, dir: dir, keys: keys, password: password, saslLogs: saslLogs}
}

func writeSecret(t testing.TB, dir, name, value string) {
	t.Helper()
	// A new file renamed over the old, as a Secret volume's swap does.
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// auths is kproxy's count of authentications of a kind and result.
func (e *originEnv) auths(kind, result string) float64 { return saslAuths(e.reg, kind, result) }

// saslAuths is kproxy_sasl_authentications_total{kind, result} in reg.
func saslAuths(reg *prometheus.Registry, kind, result string) float64 {
	mf, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range mf {
		if f.GetName() != "kproxy_sasl_authentications_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// startReauthOrigin is SASL origination (SCRAM-SHA-256) in front of a
// kfake whose sessions last a second (connections.max.reauth.ms 1000),
// with topic, over a TLS upstream (the stream driver) when upTLS.
func startReauthOrigin(t *testing.T, topic string, upTLS bool) *originEnv {
	t.Helper()
	kopts := []kfake.Opt{kfake.SeedTopics(1, topic), kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1000"})}
	return startOriginOn(t, upTLS, sasl.ScramSHA256, kopts, originSetup{})
}
