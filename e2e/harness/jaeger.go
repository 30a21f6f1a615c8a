package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// JaegerEnv names the Jaeger v2 binary to use; e2e/run.sh builds one into
// its cache and sets it.
const JaegerEnv = "KPROXY_E2E_JAEGER"

// JaegerBinary returns the Jaeger v2 binary built by e2e/run.sh, failing
// the test with what to run when it is missing.
func JaegerBinary(t testing.TB) string {
	t.Helper()
	return toolBinary(t, JaegerEnv, "Jaeger v2", "cd e2e/tools/jaeger && go build -o /tmp/jaeger github.com/jaegertracing/jaeger/cmd/jaeger")
}

// toolBinary is the executable env names, which e2e/run.sh builds into
// its cache; it fails the test with what to run when env is unset or
// names no executable.
func toolBinary(t testing.TB, env, what, byHand string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: run the suite with `bash e2e/run.sh` from the repository root, which builds "+
			"%s into its cache and sets it, or build one by hand (`%s`) and set %s to it", env, what, byHand, env)
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable file: rerun `bash e2e/run.sh`, which builds it", env, path)
	}
	return path
}

// Jaeger is a running Jaeger v2 with in-memory storage, every port on
// 127.0.0.1 (see testdata/jaeger.yaml).
type Jaeger struct {
	*Proc
	OTLPGRPC string // host:port of the OTLP/gRPC receiver
	OTLPHTTP string // host:port of the OTLP/HTTP receiver
	QueryURL string // http://host:port of the query API
}

// StartJaeger starts Jaeger with testdata/jaeger.yaml on free ports and
// returns once it is healthy and its query API answers.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := JaegerBinary(t)
	config := filepath.Join(E2EDir(t), "testdata", "jaeger.yaml")
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		p := FreePorts(t, 6)
		j := &Jaeger{
			OTLPGRPC: fmt.Sprintf("127.0.0.1:%d", p[0]),
			OTLPHTTP: fmt.Sprintf("127.0.0.1:%d", p[1]),
			QueryURL: fmt.Sprintf("http://127.0.0.1:%d", p[2]),
		}
		health := fmt.Sprintf("http://127.0.0.1:%d/status", p[4])
		env := Env(
			fmt.Sprintf("E2E_JAEGER_OTLP_GRPC_PORT=%d", p[0]),
			fmt.Sprintf("E2E_JAEGER_OTLP_HTTP_PORT=%d", p[1]),
			fmt.Sprintf("E2E_JAEGER_QUERY_HTTP_PORT=%d", p[2]),
			fmt.Sprintf("E2E_JAEGER_QUERY_GRPC_PORT=%d", p[3]),
			fmt.Sprintf("E2E_JAEGER_HEALTH_PORT=%d", p[4]),
			fmt.Sprintf("E2E_JAEGER_METRICS_PORT=%d", p[5]),
		)
		start := time.Now()
		j.Proc = Start(t, "jaeger", bin, []string{"--config", "file:" + config}, env, "")
		err := waitHTTP(j.Proc, health, 30*time.Second)
		if err == nil {
			err = waitHTTP(j.Proc, j.QueryURL+"/api/services", 10*time.Second)
		}
		if err == nil {
			t.Logf("jaeger ready in %v: OTLP grpc %s, OTLP http %s, query %s",
				time.Since(start).Round(time.Millisecond), j.OTLPGRPC, j.OTLPHTTP, j.QueryURL)
			return j
		}
		lastErr = err
		if !errors.Is(err, errExited) || !strings.Contains(j.Output(), "address already in use") {
			break
		}
		t.Logf("jaeger lost a port race (attempt %d); retrying with new ports", attempt)
	}
	t.Fatalf("jaeger did not become ready: %v", lastErr)
	return nil
}

// The Jaeger query API's JSON (the v1 /api/traces form the UI reads).

// Trace is one trace of /api/traces.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is a span as Jaeger returns it. OpenTelemetry span links appear in
// References with refType FOLLOWS_FROM (CHILD_OF for the parent); the span
// kind, the status and the instrumentation scope appear as tags.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`

	// Process is filled in from the trace's processes.
	Process Process `json:"-"`
}

// Reference is a span reference: CHILD_OF or FOLLOWS_FROM.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag; Value is a string, bool or json.Number.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the span's resource.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Tag returns the tag's value as text ("" and false if absent).
func (s Span) Tag(key string) (string, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value), true
		}
	}
	return "", false
}

// TagOr returns the tag's value as text, or "<absent>".
func (s Span) TagOr(key string) string {
	if v, ok := s.Tag(key); ok {
		return v
	}
	return "<absent>"
}

// JSON is the span indented, for logs.
func (s Span) JSON() string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// Spans queries /api/traces with q (service, operation, tags, limit ...)
// and returns every span of every trace found.
func (j *Jaeger) Spans(ctx context.Context, q url.Values) ([]Span, error) {
	var body struct {
		Data   []Trace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := j.get(ctx, "/api/traces?"+q.Encode(), &body); err != nil {
		return nil, err
	}
	if len(body.Errors) > 0 {
		return nil, fmt.Errorf("jaeger: %d: %s", body.Errors[0].Code, body.Errors[0].Msg)
	}
	var spans []Span
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			s.Process = tr.Processes[s.ProcessID]
			spans = append(spans, s)
		}
	}
	return spans, nil
}

// WaitSpans polls /api/traces with q until found reports true for the
// spans returned, or timeout passes; it returns the last spans seen and
// whether found was satisfied.
func (j *Jaeger) WaitSpans(t testing.TB, q url.Values, timeout time.Duration, found func([]Span) bool) ([]Span, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var spans []Span
	for {
		got, err := j.Spans(ctx, q)
		if err == nil {
			spans = got
			if found(spans) {
				return spans, true
			}
		} else if ctx.Err() == nil {
			t.Logf("querying jaeger: %v", err)
		}
		select {
		case <-ctx.Done():
			return spans, false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// SpanV3 is a span of the /api/v3/traces answer (OTLP JSON, ids in hex).
type SpanV3 struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId"`
	Name    string `json:"name"`
	Kind    int    `json:"kind"`
	Links   []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
	Attributes []struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
			IntValue    string `json:"intValue"` // OTLP JSON writes 64-bit integers as strings
		} `json:"value"`
	} `json:"attributes"`
}

// Attr is the span attribute key as text, "" when absent.
func (s SpanV3) Attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			if a.Value.IntValue != "" {
				return a.Value.IntValue
			}
			return a.Value.StringValue
		}
	}
	return ""
}

// SpansV3 queries /api/v3/traces for a service's spans named operation
// that started within the last lookback.
func (j *Jaeger) SpansV3(ctx context.Context, service, operation string, lookback time.Duration) ([]SpanV3, error) {
	now := time.Now().UTC()
	q := url.Values{
		"query.service_name":   {service},
		"query.operation_name": {operation},
		"query.start_time_min": {now.Add(-lookback).Format(time.RFC3339Nano)},
		"query.start_time_max": {now.Add(time.Minute).Format(time.RFC3339Nano)},
		"query.num_traces":     {"1000"},
	}
	var body struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []SpanV3 `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := j.get(ctx, "/api/v3/traces?"+q.Encode(), &body); err != nil {
		return nil, err
	}
	var spans []SpanV3
	for _, rs := range body.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
	}
	return spans, nil
}

func (j *Jaeger) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("GET %s: decoding: %v", path, err)
	}
	return nil
}
