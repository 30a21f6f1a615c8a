package cluster

import (
	"strings"
	"testing"
)

// TestValidateHosts: an IPv6 proxy.listen gives node ports and addresses
// on the same host; advertised_host is a bare host, as brokers advertise
// it, since clients join it with each node's port.
func TestValidateHosts(t *testing.T) {
	on := Config{NodePortBase: 9100, NodeIDs: NodeIDRange{Min: 0, Max: 9}}
	with := func(host string) Config { c := on; c.AdvertisedHost = host; return c }
	for _, tc := range []struct {
		listen string
		cfg    Config
		err    string // "" = valid
	}{
		{"[::1]:9092", on, ""},
		{"127.0.0.1:9092", with("::1"), ""},
		{"0.0.0.0:9092", with("kproxy.local"), ""},
		{"[::]:9092", on, "is required when proxy.listen binds every interface"},
		{"127.0.0.1:9092", with("[::1]"), "without brackets"},
		{"127.0.0.1:9092", with("kproxy.local:9092"), "without a port"},
	} {
		err := tc.cfg.Validate(tc.listen)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("listen %s, advertised_host %q: %v, want %q", tc.listen, tc.cfg.AdvertisedHost, err, tc.err)
		}
	}
	if h := on.Host("[::1]:9092"); h != "::1" {
		t.Errorf("Host of [::1]:9092 = %q, want ::1 (bare, as brokers advertise it)", h)
	}
}
