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
	"google.golang.org/protobuf/encoding/protowire"
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
	// walk counts spans by walking the wire format (every field's tag and
	// length checked down to the spans) instead of decoding each span
	// into objects: a collector's decoding taken off the shared cores.
	walk bool
}

func startOTLPSink(walk bool) (*otlpSink, error) { return startOTLPSinkOn("127.0.0.1:0", walk) }

func startOTLPSinkOn(addr string, walk bool) (*otlpSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln, walk: walk}
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
	var n int64
	if err == nil {
		n, err = s.count(body)
	}
	if err != nil {
		s.bad.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.spans.Add(n)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// count is the spans of an export.
func (s *otlpSink) count(body []byte) (int64, error) {
	if s.walk {
		// ExportTraceServiceRequest.resource_spans (1) >
		// ResourceSpans.scope_spans (2) > ScopeSpans.spans (2).
		var n int64
		err := eachField(body, 1, func(rs []byte) error {
			return eachField(rs, 2, func(ss []byte) error {
				return eachField(ss, 2, func([]byte) error { n++; return nil })
			})
		})
		return n, err
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return 0, err
	}
	var n int64
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += int64(len(ss.Spans))
		}
	}
	return n, nil
}

// eachField calls fn with the value of every length-delimited field num
// of the message b, checking every field of b is well formed.
func eachField(b []byte, num protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := fn(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
}

func (s *otlpSink) close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// tracedConfig is the kproxy.yaml a traced kproxy runs with: requests
// traced at ratio, exported over OTLP/HTTP to sink, and with inject the
// sampled produces' records given a traceparent.
func tracedConfig(sink *otlpSink, ratio float64, inject bool) string {
	return fmt.Sprintf("tracing:\n  enabled: true\n  endpoint: %s\n  protocol: http/protobuf\n  sample_ratio: %g\n  propagation:\n    inject: %v\n",
		sink.URL(), ratio, inject)
}

// sinkCmd runs the null OTLP/HTTP sink until SIGINT or SIGTERM, for
// measuring a traced kproxy started by hand (tracing.endpoint: the URL it
// prints, protocol http/protobuf).
func sinkCmd(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:24318", "address to listen on, HOST:PORT")
	walk := fs.Bool("walk", false, "count spans by walking the protobuf wire format instead of decoding every span (a collector's decode cost off this machine)")
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := startOTLPSinkOn(*listen, *walk)
	if err != nil {
		return err
	}
	fmt.Printf("kbench null OTLP sink on %s\n", s.URL())
	waitForStop()
	fmt.Printf("received %d spans (%d undecodable exports)\n", s.spans.Load(), s.bad.Load())
	return s.close()
}
