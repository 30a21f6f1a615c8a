package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate checks that each kind of invalid value is reported as
// "FILE:LINE: section.field: message", the form an operator can act on.
func TestValidate(t *testing.T) {
	cases := []struct {
		name, yaml, field string
		line              int
		msg               string
	}{
		{"bad listen", "proxy:\n  listen: nohost\n  upstream: b:9092\n",
			"proxy.listen", 2, "missing port"},
		{"audit of a read", "proxy:\n  upstream: b:9092\naudit:\n  enabled: true\n  apis: [CreateTopics, Fetch]\n",
			"audit.apis.1", 5, "does not change cluster state"},
		{"require min above max", "proxy:\n  upstream: b:9092\npolicies:\n  rules:\n    - name: t\n      match: {apis: [CreateTopics]}\n      action: reject\n      require:\n        partitions: {min: 9, max: 3}\n",
			"policies.rules.0.require.partitions", 9, "min 9 is above max 3"},
		{"missing upstream", "log:\n  level: info\nproxy:\n  listen: 127.0.0.1:9092\n",
			"proxy.upstream", 3, "is required"},
		{"negative read timeout", "proxy:\n  upstream: b:9092\nframing:\n  read_timeout: -5s\n",
			"framing.read_timeout", 4, "must be positive"},
		{"zero in flight", "proxy:\n  upstream: b:9092\ncorrelate:\n  max_in_flight: 0\n",
			"correlate.max_in_flight", 4, "between 1 and"},
		{"bogus level", "proxy:\n  upstream: b:9092\nlog:\n  format: json\n  level: bogus\n",
			"log.level", 5, "must be one of"},
		{"bad admin listen", "proxy:\n  upstream: b:9092\nadmin:\n  listen: nope\n",
			"admin.listen", 4, "missing port"},
		{"unread below frame", "proxy:\n  upstream: b:9092\n  max_unread_bytes: 2051\nframing:\n  max_request_bytes: 1024\n  max_response_bytes: 2048\n",
			"proxy.max_unread_bytes", 3, "at least 2052"},
		{"buffered below frame", "proxy:\n  upstream: b:9092\n  max_unread_bytes: 4096\n  max_buffered_bytes: 2051\nframing:\n  max_request_bytes: 1024\n  max_response_bytes: 2048\n",
			"proxy.max_buffered_bytes", 4, "at least 2052"},
		{"negative buffered", "proxy:\n  upstream: b:9092\n  max_buffered_bytes: -1\n",
			"proxy.max_buffered_bytes", 3, "must be 0"},
		{"send buffer too small", "proxy:\n  upstream: b:9092\n  socket_send_buffer_bytes: 100\n",
			"proxy.socket_send_buffer_bytes", 3, "between 4096 and 268435456"},
		{"receive buffer too large", "proxy:\n  upstream: b:9092\n  socket_receive_buffer_bytes: 1073741824\n",
			"proxy.socket_receive_buffer_bytes", 3, "between 4096 and 268435456"},
		{"large frame buffer too small", "proxy:\n  upstream: b:9092\n  large_frame_send_buffer_bytes: 1\n",
			"proxy.large_frame_send_buffer_bytes", 3, "between 4096 and 268435456"},
		{"client_rack too long", "proxy:\n  upstream: b:9092\n  client_rack: " + strings.Repeat("z", 256) + "\n",
			"proxy.client_rack", 3, "at most 255"},
		{"client_rack with spaces", "proxy:\n  upstream: b:9092\n  client_rack: \" zone-a\"\n",
			"proxy.client_rack", 3, "surrounding spaces"},
		{"lag max_series 0", "proxy:\n  upstream: b:9092\ntelemetry:\n  lag:\n    enabled: true\n    max_series: 0\n",
			"telemetry.lag.max_series", 6, "between 1 and 1000000"},
		{"clients push_interval 1ms", "proxy:\n  upstream: b:9092\ntelemetry:\n  clients:\n    enabled: true\n    push_interval: 1ms\n",
			"telemetry.clients.push_interval", 6, "between 100ms and 1h0m0s"},
		{"cluster node ids reversed", "proxy:\n  upstream: b:9092\ncluster:\n  node_port_base: 9100\n  node_ids:\n    min: 5\n    max: 2\n",
			"cluster.node_ids.max", 7, "at least node_ids.min"},
		{"cluster ports past 65535", "proxy:\n  upstream: b:9092\ncluster:\n  node_port_base: 65500\n",
			"cluster.node_port_base", 4, "runs past port 65535"},
		{"cluster ports include listen", "proxy:\n  listen: 127.0.0.1:9150\n  upstream: b:9092\ncluster:\n  node_port_base: 9100\n",
			"cluster.node_port_base", 5, "include proxy.listen's port 9150"},
		{"cluster ports include admin", "proxy:\n  upstream: b:9092\nadmin:\n  listen: 127.0.0.1:9190\ncluster:\n  node_port_base: 9100\n",
			"cluster.node_port_base", 6, "include admin.listen's port 9190"},
		{"cluster without node_port_base", "proxy:\n  upstream: b:9092\ncluster:\n  advertised_host: kproxy\n",
			"cluster.node_port_base", 3, "is required to front a cluster"},
		{"cluster on every interface", "proxy:\n  listen: 0.0.0.0:9092\n  upstream: b:9092\ncluster:\n  node_port_base: 9100\n",
			"cluster.advertised_host", 4, "is required when proxy.listen binds every interface"},
		{"cluster advertised_host in brackets", "proxy:\n  listen: '[::1]:9092'\n  upstream: b:9092\ncluster:\n  node_port_base: 9100\n  advertised_host: '[::1]'\n",
			"cluster.advertised_host", 6, "without brackets"},
		{"admin on listen's port", "proxy:\n  listen: 127.0.0.1:9290\n  upstream: b:9092\nadmin:\n  listen: 0.0.0.0:9290\n",
			"admin.listen", 5, "is on proxy.listen's port"},
		{"tls client_auth without a CA", "proxy:\n  upstream: b:9092\ntls:\n  listener:\n    cert_file: c\n    key_file: k\n    client_auth: require\n",
			"tls.listener.client_auth", 7, "needs client_ca_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.yaml)
			f, root, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			err = f.Validate(path, root)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v (%T), want *Error", err, err)
			}
			if ce.Field != c.field || ce.Line != c.line {
				t.Errorf("at %s line %d, want %s line %d (%v)", ce.Field, ce.Line, c.field, c.line, err)
			}
			prefix := fmt.Sprintf("%s:%d: %s: ", path, c.line, c.field)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("Error() = %q, want prefix %q and %q", err, prefix, c.msg)
			}
		})
	}
}

