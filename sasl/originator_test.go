package sasl

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kfaketest"
)

func TestAuthenticateMechanisms(t *testing.T) {
	for _, mech := range []string{Plain, ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := startCluster(t, kfake.Superuser(mech, "alice", secretA))
			f := newFixture(t, mech, "alice", secretA)

			// Control: kfake refuses Metadata on a connection that has
			// not authenticated, so the check below can fail.
			bare, _ := dial(t, c)
			if err := metadata(StreamRoundTrip(bare, maxFrame)); err == nil {
				t.Fatal("Metadata before authentication worked: the test cannot tell")
			}

			conn, host := dial(t, c)
			rt := StreamRoundTrip(conn, maxFrame)
			if f.o.WorkedWithin(time.Hour) {
				t.Fatal("WorkedWithin before any authentication")
			}
			res, err := f.auth(rt, host, nil)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if !f.o.WorkedWithin(time.Hour) {
				t.Error("WorkedWithin false after an authentication that worked")
			}
			if res.Principal != "alice" || res.Lifetime != 0 || res.AuthVersion != 2 {
				t.Errorf("result %+v, want principal alice, no lifetime, SaslAuthenticate v2", res)
			}
			if err := metadata(rt); err != nil {
				t.Errorf("Metadata after authentication: %v", err)
			}
			if err := f.o.Ready(); err != nil {
				t.Errorf("Ready: %v", err)
			}
			if got := counted(t, f.m, KindInitial, ResultOK); got != 1 {
				t.Errorf("initial ok counted %v, want 1", got)
			}
			if !strings.Contains(f.logs.String(), `"principal":"alice"`) {
				t.Errorf("no debug line names the principal: %s", f.logs)
			}
		})
	}
}

func TestWrongPasswordThenRight(t *testing.T) {
	for _, mech := range []string{Plain, ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := startCluster(t, kfake.Superuser(mech, "alice", secretA))
			f := newFixture(t, mech, "alice", secretB)

			conn, host := dial(t, c)
			_, err := f.auth(StreamRoundTrip(conn, maxFrame), host, nil)
			if err == nil {
				t.Fatal("Authenticate with a wrong password worked")
			}
			// kfake closes the connection on bad credentials rather
			// than answering with an error code.
			if !strings.Contains(err.Error(), "the broker closed the connection") {
				t.Errorf("error %q does not say the broker closed the connection", err)
			}
			r := f.o.Ready()
			if r == nil || !strings.Contains(r.Error(), mech) || !strings.Contains(r.Error(), "closed the connection") {
				t.Errorf("Ready = %v, want the mechanism and the cause", r)
			}
			if got := counted(t, f.m, KindInitial, ResultError); got != 1 {
				t.Errorf("initial error counted %v, want 1", got)
			}

			writeFile(t, f.dir, "password", secretA)
			conn, host = dial(t, c)
			rt := StreamRoundTrip(conn, maxFrame)
			if _, err := f.auth(rt, host, nil); err != nil {
				t.Fatalf("Authenticate after fixing the password file: %v", err)
			}
			if err := f.o.Ready(); err != nil {
				t.Errorf("Ready after a success: %v", err)
			}
			if err := metadata(rt); err != nil {
				t.Errorf("Metadata: %v", err)
			}
			if !strings.Contains(f.logs.String(), "works again") {
				t.Errorf("no line says authentication works again: %s", f.logs)
			}
		})
	}
}

