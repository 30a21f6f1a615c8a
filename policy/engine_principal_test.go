package policy

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// A principal rule matches when any of the connection's identities matches
// its glob: a URI SAN or the CN, whichever comes first in the list.
func TestPrincipalSelector(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "payments-only", Action: ActionReject,
		Match: Selector{Principal: "spiffe://cluster.local/ns/payments/*"}})
	for _, tc := range []struct {
		name       string
		principals []string
		want       Outcome
	}{
		{"first URI SAN matches", []string{"spiffe://cluster.local/ns/payments/sa/api", "api"}, Reject},
		{"a later identity matches", []string{"spiffe://cluster.local/ns/orders/sa/x", "spiffe://cluster.local/ns/payments/sa/y"}, Reject},
		{"no identity matches", []string{"spiffe://cluster.local/ns/orders/sa/x", "payments"}, Pass},
		{"other namespace with the prefix as a suffix", []string{"spiffe://other/ns/payments"}, Pass},
	} {
		c := request(t, produce("orders"), "app")
		c.r.Conn.Principals = tc.principals
		if v := c.check(e, t0); v.Outcome != tc.want {
			t.Errorf("%s: %+v, want outcome %d", tc.name, v, tc.want)
		}
	}
}

// The CN is an identity too, matched by the same globs (exact here).
func TestPrincipalSelectorCN(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "by-cn", Action: ActionReject, Match: Selector{Principal: "batch-job"}})
	c := request(t, produce("orders"), "app")
	c.r.Conn.Principals = []string{"spiffe://cluster.local/ns/x/sa/y", "batch-job"}
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Fatalf("CN identity: %+v, want Reject", v)
	}
	c.r.Conn.Principals = []string{"batch-job-2"}
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("other CN: %+v, want Pass (exact, not prefix)", v)
	}
}

// A connection without an identity (plaintext, or no client certificate)
// never matches a principal rule, not even "*".
func TestPrincipalSelectorNoIdentity(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "any-principal", Action: ActionReject, Match: Selector{Principal: "*"}})
	c := request(t, produce("orders"), "app")
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("no identity: %+v, want Pass", v)
	}
	c.r.Conn = nil
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("no connection state: %+v, want Pass", v)
	}
	c.r.Conn = &ConnState{Principals: []string{"anyone"}}
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Fatalf("an identity: %+v, want Reject", v)
	}
}

// principal combines with the other fields: every field set must match.
func TestPrincipalCombinedWithAPIs(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "payments-no-delete", Action: ActionReject,
		Match: Selector{Principal: "spiffe://*/ns/payments/*", APIs: []string{"DeleteTopics"}}})
	c := request(t, produce("orders"), "app")
	c.r.Conn.Principals = []string{"spiffe://cluster.local/ns/payments/sa/api"}
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("produce by payments: %+v, want Pass (API not selected)", v)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TopicNames = []string{"orders"}
	d := request(t, del, "app")
	d.r.Conn.Principals = []string{"spiffe://cluster.local/ns/payments/sa/api"}
	if v := d.check(e, t0); v.Outcome != Reject {
		t.Fatalf("delete by payments: %+v, want Reject", v)
	}
	d.r.Conn.Principals = []string{"spiffe://cluster.local/ns/orders/sa/api"}
	if v := d.check(e, t0); v.Outcome != Pass {
		t.Fatalf("delete by orders: %+v, want Pass", v)
	}
}

func TestPrincipalBadGlob(t *testing.T) {
	c := Config{Rules: []Rule{{Name: "x", Action: ActionReject, Match: Selector{Principal: "spiffe://[z-a]"}}}}
	var fe *fielderr.Error
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "rules.0.match.principal" {
		t.Fatalf("Validate = %v, want a field error on rules.0.match.principal", err)
	}
}

// except_principals makes an allow-list by identity: everyone else is
// selected, anonymous connections included.
func TestExceptPrincipals(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "only-payments-deletes", Action: ActionReject,
		Match: Selector{APIs: []string{"DeleteTopics"}, ExceptPrincipals: []string{"spiffe://cluster.local/ns/payments/*", "admin"}}})
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TopicNames = []string{"orders"}
	for _, tc := range []struct {
		name       string
		principals []string
		want       Outcome
	}{
		{"listed URI SAN", []string{"spiffe://cluster.local/ns/payments/sa/api", "api"}, Pass},
		{"listed CN", []string{"spiffe://cluster.local/ns/ops/sa/x", "admin"}, Pass},
		{"not listed", []string{"spiffe://cluster.local/ns/orders/sa/api", "orders"}, Reject},
		{"no identity", nil, Reject},
	} {
		d := request(t, del, "app")
		d.r.Conn.Principals = tc.principals
		if v := d.check(e, t0); v.Outcome != tc.want {
			t.Errorf("%s: %+v, want outcome %d", tc.name, v, tc.want)
		}
	}
	c := request(t, del, "app")
	c.r.Conn = nil
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Errorf("no connection state: %+v, want Reject", v)
	}
	bad := Config{Rules: []Rule{{Name: "x", Action: ActionReject, Match: Selector{ExceptPrincipals: []string{"ok", "["}}}}}
	var fe *fielderr.Error
	if err := bad.Validate(); !errors.As(err, &fe) || fe.Field != "rules.0.match.except_principals.1" {
		t.Errorf("Validate = %v, want a field error on rules.0.match.except_principals.1", err)
	}
}
