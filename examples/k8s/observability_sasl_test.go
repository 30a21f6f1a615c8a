package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The credentials kfake accepts; kproxy C reads them from files.
const (
	saslUser     = "observability"
	saslPassword = "right-password"
)

// saslEnv is kproxy C and the directory of its credentials files.
type saslEnv struct {
	*proc
	dir string
}

// startSASL runs kproxy C originating SASL/PLAIN, with username_file and
// password_file in a temporary directory, in front of a kfake broker that
// requires SASL.
func startSASL(t *testing.T, bin string) saslEnv {
	t.Helper()
	dir := t.TempDir()
	writeCredential(t, dir, "username", saslUser)
	writeCredential(t, dir, "password", saslPassword)

	upstream := startBroker(t, saslBroker, saslListen, kfake.SeedTopics(1, "payments"),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", saslUser, saslPassword))

	config := fmt.Sprintf(`proxy:
  listen: %s
  upstream: %s
admin:
  listen: %s
sasl:
  upstream:
    mechanism: PLAIN
    username_file: %s
    password_file: %s
`, saslListen, upstream, saslAdmin, filepath.Join(dir, "username"), filepath.Join(dir, "password"))
	return saslEnv{proc: runKproxy(t, bin, config, saslAdmin), dir: dir}
}

// driveSASL has a franz-go client without SASL produce through C (kproxy
// authenticates its upstream connections), then rewrites the password
// file wrong, as a bad Secret rotation would, and expects the next
// client's connection reset for the failed authentication.
func driveSASL(t *testing.T, env saslEnv) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(saslListen), kgo.ClientID("observability-sasl"), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("x")}).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatalf("produce to payments through sasl.upstream: %v\n%s", err, env.out.String())
	}

	writeCredential(t, env.dir, "password", "wrong-password")
	// kproxy authenticates as it accepts, so its reset can reach the
	// dialler before its connect returns.
	c, err := net.Dial("tcp", saslListen)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	c.Write(apiVersionsV0(1))
	expectEOF(t, c, "a client whose upstream authentication fails")
}

// writeCredential writes a credentials file as a Secret volume updates
// one: a new file renamed over the old.
func writeCredential(t *testing.T, dir, name, value string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