// TestValidateUnreadFits checks the cross-section rule's boundary: exactly
// one maximum frame plus its 4-byte size prefix is enough.
func TestValidateUnreadFits(t *testing.T) {
	f := Defaults()
	f.Proxy.Upstream = "b:9092"
	f.Framing.MaxRequestBytes, f.Framing.MaxResponseBytes = 1024, 2048
	f.Proxy.MaxUnreadBytes = 2052
	if err := f.Validate("", nil); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestValidateFieldNotInFile checks a bad value that came from defaults or
// flags, not the file, still names the field, with no line.
func TestValidateFieldNotInFile(t *testing.T) {
	err := Defaults().Validate("kproxy.yaml", nil)
	if err == nil || err.Error() != "kproxy.yaml: proxy.upstream: is required: the broker's HOST:PORT (or pass --upstream)" {
		t.Errorf("Validate = %v", err)
	}
}

// TestErrorText pins the message forms, including the "config" stand-in
// when there is no file name.
func TestErrorText(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{File: "k.yaml", Line: 3, Field: "proxy.listen", Msg: "bad"}, "k.yaml:3: proxy.listen: bad"},
		{Error{File: "k.yaml", Field: "proxy.listen", Msg: "bad"}, "k.yaml: proxy.listen: bad"},
		{Error{File: "k.yaml", Line: 3, Msg: "bad"}, "k.yaml:3: bad"},
		{Error{Line: 3, Msg: "bad"}, "config:3: bad"},
		{Error{Field: "log.level", Msg: "bad"}, "config: log.level: bad"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

// writeFile writes data to kproxy.yaml in a fresh directory.
func writeFile(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
