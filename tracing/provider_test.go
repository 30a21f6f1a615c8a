package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Off in the file and nothing in the environment: a tracer that is off.
func TestNewOff(t *testing.T) {
	clearOTEL(t)
	tr, err := New(Defaults(), "test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if tr.On() {
		t.Fatal("tracer on with tracing disabled")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The endpoint variable alone turns tracing on; a bad protocol variable
// stops New.
func TestNewFromEnv(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := New(Defaults(), "test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownWithin(t, tr, 5*time.Second)
	if !tr.On() {
		t.Error("endpoint variable did not turn tracing on")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := New(Defaults(), "test", prometheus.NewRegistry()); err == nil {
		t.Error("http/json accepted")
	}
}

// Exporters connect lazily: a collector that is not there neither stops
// kproxy from starting nor holds up its shutdown, even with spans queued.
func TestNewUnreachableCollector(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			clearOTEL(t)
			c := Defaults()
			c.Enabled, c.Protocol, c.Endpoint = true, proto, "http://127.0.0.1:1"
			tr, err := New(c, "test", prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if !tr.On() {
				t.Fatal("tracer off")
			}
			s := tr.Start(testPeer, bodyOf(t, produceFrame(1)), 1, 10, time.Now())
			tr.Fail(s, "test")
			shutdownWithin(t, tr, 5*time.Second)
		})
	}
}

// shutdownWithin fails unless Shutdown, given a 1s deadline, returns
// within limit (an export error for the absent collector is fine).
func shutdownWithin(t *testing.T, tr *Tracer, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(ctx) }()
	select {
	case err := <-done:
		t.Logf("shutdown after %v: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(limit):
		t.Fatalf("shutdown still running after %v", limit)
	}
}

// An HTTP endpoint given as the collector's base URL, in the file or in
// OTEL_EXPORTER_OTLP_ENDPOINT, gets the OTLP traces path, as collectors
// serve /v1/traces and nothing at the root.
func TestNewHTTPTracesPath(t *testing.T) {
	for _, from := range []string{"file", "file with slash", "env"} {
		t.Run(from, func(t *testing.T) {
			clearOTEL(t)
			paths := make(chan string, 10)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				paths <- r.Method + " " + r.URL.Path
			}))
			defer srv.Close()
			c := Defaults()
			c.Protocol = "http/protobuf"
			switch from {
			case "file":
				c.Enabled, c.Endpoint = true, srv.URL
			case "file with slash":
				c.Enabled, c.Endpoint = true, srv.URL+"/"
			case "env":
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			}
			tr, err := New(c, "test", prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			tr.Fail(tr.Start(testPeer, bodyOf(t, produceFrame(1)), 1, 10, time.Now()), "test")
			shutdownWithin(t, tr, 5*time.Second)
			select {
			case got := <-paths:
				if got != "POST /v1/traces" {
					t.Errorf("exporter sent %s, want POST /v1/traces", got)
				}
			default:
				t.Error("nothing exported")
			}
		})
	}
}
