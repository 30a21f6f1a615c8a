package harness

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// SessionLifetime authenticates to a broker listener at addr with mech
// (over TLS when tc is set) the way a KIP-368 client does, SaslHandshake
// v1 then SaslAuthenticate v2 until the mechanism is done, and returns the
// session lifetime the broker granted (0: no re-authentication). The
// fixture checks with it that its listeners do expire sessions: a cell
// that saw no re-authentication would otherwise pass for nothing.
func SessionLifetime(ctx context.Context, addr string, tc *tls.Config, mech sasl.Mechanism) (time.Duration, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	if tc != nil {
		conn = tls.Client(conn, tc)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	p := &probe{conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kproxy-e2e-probe"))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := p.roundTrip(hs, hsResp); err != nil {
		return 0, fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerrOf(hsResp.ErrorCode, nil); err != nil {
		return 0, fmt.Errorf("SaslHandshake %s: %w (broker offers %v)", mech.Name(), err, hsResp.SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(addr)
	sess, out, err := mech.Authenticate(ctx, host)
	if err != nil {
		return 0, err
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := p.roundTrip(req, resp); err != nil {
			return 0, fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return 0, fmt.Errorf("SaslAuthenticate %s: %w", mech.Name(), err)
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return 0, err
		}
		if done {
			return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond, nil
		}
		out = next
	}
}

func kerrOf(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	if msg != nil {
		return fmt.Errorf("error code %d: %s", code, *msg)
	}
	return fmt.Errorf("error code %d", code)
}

// probe writes requests and reads their responses, one at a time.
type probe struct {
	conn net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func (p *probe) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	p.corr++
	if _, err := p.conn.Write(p.f.AppendRequest(nil, req, p.corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(p.conn, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("response size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.conn, b); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != p.corr {
		return fmt.Errorf("correlation id %d, want %d", corr, p.corr)
	}
	b = b[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		// The flexible response header ends with its tagged fields,
		// none from these brokers: one zero count byte.
		if len(b) == 0 || b[0] != 0 {
			return fmt.Errorf("response header with tagged fields")
		}
		b = b[1:]
	}
	return resp.ReadFrom(b)
}
