package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// ident is the identity of a certificate with these names: the ones with a
// scheme are its URI SANs, in order, another its CN.
func ident(names ...string) Identity {
	var id Identity
	for _, n := range names {
		if strings.Contains(n, "://") {
			id.URIs = append(id.URIs, n)
		} else {
			id.CN = n
		}
	}
	return id
}

// A spiffe:// principal rule matches the certificate's SPIFFE ID: its one
// URI SAN. A certificate with two URI SANs has none (SPIFFE allows one).
func TestPrincipalSelector(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "payments-only", Action: ActionReject,
		Match: Selector{Principal: "spiffe://cluster.local/ns/payments/*"}})
	for _, tc := range []struct {
		name       string
		principals []string
		want       Outcome
	}{
		{"first URI SAN matches", []string{"spiffe://cluster.local/ns/payments/sa/api", "api"}, Reject},
		{"two URI SANs: no SPIFFE ID", []string{"spiffe://cluster.local/ns/orders/sa/x", "spiffe://cluster.local/ns/payments/sa/y"}, Pass},
		{"no identity matches", []string{"spiffe://cluster.local/ns/orders/sa/x", "payments"}, Pass},
		{"other namespace with the prefix as a suffix", []string{"spiffe://other/ns/payments"}, Pass},
	} {
		c := request(t, produce("orders"), "app")
		c.r.Conn.Identity = ident(tc.principals...)
		if v := c.check(e, t0); v.Outcome != tc.want {
			t.Errorf("%s: %+v, want outcome %d", tc.name, v, tc.want)
		}
	}
}

// A glob that is not spiffe:// matches the CN of a certificate with no
// URI SAN by default, and the CN of any certificate with principal_source
// cn or any; with uri, or by default on a certificate with URI SANs, the
// CN does not stand in for them.
func TestPrincipalSelectorCN(t *testing.T) {
	for _, tc := range []struct {
		source string
		names  []string
		want   Outcome
	}{
		{"", []string{"batch-job"}, Reject},
		{"", []string{"batch-job-2"}, Pass}, // exact, not prefix
		{"", []string{"spiffe://cluster.local/ns/x/sa/y", "batch-job"}, Pass},
		{SourceCN, []string{"spiffe://cluster.local/ns/x/sa/y", "batch-job"}, Reject},
		{SourceAny, []string{"spiffe://cluster.local/ns/x/sa/y", "batch-job"}, Reject},
		{SourceURI, []string{"batch-job"}, Pass},
	} {
		e, _ := newEngine(t, Rule{Name: "by-cn", Action: ActionReject, Match: Selector{Principal: "batch-job", PrincipalSource: tc.source}})
		c := request(t, produce("orders"), "app")
		c.r.Conn.Identity = ident(tc.names...)
		if v := c.check(e, t0); v.Outcome != tc.want {
			t.Errorf("source %q, names %v: %+v, want outcome %d", tc.source, tc.names, v, tc.want)
		}
	}
}

// The cases a review found exploitable wherever a CA lets a requester
// choose the CN or add URIs (issue 27, item 7): under an ops exemption
// from a payments-wide refusal, a CN that spells an ops SPIFFE ID is no
// SPIFFE ID, with or without a payments URI SAN beside it, and a
// certificate naming both payments and ops in two URI SANs has no SPIFFE
// identity at all: neither exempted nor selected by SPIFFE globs.
func TestPrincipalSpiffeIsTheOneURISAN(t *testing.T) {
	const ops, payments = "spiffe://cluster.local/ns/ops/sa/admin", "spiffe://cluster.local/ns/payments/sa/api"
	exempt, _ := newEngine(t, Rule{Name: "ops-only", Action: ActionReject,
		Match: Selector{APIs: []string{"Produce"}, ExceptPrincipals: []string{"spiffe://cluster.local/ns/ops/*"}}})
	deny, _ := newEngine(t, Rule{Name: "no-payments", Action: ActionReject,
		Match: Selector{APIs: []string{"Produce"}, Principal: "spiffe://cluster.local/ns/payments/*"}})
	for _, tc := range []struct {
		name           string
		id             Identity
		exempt, denied bool
	}{
		{"the ops SPIFFE ID", Identity{URIs: []string{ops}}, true, false},
		{"ops spelt in the CN, no URI SAN", Identity{CN: ops}, false, false},
		{"ops in the CN, a payments URI SAN", Identity{URIs: []string{payments}, CN: ops}, false, true},
		{"two URI SANs, payments and ops", Identity{URIs: []string{payments, ops}}, false, false},
	} {
		c := request(t, produce("orders"), "app")
		c.r.Conn.Identity = tc.id
		if got := c.check(exempt, t0).Outcome == Pass; got != tc.exempt {
			t.Errorf("%s: exempted %v, want %v", tc.name, got, tc.exempt)
		}
		if got := c.check(deny, t0).Outcome == Reject; got != tc.denied {
			t.Errorf("%s: selected by the payments rule %v, want %v", tc.name, got, tc.denied)
		}
	}
	bad := Config{Rules: []Rule{{Name: "x", Action: ActionReject, Match: Selector{Principal: "a", PrincipalSource: "dns"}}}}
	var fe *fielderr.Error
	if err := bad.Validate(); !errors.As(err, &fe) || fe.Field != "rules.0.match.principal_source" {
		t.Errorf("Validate = %v, want a field error on rules.0.match.principal_source", err)
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
	c.r.Conn = &ConnState{Identity: ident("anyone")}
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Fatalf("an identity: %+v, want Reject", v)
	}
}

// principal combines with the other fields: every field set must match.
func TestPrincipalCombinedWithAPIs(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "payments-no-delete", Action: ActionReject,
		Match: Selector{Principal: "spiffe://*/ns/payments/*", APIs: []string{"DeleteTopics"}}})
	c := request(t, produce("orders"), "app")
	c.r.Conn.Identity = ident("spiffe://cluster.local/ns/payments/sa/api")
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("produce by payments: %+v, want Pass (API not selected)", v)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TopicNames = []string{"orders"}
	d := request(t, del, "app")
	d.r.Conn.Identity = ident("spiffe://cluster.local/ns/payments/sa/api")
	if v := d.check(e, t0); v.Outcome != Reject {
		t.Fatalf("delete by payments: %+v, want Reject", v)
	}
	d.r.Conn.Identity = ident("spiffe://cluster.local/ns/orders/sa/api")
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
		{"listed CN, no URI SAN", []string{"admin"}, Pass},
		{"listed CN beside a URI SAN", []string{"spiffe://cluster.local/ns/ops/sa/x", "admin"}, Reject},
		{"not listed", []string{"spiffe://cluster.local/ns/orders/sa/api", "orders"}, Reject},
		{"no identity", nil, Reject},
	} {
		d := request(t, del, "app")
		d.r.Conn.Identity = ident(tc.principals...)
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
