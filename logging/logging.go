// Package logging builds kproxy's zerolog logger from the `log:` section.
package logging

import (
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `log:` section of kproxy.yaml.
type Config struct {
	// Level is trace, debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is json (for log pipelines) or console (for people).
	Format string `yaml:"format"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config { return Config{Level: "info", Format: "json"} }

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch c.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return fielderr.New("level", "must be one of trace, debug, info, warn, error")
	}
	if c.Format != "json" && c.Format != "console" {
		return fielderr.New("format", "must be json or console")
	}
	return nil
}

// New returns a logger writing to w.
func New(c Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		level = zerolog.InfoLevel
	}
	if c.Format == "console" {
		f, isFile := w.(*os.File)
		color := isFile && isatty.IsTerminal(f.Fd())
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !color}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
