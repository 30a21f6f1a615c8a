package correlate

import "github.com/kproxy/kproxy/internal/fielderr"

// Config is the `correlate:` section of kproxy.yaml.
type Config struct {
	// MaxInFlight bounds the entries of one table. When it is reached kproxy
	// stops reading that client's requests until responses drain.
	MaxInFlight int `yaml:"max_in_flight"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config { return Config{MaxInFlight: 256} }

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<20 {
		return fielderr.New("max_in_flight", "must be between 1 and 1048576")
	}
	return nil
}
