package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// TestSaslSilentBroker: a broker that never answers kproxy's
// authentication gets the client reset once the authentication's deadline
// passes, and the failure logged, on either driver.
func TestSaslSilentBroker(t *testing.T) {
	stub := startSaslStub(t, true, nil)
	env := startProxyWith(t, stub.addr(), nil, func(s *Server) { s.SetSasl(plainOriginator(t, "pw")) },
		func(c *Config, f *framing.Config, _ *correlate.Config) {
			c.DialTimeout = 200 * time.Millisecond
			f.ReadTimeout = 200 * time.Millisecond
		})
	for i := 0; i < 3; i++ {
		c := dialRaw(t, env.addr)
		c.Write(apiVersionsV0(1))
		expectClosed(t, c, 20*time.Second)
	}
	waitFor(t, 10*time.Second, "the failure logged", func() bool {
		return strings.Contains(env.logs.String(), "upstream authentication failed")
	})
}