// TestBrokerRefusal answers SaslAuthenticate the way Apache Kafka does for
// bad credentials (SASL_AUTHENTICATION_FAILED with a message; kfake itself
// just closes): the error is an *AuthError with the broker's code and
// message, and Ready names the message until an authentication works.
func TestBrokerRefusal(t *testing.T) {
	c := startCluster(t, kfake.Superuser(ScramSHA512, "alice", secretA))
	f := newFixture(t, ScramSHA512, "alice", secretA)
	const brokerMsg = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(brokerMsg)
		return resp, nil, true
	})

	conn, host := dial(t, c)
	_, err := f.auth(StreamRoundTrip(conn, maxFrame), host, nil)
	var ae *AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *AuthError", err, err)
	}
	if ae.Code != 58 || ae.Name != "SASL_AUTHENTICATION_FAILED" || ae.Message != brokerMsg {
		t.Errorf("AuthError %+v, want code 58, its name and the broker's message", ae)
	}
	if !strings.Contains(ae.Error(), "SASL_AUTHENTICATION_FAILED") || !strings.Contains(ae.Error(), brokerMsg) {
		t.Errorf("AuthError text %q lacks the code name or the message", ae)
	}
	r := f.o.Ready()
	if r == nil || !strings.Contains(r.Error(), brokerMsg) || !strings.Contains(r.Error(), ScramSHA512) {
		t.Fatalf("Ready = %v, want the mechanism and the broker's message", r)
	}

	// The control answered once; the next connection reaches kfake's
	// own handler, which accepts the credentials.
	conn, host = dial(t, c)
	if _, err := f.auth(StreamRoundTrip(conn, maxFrame), host, nil); err != nil {
		t.Fatalf("second Authenticate: %v", err)
	}
	if r := f.o.Ready(); r != nil {
		t.Errorf("Ready after a success: %v", r)
	}
}

func TestUnsupportedMechanism(t *testing.T) {
	c := startCluster(t, kfake.Superuser(Plain, "alice", secretA))
	f := newFixture(t, OAuthBearer, "", testJWT(t, "svc-a"))
	conn, host := dial(t, c)
	_, err := f.auth(StreamRoundTrip(conn, maxFrame), host, nil)
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Name != "UNSUPPORTED_SASL_MECHANISM" || !strings.Contains(ae.Message, "PLAIN") {
		t.Fatalf("error %v, want UNSUPPORTED_SASL_MECHANISM listing what the broker offers", err)
	}
}

func TestReauthentication(t *testing.T) {
	for _, mech := range []string{Plain, ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := startCluster(t, kfake.Superuser(mech, "alice", secretA),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "3000"}))
			count := kfaketest.CountKeys(c)
			f := newFixture(t, mech, "alice", secretA)
			conn, host := dial(t, c)
			rt := StreamRoundTrip(conn, maxFrame)
			first, err := f.auth(rt, host, nil)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if first.Lifetime != 3*time.Second {
				t.Fatalf("lifetime %v, want 3s from connections.max.reauth.ms", first.Lifetime)
			}
			auths := count(kmsg.SASLAuthenticate.Int16())
			for i := range 3 {
				res, err := f.auth(rt, host, &first)
				if err != nil {
					t.Fatalf("re-authentication %d: %v", i+1, err)
				}
				if res.Principal != "alice" || res.AuthVersion != first.AuthVersion || res.Lifetime != 3*time.Second {
					t.Errorf("re-authentication result %+v, want %+v", res, first)
				}
				if err := metadata(rt); err != nil {
					t.Fatalf("Metadata after re-authentication %d: %v", i+1, err)
				}
			}
			if got := count(kmsg.SASLAuthenticate.Int16()); got != 4*auths {
				t.Errorf("%d SaslAuthenticate requests reached the broker, want %d (%d per authentication)", got, 4*auths, auths)
			}
			if got := count(kmsg.SASLHandshake.Int16()); got != 4 {
				t.Errorf("%d SaslHandshake requests, want 4", got)
			}
			if got := count(kmsg.ApiVersions.Int16()); got != 1 {
				t.Errorf("%d ApiVersions requests, want 1 (none on re-authentication)", got)
			}
			if got := counted(t, f.m, KindReauth, ResultOK); got != 3 {
				t.Errorf("reauth ok counted %v, want 3", got)
			}
		})
	}
}

