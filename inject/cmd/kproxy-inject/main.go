// Command kproxy-inject adds kproxy as a native sidecar to the Deployments
// and StatefulSets of a manifest that carry kproxy.io/inject: "true" (in a
// broker's pod, or with kproxy.io/mode: cluster in a client's pod in front
// of a whole cluster), or serves the same as a mutating admission webhook. Documents it changes are
// rewritten from their decoded form (their comments and key order are
// lost); every other document is copied byte for byte.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/kproxy/kproxy/inject"
)

func main() {
	d := inject.Defaults()
	file := flag.String("f", "", "manifest to inject into (multi-document YAML; - for standard input); written to standard output")
	serve := flag.String("serve", "", "serve the admission webhook (/mutate) on HOST:PORT instead, over TLS")
	cert := flag.String("tls-cert", "", "with --serve: the serving certificate (PEM)")
	key := flag.String("tls-key", "", "with --serve: its key (PEM)")
	flag.StringVar(&d.Image, "image", d.Image, "kproxy's container image")
	flag.StringVar(&d.ConfigMap, "config-map", d.ConfigMap, "ConfigMap holding kproxy.yaml (broker mode; in cluster mode the injector writes kproxy.yaml from the annotations)")
	flag.StringVar(&d.OTLP, "otlp-endpoint", d.OTLP, "OTEL_EXPORTER_OTLP_ENDPOINT for the sidecar (empty: tracing off)")
	flag.Parse()
	if err := run(*file, *serve, *cert, *key, d, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-inject:", err)
		os.Exit(1)
	}
}

func run(file, serve, cert, key string, o inject.Options, stdin io.Reader, stdout io.Writer) error {
	switch {
	case serve != "":
		if cert == "" || key == "" {
			return fmt.Errorf("--serve needs --tls-cert and --tls-key: the API server calls webhooks over HTTPS")
		}
		srv := &http.Server{Addr: serve, Handler: inject.Webhook(o), ReadHeaderTimeout: 10 * time.Second}
		return srv.ListenAndServeTLS(cert, key)
	case file == "":
		return fmt.Errorf("give -f MANIFEST (or - for standard input), or --serve HOST:PORT")
	}
	var in []byte
	var err error
	if file == "-" {
		in, err = io.ReadAll(stdin)
	} else {
		in, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	out, err := inject.Manifest(in, o)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = stdout.Write(out)
	return err
}
