package harness

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// toxiproxyServer is the package of toxiproxy's server command, a tool of
// this module (the `tool` line of go.mod pins its version and keeps its
// dependencies in go.sum).
const toxiproxyServer = "github.com/Shopify/toxiproxy/v2/cmd/server"

var toxiproxyBuild goBinary

// ToxiproxyBinary builds toxiproxy's server (once per test binary, from
// the version e2e/go.mod pins; Go's build cache makes later runs quick)
// and returns its path.
func ToxiproxyBinary(t testing.TB) string {
	t.Helper()
	return toxiproxyBuild.get(t, "toxiproxy-server", E2EDir(t), toxiproxyServer)
}

// Toxiproxy is a running toxiproxy server, a fault-injecting TCP proxy
// driven over its HTTP API with the official client.
type Toxiproxy struct {
	*Proc
	API    string // host:port of the HTTP API
	Client *toxiproxy.Client
}

// StartToxiproxy starts toxiproxy's server, as process name, with its API
// on a free port of 127.0.0.1 and returns once the API answers. It has no
// proxies yet (see Proxy). Its own log, a line per connection and toxic,
// goes to its log file at warnings and above only.
func StartToxiproxy(t testing.TB, name string) *Toxiproxy {
	t.Helper()
	bin := ToxiproxyBinary(t)
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		port := FreePorts(t, 1)[0]
		tp := &Toxiproxy{API: fmt.Sprintf("127.0.0.1:%d", port)}
		tp.Proc = Start(t, name, bin, []string{"-host", "127.0.0.1", "-port", fmt.Sprint(port)}, Env("LOG_LEVEL=warn"), "")
		err := waitHTTP(tp.Proc, "http://"+tp.API+"/version", 20*time.Second)
		if err == nil {
			tp.Client = toxiproxy.NewClient(tp.API)
			return tp
		}
		lastErr = err
		if !errors.Is(err, errExited) || !strings.Contains(tp.Output(), "address already in use") {
			break
		}
		t.Logf("%s lost a port race (attempt %d); retrying with a new port", name, attempt)
	}
	t.Fatalf("%s did not become ready: %v", name, lastErr)
	return nil
}

// Proxy creates the proxy name, listening on listen and forwarding to
// upstream, with no toxic.
func (tp *Toxiproxy) Proxy(t testing.TB, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p, err := tp.Client.CreateProxy(name, listen, upstream)
	if err != nil {
		t.Fatalf("toxiproxy: creating proxy %s (%s → %s): %v", name, listen, upstream, err)
	}
	return p
}