// TestNoReauthWithoutLifetime: a broker that gave no lifetime refuses a
// second handshake, so none is sent.
func TestNoReauthWithoutLifetime(t *testing.T) {
	c := startCluster(t, kfake.Superuser(Plain, "alice", secretA))
	count := kfaketest.CountKeys(c)
	f := newFixture(t, Plain, "alice", secretA)
	conn, host := dial(t, c)
	rt := StreamRoundTrip(conn, maxFrame)
	first, err := f.auth(rt, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.auth(rt, host, &first); err == nil || !strings.Contains(err.Error(), "no lifetime") {
		t.Fatalf("re-authentication with no lifetime: %v, want an error saying so", err)
	}
	if got := count(kmsg.SASLHandshake.Int16()); got != 1 {
		t.Errorf("%d SaslHandshake requests, want 1", got)
	}
	if err := metadata(rt); err != nil {
		t.Errorf("the connection is still usable: %v", err)
	}
}

// TestRotation swaps the credential files the way the kubelet updates a
// Secret volume (a new directory, then the ..data symlink renamed over):
// the next authentication uses the new files.
func TestRotation(t *testing.T) {
	c := startCluster(t, kfake.Superuser(Plain, "alice", secretA), kfake.Superuser(ScramSHA256, "alice", secretB),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
	dir := t.TempDir()
	version := 0
	publish := func(pass string) {
		version++
		v := filepath.Join(dir, fmt.Sprintf("..v%d", version))
		if err := os.Mkdir(v, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, v, "username", "alice")
		writeFile(t, v, "password", pass)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(v), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	publish(secretC)
	for _, name := range []string{"username", "password"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	logs := &logBuf{}
	t.Cleanup(func() { checkNoSecret(t, "log", logs.String()) })
	o, err := New(Config{Upstream: &Upstream{Mechanism: Plain,
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}}, nil, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, o: o, logs: logs}

	conn, host := dial(t, c)
	if _, err := f.auth(StreamRoundTrip(conn, maxFrame), host, nil); err == nil {
		t.Fatal("the first, wrong, password worked")
	}
	publish(secretA)
	conn, host = dial(t, c)
	rt := StreamRoundTrip(conn, maxFrame)
	first, err := f.auth(rt, host, nil)
	if err != nil {
		t.Fatalf("after rotating to the right password: %v", err)
	}
	// Rotated again, to a password the broker does not know for PLAIN:
	// the re-authentication reads it and the broker refuses it.
	publish(secretB)
	if _, err := f.auth(rt, host, &first); err == nil {
		t.Fatal("re-authentication did not use the rotated (wrong) password")
	}
}

func TestPrincipalChangeRefused(t *testing.T) {
	c := startCluster(t, kfake.Superuser(ScramSHA256, "alice", secretA), kfake.Superuser(ScramSHA256, "bob", secretB),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
	count := kfaketest.CountKeys(c)
	f := newFixture(t, ScramSHA256, "alice", secretA)
	conn, host := dial(t, c)
	rt := StreamRoundTrip(conn, maxFrame)
	first, err := f.auth(rt, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.dir, "username", "bob")
	writeFile(t, f.dir, "password", secretB)
	_, err = f.auth(rt, host, &first)
	if err == nil || !strings.Contains(err.Error(), `"bob"`) || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("re-authentication as another principal: %v, want an error naming both", err)
	}
	if got := count(kmsg.SASLHandshake.Int16()); got != 1 {
		t.Errorf("%d SaslHandshake requests, want 1: nothing is sent for a refused change", got)
	}
	if got := counted(t, f.m, KindReauth, ResultError); got != 1 {
		t.Errorf("reauth error counted %v, want 1", got)
	}
	if f.o.Ready() == nil {
		t.Error("Ready is nil after a failed re-authentication")
	}
	// The connection itself is untouched.
	if err := metadata(rt); err != nil {
		t.Errorf("Metadata: %v", err)
	}
}

// TestCancelledIsNotFailing: a client leaving during authentication says
// nothing about the credentials.
func TestCancelledIsNotFailing(t *testing.T) {
	f := newFixture(t, Plain, "alice", secretA)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.o.Authenticate(ctx, func(ctx context.Context, _ kmsg.Request) (kmsg.Response, error) {
		return nil, ctx.Err()
	}, "b:9092", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if r := f.o.Ready(); r != nil {
		t.Errorf("Ready = %v after a cancelled authentication", r)
	}
	// Counted, as cancelled: not a failure an alert on result="error"
	// should see.
	if got, failed := counted(t, f.m, KindInitial, ResultCancelled), counted(t, f.m, KindInitial, ResultError); got != 1 || failed != 0 {
		t.Errorf("initial cancelled counted %v and error %v, want 1 and 0", got, failed)
	}
}

func TestNilOriginator(t *testing.T) {
	o, err := New(Defaults(), nil, zerolog.Nop())
	if o != nil || err != nil {
		t.Fatalf("New(Defaults()) = %v, %v; want nil, nil", o, err)
	}
	if o.On() || o.Mechanism() != "" || o.Ready() != nil {
		t.Error("a nil Originator is not off")
	}
	if _, err := o.Authenticate(context.Background(), nil, "b:9092", nil); err == nil {
		t.Error("Authenticate on a nil Originator worked")
	}
	if _, err := New(Config{Upstream: &Upstream{Mechanism: "GSSAPI"}}, nil, zerolog.Nop()); err == nil {
		t.Error("New accepted an invalid section")
	}
	var m *Metrics
	m.count(true, true) // nil-safe
}

// TestRotationSCRAM changes alice's SCRAM password at the broker, then in
// the file: the live connection re-authenticates with the new one.
func TestRotationSCRAM(t *testing.T) {
	c := startCluster(t, kfake.Superuser(ScramSHA256, "alice", secretA),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
	f := newFixture(t, ScramSHA256, "alice", secretA)
	conn, host := dial(t, c)
	rt := StreamRoundTrip(conn, maxFrame)
	first, err := f.auth(rt, host, nil)
	if err != nil {
		t.Fatal(err)
	}

	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha256.New, secretB, salt, 4096, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "alice", 1, 4096, salt, salted
	alter.Upsertions = append(alter.Upsertions, up)
	kr, err := rt(context.Background(), alter)
	if err != nil {
		t.Fatal(err)
	}
	if r := kr.(*kmsg.AlterUserSCRAMCredentialsResponse).Results; len(r) != 1 || r[0].ErrorCode != 0 {
		t.Fatalf("AlterUserSCRAMCredentials: %+v", r)
	}

	// The broker now refuses the old password...
	other, otherHost := dial(t, c)
	if _, err := f.auth(StreamRoundTrip(other, maxFrame), otherHost, nil); err == nil {
		t.Fatal("the old password still works: the broker did not change")
	}
	// ...and the live connection takes the new one from the file.
	writeFile(t, f.dir, "password", secretB+"\n")
	if _, err := f.auth(rt, host, &first); err != nil {
		t.Fatalf("re-authentication with the rotated password: %v", err)
	}
	if err := metadata(rt); err != nil {
		t.Errorf("Metadata: %v", err)
	}
	if f.o.Ready() != nil {
		t.Errorf("Ready after the rotation: %v", f.o.Ready())
	}
}

// TestSwappedFiles: a username that is the password would name the
// principal with the secret in every log line; it is refused.
func TestSwappedFiles(t *testing.T) {
	f := newFixture(t, Plain, secretA, secretA)
	b := newStubBroker()
	res, err := f.auth(b.rt, "b:9092", nil)
	if err == nil || !strings.Contains(err.Error(), "same value") || res.Principal != "" {
		t.Fatalf("Authenticate = %+v, %v; want an error saying the files hold the same value, no principal", res, err)
	}
	if len(b.reqs) != 0 {
		t.Errorf("%d requests sent with refused credentials", len(b.reqs))
	}
}
