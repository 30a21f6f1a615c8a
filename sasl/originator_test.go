package sasl

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
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
			res, err := f.auth(rt, host, nil)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
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
