package stream

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned is a certificate for 127.0.0.1 with key.
func selfSigned(b *testing.B, key crypto.Signer) tls.Certificate {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kproxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// BenchmarkTLSHandshake is one full TLS 1.3 handshake, both ends in this
// process, per listener key type: what a client costs kproxy's CPU for
// each certificate (docs/tls.md compares them).
func BenchmarkTLSHandshake(b *testing.B) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r2, _ := rsa.GenerateKey(rand.Reader, 2048)
	r4, _ := rsa.GenerateKey(rand.Reader, 4096)
	for _, k := range []struct {
		name string
		key  crypto.Signer
	}{{"ecdsa-p256", ec}, {"rsa-2048", r2}, {"rsa-4096", r4}} {
		cert := selfSigned(b, k.key)
		srv := &tls.Config{Certificates: []tls.Certificate{cert}}
		cli := &tls.Config{InsecureSkipVerify: true}
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				a, c := net.Pipe()
				done := make(chan error, 1)
				go func() { done <- tls.Server(a, srv).Handshake() }()
				if err := tls.Client(c, cli).Handshake(); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				a.Close()
				c.Close()
			}
		})
	}
}
