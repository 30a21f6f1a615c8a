package main

import "os"

// run starts kproxy in front of the configured upstream and serves until
// SIGTERM or SIGINT.
func run(args []string) error {
	o, err := parseFlags("run", args, os.Stderr)
	if err != nil {
		return err
	}
	f, root, err := o.load()
	if err != nil {
		return err
	}
	if err := f.Validate(o.config, root); err != nil {
		return err
	}
	s, err := start(f, nil)
	if err != nil {
		return err
	}
	if o.config != "" {
		stop := make(chan struct{})
		defer close(stop)
		go s.watchConfig(o.config, o.load, stop)
	}
	s.waitSignal(nil)
	return nil
}
