package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP trace receiver that decodes each export,
// counts its spans and keeps nothing, so a traced kproxy can be measured
// with its exporter doing real work but no collector on the cores.
type otlpSink struct {
	ln    net.Listener
	srv   *http.Server
	spans atomic.Int64
	bad   atomic.Int64 // exports that did not decode
}

func startOTLPSink() (*otlpSink, error) { return startOTLPSinkOn("127.0.0.1:0") }

func startOTLPSinkOn(addr string) (*otlpSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.export)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the endpoint kproxy's tracing.endpoint takes (http/protobuf).
func (s *otlpSink) URL() string { return "http://" + s.ln.Addr().String() }

func (s *otlpSink) export(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		s.bad.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (s *otlpSink) close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// tracedConfig is the kproxy.yaml a traced kproxy runs with: requests
// traced at ratio, exported over OTLP/HTTP to sink.
func tracedConfig(sink *otlpSink, ratio float64) string {
	return fmt.Sprintf("tracing:\n  enabled: true\n  endpoint: %s\n  protocol: http/protobuf\n  sample_ratio: %g\n", sink.URL(), ratio)
}

// sinkCmd runs the null OTLP/HTTP sink until SIGINT or SIGTERM, for
// measuring a traced kproxy started by hand (tracing.endpoint: the URL it
// prints, protocol http/protobuf).
func sinkCmd(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:24318", "address to listen on, HOST:PORT")
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := startOTLPSinkOn(*listen)
	if err != nil {
		return err
	}
	fmt.Printf("kbench null OTLP sink on %s\n", s.URL())
	waitForStop()
	fmt.Printf("received %d spans (%d undecodable exports)\n", s.spans.Load(), s.bad.Load())
	return s.close()
}
