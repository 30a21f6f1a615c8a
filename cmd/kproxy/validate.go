package main

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// validate checks a config file and says what is wrong, with its line.
func validate(args []string) error {
	o, err := parseFlags("validate", args, os.Stderr)
	if err != nil {
		return err
	}
	if o.config == "" {
		return errors.New("validate needs --config FILE")
	}
	f, root, err := o.load()
	if err != nil {
		return err
	}
	if err := f.Validate(o.config, root); err != nil {
		return err
	}
	// The TLS files must load as kproxy would load them at start.
	if err := f.TLS.Check(time.Now()); err != nil {
		return fmt.Errorf("%s: %w", o.config, err)
	}
	fmt.Printf("%s: ok\n", o.config)
	return nil
}
