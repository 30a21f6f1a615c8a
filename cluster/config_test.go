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

// allowed_hosts takes exact hosts and *. suffixes, without case, and
// nothing else; empty allows every host.
func TestAllowedHosts(t *testing.T) {
	c := Config{AllowedHosts: []string{"*.Kafka.internal", "10.0.0.7"}}
	for addr, want := range map[string]bool{
		"b-1.kafka.internal:9092":  true,
		"B-1.KAFKA.INTERNAL.:9092": true,
		"kafka.internal:9092":      false, // the suffix needs a label before it
		"evil-kafka.internal:9092": false,
		"10.0.0.7:9092":            true,
		"10.0.0.70:9092":           false,
		"attacker.example:9092":    false,
	} {
		if got := c.HostAllowed(addr); got != want {
			t.Errorf("HostAllowed(%s) = %v, want %v", addr, got, want)
		}
	}
	if !(Config{}).HostAllowed("anything:1") {
		t.Error("no allowed_hosts refused a host")
	}
	for _, bad := range []string{"", "*.", "kafka.*", "b-1:9092", "*.a*.b"} {
		c := Defaults()
		c.NodePortBase, c.AllowedHosts = 19100, []string{bad}
		if err := c.Validate("127.0.0.1:9092"); err == nil {
			t.Errorf("allowed_hosts [%q] validated", bad)
		}
	}
}
