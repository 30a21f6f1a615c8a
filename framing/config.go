package framing

import (
	"fmt"
	"time"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `framing:` section of kproxy.yaml.
type Config struct {
	// MaxRequestBytes bounds a request frame (size prefix value). The
	// default follows the broker's socket.request.max.bytes.
	MaxRequestBytes int `yaml:"max_request_bytes"`
	// MaxResponseBytes bounds a response frame. Fetch responses are not
	// bounded by the request limit, so they get their own; the default
	// covers the broker's fetch.max.bytes (55 MiB).
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// ReadTimeout is how long a partial frame may wait for its remaining
	// bytes before the connection is closed.
	ReadTimeout time.Duration `yaml:"read_timeout"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config {
	return Config{
		MaxRequestBytes:  100 << 20,
		MaxResponseBytes: 100 << 20,
		ReadTimeout:      30 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxRequestBytes < minFrame || c.MaxRequestBytes > maxFrame:
		return fielderr.New("max_request_bytes", fmt.Sprintf("must be between %d and %d", minFrame, maxFrame))
	case c.MaxResponseBytes < minFrame || c.MaxResponseBytes > maxFrame:
		return fielderr.New("max_response_bytes", fmt.Sprintf("must be between %d and %d", minFrame, maxFrame))
	case c.ReadTimeout <= 0:
		return fielderr.New("read_timeout", "must be positive")
	}
	return nil
}

const (
	// minFrame is the smallest useful limit: a v0 request header.
	minFrame = 8
	// maxFrame keeps 4+size inside an int32 and the limit sane.
	maxFrame = 1 << 30
)
