package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestFlagsWinOverTheFileEvenWhenEmpty: a flag left out keeps the file's
// value, and a flag given empty clears it (--admin "" turns admin off).
func TestFlagsWinOverTheFileEvenWhenEmpty(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kproxy.yaml")
	body := "proxy:\n  upstream: 127.0.0.1:9092\nadmin:\n  listen: 127.0.0.1:9999\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		admin    string
		upstream string
	}{
		{args: nil, admin: "127.0.0.1:9999", upstream: "127.0.0.1:9092"},
		{args: []string{"--admin", ""}, admin: "", upstream: "127.0.0.1:9092"},
		{args: []string{"--admin=127.0.0.1:1234", "--upstream", "10.0.0.1:9092"}, admin: "127.0.0.1:1234", upstream: "10.0.0.1:9092"},
	} {
		o, err := parseFlags("run", append([]string{"--config", file}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		f, _, err := o.load()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if f.Admin.Listen != tc.admin || f.Proxy.Upstream != tc.upstream {
			t.Errorf("%v: admin %q upstream %q, want %q and %q", tc.args, f.Admin.Listen, f.Proxy.Upstream, tc.admin, tc.upstream)
		}
	}
}
