package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/admin"
	"github.com/kproxy/kproxy/audit"
	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/logging"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/telemetry"
	"github.com/kproxy/kproxy/tlsconf"
	"github.com/kproxy/kproxy/tracing"
)

// service is one running kproxy: the relay and its admin server.
type service struct {
	cfg    config.File
	log    zerolog.Logger
	proxy  *proxy.Server
	admin  *admin.Server
	tracer *tracing.Tracer
	pm     *policy.Metrics
	reg    *prometheus.Registry
	certs  *tlsconf.Store // the tls section's files, reloaded as they change
	audit  *audit.Log     // nil when audit.enabled is false
	// clients answers and exports client telemetry; nil when
	// telemetry.clients is off.
	clients *telemetry.Clients
	// orig authenticates to the brokers; nil without sasl.upstream.
	orig *sasl.Originator
	// beforeDrain, when set, runs once a signal arrives and before the
	// drain: demo stops its own clients there, so they are not drained.
	beforeDrain func()
}

// start binds the client and admin ports and starts serving. spans, when
// not nil, receives every span instead of the tracing section's exporter.
func start(cfg config.File, spans sdktrace.SpanExporter) (*service, error) {
	if err := proxy.ConfigureNetpoll(); err != nil {
		return nil, err
	}
	log := logging.New(cfg.Log, os.Stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var tracer *tracing.Tracer
	var err error
	if spans != nil {
		tracer, err = tracing.NewWithExporter(cfg.Tracing, version(), spans, reg)
	} else {
		tracer, err = tracing.New(cfg.Tracing, version(), reg)
	}
	if err != nil {
		return nil, err
	}
	srv, err := proxy.New(cfg.Proxy, cfg.Framing, cfg.Correlate, log, proxy.NewMetrics(reg), tracer)
	if err != nil {
		return nil, err
	}
	tm := tlsconf.NewMetrics(reg)
	certs, err := tlsconf.New(cfg.TLS, tm, log)
	if err != nil {
		return nil, err
	}
	srv.SetTLS(certs, tm)
	if err := srv.SetCluster(cfg.Cluster); err != nil {
		certs.Close()
		return nil, err
	}
	// The credentials files must be there at start, as the TLS files
	// must; they are read again at each authentication.
	if err := cfg.SASL.Check(); err != nil {
		certs.Close()
		return nil, err
	}
	orig, err := sasl.New(cfg.SASL, sasl.NewMetrics(reg), log)
	if err != nil {
		certs.Close()
		return nil, err
	}
	srv.SetSasl(orig)
	auditLog, err := audit.Open(cfg.Audit, audit.NewMetrics(reg), audit.Env{Pod: firstEnv("K8S_POD_NAME", "POD_NAME"),
		Namespace: firstEnv("K8S_NAMESPACE_NAME", "POD_NAMESPACE")})
	if err != nil {
		certs.Close()
		orig.Close()
		return nil, err
	}
	srv.SetAudit(auditLog)
	lag := telemetry.NewLag(cfg.Telemetry.Lag)
	lag.Register(reg)
	srv.SetLag(lag)
	clients, err := startClientMetrics(cfg, reg, log)
	if err != nil {
		certs.Close()
		orig.Close()
		auditLog.Close()
		return nil, err
	}
	srv.SetClients(clients)
	if err := srv.Listen(); err != nil {
		certs.Close()
		orig.Close()
		auditLog.Close()
		clients.Close(0)
		return nil, err
	}
	srv.LimitMemory()
	pm := policy.NewMetrics(reg)
	srv.SetPolicies(policy.New(cfg.Policies, pm))
	s := &service{cfg: cfg, log: log, proxy: srv, tracer: tracer, pm: pm, reg: reg, certs: certs, audit: auditLog, clients: clients, orig: orig}
	if auditLog != nil {
		log.Info().Str("output", cfg.Audit.Output).Msg("audit log on: one line per change to the cluster and per policy refusal")
	}
	if tracer.On() {
		log.Info().Msg("tracing on: one span per request/response pair, exported over OTLP")
	}
	if cfg.Admin.Listen != "" {
		s.admin = admin.New(cfg.Admin, reg, srv.Ready, log)
		if err := s.admin.Start(); err != nil {
			return nil, err
		}
		log.Info().Str("admin", s.admin.Addr().String()).Msg("admin endpoints: /healthz /readyz /metrics")
	}
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error().Err(err).Msg("accept loop stopped")
		}
	}()
	log.Info().Str("version", version()).Msg("kproxy started")
	return s, nil
}

// adminHint is a line pointing at the metrics endpoint, if there is one.
func (s *service) adminHint() string {
	if s.admin == nil {
		return ""
	}
	return "Metrics: http://" + s.admin.Addr().String() + "/metrics    "
}

// waitSignal blocks until SIGTERM or SIGINT (or done closes), then drains.
// A second signal during the drain stops at once.
func (s *service) waitSignal(done <-chan struct{}) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case got := <-sig:
		s.log.Info().Str("signal", got.String()).Dur("drain_timeout", s.cfg.Proxy.DrainTimeout).Msg("shutting down")
	case <-done:
	}
	if s.beforeDrain != nil {
		s.beforeDrain()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Proxy.DrainTimeout)
	defer cancel()
	go func() {
		select {
		case <-sig:
			s.log.Warn().Msg("second signal: stopping without waiting")
			cancel()
		case <-ctx.Done():
		}
	}()
	s.proxy.Drain(ctx)
	flush, cancelFlush := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelFlush()
	if err := s.tracer.Shutdown(flush); err != nil {
		s.log.Warn().Err(err).Msg("spans not flushed")
	}
	s.clients.Close(5 * time.Second) // after the drain: no push comes in any more
	s.orig.Close()                   // after the drain: no login is needed any more
	if s.admin != nil {
		shut, cancelShut := context.WithTimeout(context.Background(), time.Second)
		defer cancelShut()
		s.admin.Close(shut)
	}
	s.certs.Close()
	if err := s.audit.Close(); err != nil { // after the drain: every line is settled
		s.log.Warn().Err(err).Msg("audit log not closed cleanly")
	}
	s.log.Info().Msg("kproxy stopped")
}

// firstEnv is the first of the variables that is set: the downward API's
// names for the pod (POD_NAME, as kproxy-inject sets) or OpenTelemetry's.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// startClientMetrics starts telemetry.clients' exporter, nil when the
// section is off.
func startClientMetrics(cfg config.File, reg prometheus.Registerer, log zerolog.Logger) (*telemetry.Clients, error) {
	c := cfg.Telemetry.Clients
	if !c.Enabled {
		return nil, nil
	}
	col, err := c.Collector(cfg.Tracing.Endpoint, cfg.Tracing.Protocol, os.Getenv)
	if err != nil {
		return nil, err
	}
	clients, err := telemetry.NewClients(c, col, telemetry.NewClientsMetrics(reg), os.Getenv)
	if err != nil {
		return nil, err
	}
	log.Info().Str("endpoint", col.Endpoint).Str("protocol", col.Protocol).Dur("push_interval", c.PushInterval).
		Msg("client metrics on: kproxy answers KIP-714 telemetry and exports it over OTLP")
	return clients, nil
}
