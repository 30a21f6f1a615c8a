package config

import (
	"github.com/kproxy/kproxy/audit"
	"github.com/kproxy/kproxy/telemetry"
	"reflect"
	"testing"
	"time"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tlsconf"
	"github.com/kproxy/kproxy/tracing"
)

// TestLoadFull checks that every field of kproxy.yaml reaches the struct,
// durations included, so a renamed yaml tag cannot go unnoticed.
func TestLoadFull(t *testing.T) {
	got, root, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Defaults()
	want.Proxy.Listen = "0.0.0.0:19092"
	want.Proxy.Upstream = "broker-1.internal:9092"
	want.Proxy.DialTimeout = 3 * time.Second
	want.Proxy.WriteTimeout = 45 * time.Second
	want.Proxy.MaxConnections = 500
	want.Proxy.MaxUnreadBytes = 64 << 20
	want.Proxy.MaxBufferedBytes = 256 << 20
	want.Proxy.DrainTimeout = 90 * time.Second
	want.Proxy.Linger = time.Millisecond
	want.Proxy.SocketSendBufferBytes = 128 << 10
	want.Proxy.SocketReceiveBufferBytes = 256 << 10
	want.Proxy.LargeFrameSendBufferBytes = 1 << 20
	want.Proxy.ClientRack = "europe-west1-b"
	want.Telemetry = telemetry.Config{Lag: telemetry.LagConfig{Enabled: true, MaxSeries: 500},
		Clients: telemetry.ClientsConfig{Enabled: true, Endpoint: "http://127.0.0.1:9090/api/v1/otlp/v1/metrics", Protocol: "http/protobuf",
			PushInterval: 15 * time.Second, MaxBytes: 262144, Metrics: []string{"org.apache.kafka.producer.", "org.apache.kafka.consumer."}}}
	want.Framing.MaxRequestBytes = 1 << 20
	want.Framing.MaxResponseBytes = 32 << 20
	want.Framing.ReadTimeout = 10 * time.Second
	want.Correlate.MaxInFlight = 64
	want.Admin.Listen = "0.0.0.0:9191"
	want.Admin.Pprof = true
	want.SASL = sasl.Config{Upstream: &sasl.Upstream{Mechanism: "SCRAM-SHA-512", UsernameFile: "/etc/kproxy/sasl/username",
		PasswordFile: "/etc/kproxy/sasl/password", MaxLoginsPerSecond: 5, MaxConcurrentLogins: 2}}
	want.Cluster = cluster.Config{NodePortBase: 19100, NodeIDs: cluster.NodeIDRange{Min: 1, Max: 12}, AdvertisedHost: "kproxy.local",
		AllowedHosts: []string{"*.kafka.internal"}}
	want.Log.Level = "debug"
	want.Log.Format = "console"
	ratio := 0.25
	want.Tracing = tracing.Config{Enabled: true, Endpoint: "http://127.0.0.1:4317", Protocol: "http/protobuf",
		ServiceName: "kproxy-test", ResourceAttributes: map[string]string{"deployment.environment": "test"},
		SampleRatio: &ratio, MaxQueueSize: 100,
		Links:       tracing.LinksConfig{Max: 4, Decompress: true, MaxDecompressedBytes: 65536, MaxDecompressedBatches: 8, MaxDecompressedBytesPerSecond: 1 << 20, ChildOfSingleRecord: true, Fetch: true},
		Propagation: tracing.PropagationConfig{Inject: true, MaxBatchBytes: 524288}}
	want.Policies = policy.Config{Rules: []policy.Rule{
		{Name: "no-topic-deletes", Match: policy.Selector{ClientID: "app-*", APIs: []string{"DeleteTopics"}}, Action: "reject"},
		{Name: "orders-rate", Match: policy.Selector{APIs: []string{"Produce"}, Topics: []string{"orders*"}},
			Limits: policy.Limits{BytesPerSecond: 1048576, Key: "client_id"}, Action: "throttle"},
	}}
	want.Audit = audit.Config{Enabled: true, Output: "/var/log/kproxy/audit.log", MaxFileBytes: 10485760, MaxFiles: 3,
		APIs: []string{"CreateTopics", "DeleteTopics"}}
	want.TLS = tlsconf.Config{ReloadInterval: 30 * time.Second,
		Listener: &tlsconf.Listener{CertFile: "/etc/kproxy/tls/tls.crt", KeyFile: "/etc/kproxy/tls/tls.key",
			ClientCAFile: "/etc/kproxy/tls/ca.crt", ClientAuth: "request", MinVersion: "1.3", HandshakeTimeout: 5 * time.Second, MaxHandshakes: 64},
		Upstream: &tlsconf.Upstream{CAFile: "/etc/kproxy/broker-ca.crt", CertFile: "/etc/kproxy/client/tls.crt",
			KeyFile: "/etc/kproxy/client/tls.key", ServerName: "kafka.internal", InsecureSkipVerify: true, HandshakeTimeout: 7 * time.Second}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
	// If this fails, a field was added: set it in testdata/full.yaml
	// (and examples/kproxy.yaml) to a non-default value.
	for _, name := range sameAsDefault(got) {
		t.Errorf("testdata/full.yaml leaves %s at its default", name)
	}
	if err := got.Validate("testdata/full.yaml", root); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestParseEmpty checks that an empty file (or one with only comments)
// means "all defaults", not an error.
func TestParseEmpty(t *testing.T) {
	for _, data := range []string{"", "\n", "# nothing here\n"} {
		got, _, err := Parse([]byte(data))
		if err != nil {
			t.Errorf("Parse(%q): %v", data, err)
			continue
		}
		if !reflect.DeepEqual(got, Defaults()) {
			t.Errorf("Parse(%q) = %+v, want Defaults()", data, got)
		}
	}
}

// TestParsePartial checks that a section given in part keeps the defaults
// of the fields it leaves out.
func TestParsePartial(t *testing.T) {
	got, _, err := Parse([]byte("proxy:\n  upstream: b:9092\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Proxy.Upstream = "b:9092"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// sameAsDefault lists the leaf fields ("Proxy.Listen") of f that equal
// Defaults().
func sameAsDefault(f File) []string {
	var same []string
	got, def := reflect.ValueOf(f), reflect.ValueOf(Defaults())
	for i := 0; i < got.NumField(); i++ {
		sec := got.Type().Field(i).Name
		for j := 0; j < got.Field(i).NumField(); j++ {
			if reflect.DeepEqual(got.Field(i).Field(j).Interface(), def.Field(i).Field(j).Interface()) {
				same = append(same, sec+"."+got.Field(i).Type().Field(j).Name)
			}
		}
	}
	return same
}
