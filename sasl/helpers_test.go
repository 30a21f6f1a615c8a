package sasl

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// Secrets used by the tests: no error, Ready reason or log line may carry
// one of them (checkNoSecret).
const (
	secretA = "s3cret-Alpha-7f1e"
	secretB = "s3cret-Bravo-92aa"
	secretC = "s3cret-Charlie-0c4"
)

var allSecrets = []string{secretA, secretB, secretC}

// maxFrame is the response limit the tests give StreamRoundTrip.
const maxFrame = 1 << 20

// startCluster starts a one-broker kfake cluster with SASL on and opts
// (users, broker configs), closed with the test.
func startCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.SeedTopics(1, "t")}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// dial opens a TCP connection to c's broker, closed with the test.
func dial(t *testing.T, c *kfake.Cluster) (net.Conn, string) {
	t.Helper()
	addr := c.ListenAddrs()[0]
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, addr
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// logBuf is a zerolog sink the test reads back, at debug level so every
// line the package can write is seen.
type logBuf struct{ syncbuf.Buffer }

func (b *logBuf) logger() zerolog.Logger { return zerolog.New(b).Level(zerolog.DebugLevel) }

// fixture is an Originator over credential files in a temp dir, with its
// log captured; the log is checked for secrets when the test ends.
type fixture struct {
	t    *testing.T
	dir  string
	o    *Originator
	m    *Metrics
	logs *logBuf
	u    Upstream
}

func newFixture(t *testing.T, mech, user, pass string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), logs: &logBuf{}}
	f.u = Upstream{Mechanism: mech}
	if mech == OAuthBearer {
		f.u.TokenFile = writeFile(t, f.dir, "token", pass)
	} else {
		f.u.UsernameFile = writeFile(t, f.dir, "username", user+"\n")
		f.u.PasswordFile = writeFile(t, f.dir, "password", pass+"\n")
	}
	f.m = newTestMetrics(t)
	o, err := New(Config{Upstream: &f.u}, f.m, f.logs.logger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.o = o
	t.Cleanup(func() { checkNoSecret(t, "log", f.logs.String()) })
	return f
}

// auth runs Authenticate with a bounded context and checks that neither
// its error nor Ready carries a secret.
func (f *fixture) auth(rt RoundTrip, host string, prev *Result) (Result, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.o.Authenticate(ctx, rt, host, prev)
	if err != nil {
		checkNoSecret(f.t, "error", err.Error())
	}
	if r := f.o.Ready(); r != nil {
		checkNoSecret(f.t, "Ready", r.Error())
	}
	return res, err
}

func checkNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range allSecrets {
		if strings.Contains(s, sec) {
			t.Errorf("%s carries a secret: %s", what, s)
		}
	}
}

// metadata sends a Metadata request over rt: kfake closes a connection
// that sends one before authenticating.
func metadata(rt RoundTrip) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	_, err := rt(context.Background(), req)
	return err
}
