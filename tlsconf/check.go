package tlsconf

import (
	"errors"
	"os"
	"time"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Check loads every file of a validated Config and checks it the way a
// reload does (certificates parse, each key matches its certificate, no
// leaf has expired at now, CA bundles parse), for `kproxy validate` and
// start-up. The error is a *fielderr.Error naming the field and the file.
func (c Config) Check(now time.Time) error {
	if l := c.Listener; l != nil {
		if err := checkPair("listener.", l.CertFile, l.KeyFile, now); err != nil {
			return err
		}
		if err := checkCA("listener.client_ca_file", l.ClientCAFile); err != nil {
			return err
		}
	}
	if u := c.Upstream; u != nil {
		if err := checkCA("upstream.ca_file", u.CAFile); err != nil {
			return err
		}
		if err := checkPair("upstream.", u.CertFile, u.KeyFile, now); err != nil {
			return err
		}
	}
	return nil
}

func checkPair(at, certFile, keyFile string, now time.Time) error {
	if certFile == "" {
		return nil
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return fielderr.New(at+"cert_file", err.Error())
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return fielderr.New(at+"key_file", err.Error())
	}
	_, err = parsePair(at, certFile, keyFile, certPEM, keyPEM, now)
	return asField(err)
}

func checkCA(field, file string) error {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fielderr.New(field, err.Error())
	}
	_, err = parseCA(field, file, data)
	return asField(err)
}

func asField(err error) error {
	var fe *fileError
	if errors.As(err, &fe) {
		return fielderr.New(fe.Field, fe.Error())
	}
	return err
}
