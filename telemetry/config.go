package telemetry

import (
	"fmt"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `telemetry:` section of kproxy.yaml.
type Config struct {
	Clients ClientsConfig `yaml:"clients"`
	Lag     LagConfig     `yaml:"lag"`
}

// LagConfig is telemetry.lag: consumer lag from the Fetch traffic.
type LagConfig struct {
	// Enabled exports kproxy_consumer_lag_records and
	// kproxy_consumer_lag_seconds for every partition consumers fetch
	// through kproxy.
	Enabled bool `yaml:"enabled"`
	// MaxSeries bounds the partitions exported one by one; past it, the
	// partitions of a topic not yet exported are summed into one series
	// per topic (partition="all").
	MaxSeries int `yaml:"max_series"`
}

// maxSeriesLimit bounds max_series: each series is a few hundred bytes
// here and a time series in Prometheus.
const maxSeriesLimit = 1_000_000

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config {
	return Config{Clients: clientsDefaults(), Lag: LagConfig{MaxSeries: 10_000}}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if err := c.Clients.validate(); err != nil {
		return err
	}
	if c.Lag.MaxSeries < 1 || c.Lag.MaxSeries > maxSeriesLimit {
		return fielderr.New("lag.max_series", fmt.Sprintf("must be between 1 and %d", maxSeriesLimit))
	}
	return nil
}
