package sasl

import (
	"github.com/kproxy/kproxy/internal/fielderr"
)

// Check reads the credential files of a validated Config the way an
// authentication does (each exists, is readable and is not empty), for
// `kproxy validate` and start-up. The error is a *fielderr.Error naming
// the field and the file; it never carries what a file holds.
func (c Config) Check() error {
	if c.Upstream == nil {
		return nil
	}
	for _, f := range c.Upstream.files() {
		if _, err := readSecret(f.path); err != nil {
			return fielderr.New(f.field, err.Error())
		}
	}
	if o := c.Upstream.OAuth; o != nil && o.CAFile != "" {
		if _, err := caPool(o.CAFile); err != nil {
			return fielderr.New("upstream.oauth.ca_file", err.Error())
		}
	}
	if c.Upstream.Mechanism != OAuthBearer {
		if _, err := load(c.Upstream); err != nil {
			return fielderr.New("upstream.password_file", "holds the same value as username_file: check the paths")
		}
	}
	return nil
}
