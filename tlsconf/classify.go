package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
)

// Handshake results, the `result` label of kproxy_tls_handshakes_total.
const (
	ResultOK                  = "ok"
	ResultTimeout             = "timeout"               // handshake_timeout passed
	ResultNotTLS              = "not_tls"               // the peer spoke something else (plaintext Kafka)
	ResultUnknownCA           = "unknown_ca"            // the certificate chains to no trusted CA
	ResultBadCertificate      = "bad_certificate"       // a certificate refused for another reason
	ResultNoClientCertificate = "no_client_certificate" // client_auth require, and the client sent none
	ResultNameMismatch        = "name_mismatch"         // the broker's certificate is not for the name dialled
	ResultExpired             = "expired"               // a certificate expired (or not yet valid)
	ResultVersion             = "version"               // no TLS version in common (min_version)
	ResultClosed              = "closed"                // the peer closed the connection during the handshake
	ResultEvicted             = "evicted"               // dropped for a newcomer at tls.listener.max_handshakes
	ResultOther               = "other"
)

// ErrEvicted is a client handshake kproxy dropped for a newcomer: it had
// made no progress the longest with tls.listener.max_handshakes under way.
var ErrEvicted = errors.New("it had made no progress the longest, with tls.listener.max_handshakes under way")

// Results are every result, in the order of the list above.
var Results = []string{ResultOK, ResultTimeout, ResultNotTLS, ResultUnknownCA, ResultBadCertificate,
	ResultNoClientCertificate, ResultNameMismatch, ResultExpired, ResultVersion, ResultClosed, ResultEvicted, ResultOther}

// ClassifyHandshakeError says why a handshake failed, as one of Results
// (ResultOK for nil). It reads both errors found locally (a certificate
// this side refused) and alerts the peer sent (one it refused), so each
// side of a failed handshake names the same cause where TLS lets it.
func ClassifyHandshakeError(err error) string {
	if err == nil {
		return ResultOK
	}
	var he *HandshakeError
	if errors.As(err, &he) {
		return he.Result
	}
	var (
		rh    tls.RecordHeaderError
		alert tls.AlertError
		ua    x509.UnknownAuthorityError
		host  x509.HostnameError
		inv   x509.CertificateInvalidError
		cve   *tls.CertificateVerificationError
		ne    net.Error
	)
	switch {
	case errors.Is(err, ErrEvicted):
		return ResultEvicted
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return ResultTimeout
	case errors.As(err, &rh):
		return ResultNotTLS
	case errors.As(err, &ua):
		return ResultUnknownCA
	case errors.As(err, &host):
		return ResultNameMismatch
	case errors.As(err, &inv):
		if inv.Reason == x509.Expired {
			return ResultExpired
		}
		return ResultBadCertificate
	case errors.As(err, &cve):
		return ResultBadCertificate
	case errors.As(err, &alert):
		return classifyAlert(alert)
	case remoteAlert(err, &alert):
		return classifyAlert(alert)
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return ResultNoClientCertificate // crypto/tls has no type for it
	case strings.Contains(err.Error(), "unsupported versions"):
		return ResultVersion
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE):
		return ResultClosed
	case errors.As(err, &ne) && ne.Timeout():
		return ResultTimeout
	}
	return ResultOther
}

// remoteAlert finds an alert the peer sent. crypto/tls reports one as a
// *net.OpError with Op "remote error" around its private alert type (a
// uint8), not as a tls.AlertError.
func remoteAlert(err error, a *tls.AlertError) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return false
	}
	if v := reflect.ValueOf(op.Err); v.Kind() == reflect.Uint8 {
		*a = tls.AlertError(v.Uint())
		return true
	}
	return false
}

// Alert numbers (RFC 8446 section 6; crypto/tls keeps its names private).
const (
	alertBadCertificate         = 42
	alertUnsupportedCertificate = 43
	alertCertificateRevoked     = 44
	alertCertificateExpired     = 45
	alertCertificateUnknown     = 46
	alertUnknownCA              = 48
	alertProtocolVersion        = 70
	alertCertificateRequired    = 116
)

func classifyAlert(a tls.AlertError) string {
	switch a {
	case alertUnknownCA:
		return ResultUnknownCA
	case alertCertificateExpired:
		return ResultExpired
	case alertCertificateRequired:
		return ResultNoClientCertificate
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateRevoked, alertCertificateUnknown:
		return ResultBadCertificate
	case alertProtocolVersion:
		return ResultVersion
	}
	return ResultOther
}

// HandshakeError is a failed handshake with its cause named for the log
// line that closes the connection.
type HandshakeError struct {
	Side   string // SideClient or SideUpstream
	Result string // one of Results
	Err    error
}

func (e *HandshakeError) Unwrap() error { return e.Err }

func (e *HandshakeError) Error() string {
	return "TLS handshake with " + e.peer() + " failed: " + e.cause() + ": " + e.Err.Error()
}

func (e *HandshakeError) peer() string {
	if e.Side == SideUpstream {
		return "broker"
	}
	return "client"
}

func (e *HandshakeError) cause() string {
	up := e.Side == SideUpstream
	switch e.Result {
	case ResultTimeout:
		return "the handshake did not complete within the handshake timeout"
	case ResultNotTLS:
		if up {
			return "broker answered in plaintext (or another protocol): is its listener TLS?"
		}
		return "client spoke plaintext Kafka (or another protocol) to a TLS listener"
	case ResultUnknownCA:
		if up {
			return "certificate signed by a CA not in tls.upstream.ca_file (or not trusted by the broker)"
		}
		return "certificate signed by a CA not in tls.listener.client_ca_file (or not trusted by the client)"
	case ResultNameMismatch:
		return "the broker's certificate is not for the name dialled (set tls.upstream.server_name?)"
	case ResultExpired:
		return "a certificate has expired or is not yet valid"
	case ResultNoClientCertificate:
		if up {
			return "the broker requires a client certificate (set tls.upstream.cert_file)"
		}
		return "the client sent no certificate and tls.listener.client_auth is require"
	case ResultBadCertificate:
		return "a certificate was refused"
	case ResultVersion:
		return "no TLS version in common (see min_version)"
	case ResultClosed:
		return "the " + e.peer() + " closed the connection during the handshake"
	case ResultEvicted:
		return "dropped for a newcomer"
	}
	return "TLS error"
}
