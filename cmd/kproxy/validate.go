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
	// The credentials files must be there to read; what they hold is
	// never printed.
	if err := f.SASL.Check(); err != nil {
		return fmt.Errorf("%s: %w", o.config, err)
	}
	for _, w := range f.Policies.Warnings() {
		fmt.Printf("%s: warning: policies.%s\n", o.config, w)
	}
	fmt.Printf("%s: ok\n", o.config)
	if c := f.Cluster; c.On() {
		first, _ := c.Port(c.NodeIDs.Min)
		last, _ := c.Port(c.NodeIDs.Max)
		fmt.Printf("cluster mode: bootstrap %s for %s; node ids %d-%d on ports %d-%d, advertised as %s\n",
			f.Proxy.Listen, f.Proxy.Upstream, c.NodeIDs.Min, c.NodeIDs.Max, first, last, c.Host(f.Proxy.Listen))
	}
	return nil
}
