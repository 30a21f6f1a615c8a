package main

import "os"

// run starts kproxy in front of the configured upstream and serves until
// SIGTERM or SIGINT.
func run(args []string) error {
	o, err := parseFlags("run", args, os.Stderr)
	if err != nil {
		return err
	}
	// The file's digest is taken before it is read, so a change made
	// while kproxy starts is reloaded rather than missed.
	loaded := digest(o.config)
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
		loop := s.watchConfig(o.config, loaded, o.load)
		go loop(stop)
	}
	s.waitSignal(nil)
	return nil
}
