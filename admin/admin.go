// Package admin serves kproxy's operational HTTP endpoints on their own
// port: liveness, readiness, Prometheus metrics and, when enabled, pprof.
package admin

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `admin:` section of kproxy.yaml.
type Config struct {
	// Listen is the admin address; loopback by default so metrics and
	// pprof are not exposed unless asked. Empty disables the server.
	Listen string `yaml:"listen"`
	// Pprof mounts /debug/pprof/.
	Pprof bool `yaml:"pprof"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config { return Config{Listen: "127.0.0.1:9190"} }

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	return fielderr.HostPort("listen", c.Listen)
}

// ReadyFunc says why kproxy should get no traffic, or nil.
type ReadyFunc func(context.Context) error

// Server is the admin HTTP server.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log zerolog.Logger
}

// New builds the handler set; Start binds it.
func New(c Config, g prometheus.Gatherer, ready ReadyFunc, log zerolog.Logger) *Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	rg := newReadyGauge()
	mux.Handle("/readyz", rg.readyzHandler(ready))
	mux.Handle("/metrics", rg.metricsHandler(g, ready))
	if c.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return &Server{log: log, srv: &http.Server{Addr: c.Listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
}

// Start binds the admin port and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return err
	}
	s.ln = ln
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("admin server stopped")
		}
	}()
	return nil
}

// Addr is the bound address (after Start).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server.
func (s *Server) Close(ctx context.Context) error { return s.srv.Shutdown(ctx) }
