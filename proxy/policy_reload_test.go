package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// apiVersionsRate refuses ApiVersions over perSecond on each connection.
func apiVersionsRate(perSecond float64) policy.Rule {
	return policy.Rule{Name: "api-versions-rate", Action: policy.ActionReject,
		Match:  policy.Selector{APIs: []string{"ApiVersions"}},
		Limits: policy.Limits{RequestsPerSecond: perSecond, Key: "connection"}}
}

// burstApiVersions sends count ApiVersions v3 requests in one write and
// returns how many were answered without error and how many were refused
// with POLICY_VIOLATION, failing on anything else. v3 is flexible, which
// checks that kproxy's own answers keep ApiVersions' v0 response header.
func burstApiVersions(t *testing.T, c net.Conn, first int32, count int) (ok, refused int) {
	t.Helper()
	var batch []byte
	for i := 0; i < count; i++ {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = 3
		r.ClientSoftwareName, r.ClientSoftwareVersion = "kproxy-test", "1.0"
		batch = append(batch, encodeRequest(r, first+int32(i))...)
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatalf("write: %v (connection closed?)", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < count; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v (connection closed?)", i, err)
		}
		if got := corrOf(f); got != first+int32(i) {
			t.Fatalf("response %d has correlation id %d, want %d", i, got, first+int32(i))
		}
		switch code := decodeResponse(t, f, 18, 3).(*kmsg.ApiVersionsResponse).ErrorCode; code {
		case 0:
			ok++
		case 44:
			refused++
		default:
			t.Fatalf("response %d: error code %d, want 0 or 44 (POLICY_VIOLATION)", i, code)
		}
	}
	return ok, refused
}

// A reload reaches live connections: a client refused under a low rate is
// served in full, on the same connection, once the limit is raised.
func TestPolicyReloadRaisesLimitOnLiveConnection(t *testing.T) {
	env := startKfake(t, nil)
	ps := applyPolicies(t, env, apiVersionsRate(5))
	c := dialRaw(t, env.addr)
	ok, refused := burstApiVersions(t, c, 100, 20)
	t.Logf("at 5/s: %d answered, %d refused", ok, refused)
	// The bucket holds one second's worth: about 5 pass.
	if ok < 5 || ok > 7 || refused == 0 {
		t.Fatalf("at 5/s, 20 quick requests: %d answered, %d refused; want about 5 answered", ok, refused)
	}
	if n := ps.count(t, "kproxy_policy_rejected_total", "api-versions-rate"); n != float64(refused) {
		t.Fatalf("rejected counter = %v, client saw %d refusals", n, refused)
	}
	before := env.accepted()

	ps.reload(t, env, apiVersionsRate(1000))
	ok, refused = burstApiVersions(t, c, 200, 20)
	if refused != 0 || ok != 20 {
		t.Fatalf("after raising the limit to 1000/s: %d answered, %d refused; want all 20 answered", ok, refused)
	}
	if env.accepted() != before || env.logs.contains("connection closed") {
		t.Fatalf("the connection was replaced or closed:\n%s", env.logs)
	}
}
