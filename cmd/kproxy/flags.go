package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/tlsconf"
)

// options are the flags shared by run, demo and validate. A flag that is
// set wins over the file.
type options struct {
	fs       *flag.FlagSet
	config   string
	listen   string
	upstream string
	admin    string
	logLevel string
	tlsCert  string
	tlsKey   string
	check    bool
	demoLoad bool
}

func parseFlags(name string, args []string, stderr io.Writer) (*options, error) {
	o := &options{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	o.fs.SetOutput(stderr)
	o.fs.StringVar(&o.config, "config", "", "path to kproxy.yaml")
	o.fs.StringVar(&o.listen, "listen", "", "client address, HOST:PORT (proxy.listen)")
	o.fs.StringVar(&o.upstream, "upstream", "", "broker address, HOST:PORT (proxy.upstream)")
	o.fs.StringVar(&o.admin, "admin", "", "admin HTTP address, HOST:PORT (admin.listen)")
	o.fs.StringVar(&o.logLevel, "log-level", "", "trace, debug, info, warn or error (log.level)")
	if name != "demo" {
		// For the injected sidecar, whose kproxy.yaml is the user's: the
		// annotation that mounts the certificate's Secret names it here.
		o.fs.StringVar(&o.tlsCert, "tls-cert", "", "certificate kproxy presents to clients, PEM (tls.listener.cert_file; turns TLS on)")
		o.fs.StringVar(&o.tlsKey, "tls-key", "", "its key, PEM (tls.listener.key_file)")
	}
	if name == "demo" {
		o.fs.BoolVar(&o.check, "check", false, "produce and consume a few records through kproxy, print them, and exit")
		o.fs.BoolVar(&o.demoLoad, "load", false, "also run a producer and a consumer group through kproxy until stopped")
	}
	if err := o.fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, usageError{err}
	}
	if o.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", o.fs.Arg(0))
		return nil, usageError{fmt.Errorf("unexpected argument %q", o.fs.Arg(0))}
	}
	return o, nil
}

// usageError is a command line the flag package refused; it exits 2.
type usageError struct{ error }

// load reads the file (if any) and applies the flags over it.
func (o *options) load() (config.File, *yaml.Node, error) {
	f, root := config.Defaults(), (*yaml.Node)(nil)
	if o.config != "" {
		var err error
		if f, root, err = config.Load(o.config); err != nil {
			return f, nil, err
		}
	}
	f.Proxy.ApplyEnv(os.Getenv)
	given := map[string]bool{}
	o.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	// A flag on the command line wins even when empty: --admin "" turns the
	// admin server off, as admin.listen: "" does in the file.
	set := func(name string, dst *string, v string) {
		if given[name] {
			*dst = v
		}
	}
	set("listen", &f.Proxy.Listen, o.listen)
	set("upstream", &f.Proxy.Upstream, o.upstream)
	set("admin", &f.Admin.Listen, o.admin)
	set("log-level", &f.Log.Level, o.logLevel)
	if given["tls-cert"] || given["tls-key"] {
		if f.TLS.Listener == nil {
			f.TLS.Listener = &tlsconf.Listener{}
		}
		set("tls-cert", &f.TLS.Listener.CertFile, o.tlsCert)
		set("tls-key", &f.TLS.Listener.KeyFile, o.tlsKey)
	}
	return f, root, nil
}
