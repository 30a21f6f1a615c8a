// Command kproxy is a Kafka-aware sidecar proxy. This package only wires
// the other packages together; see README.md for the commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `kproxy: a Kafka-aware sidecar proxy

Usage:
  kproxy run      [--config FILE] [--listen HOST:PORT] [--upstream HOST:PORT] [--admin HOST:PORT] [--log-level LEVEL]
                  [--tls-cert FILE --tls-key FILE]
  kproxy demo     [--listen HOST:PORT] [--admin HOST:PORT] [--log-level LEVEL] [--check]
  kproxy validate --config FILE
  kproxy version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "run":
		err = run(args)
	case "demo":
		err = demo(args)
	case "validate":
		err = validate(args)
	case "version", "--version":
		fmt.Println("kproxy", version())
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kproxy: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		os.Exit(2) // the flag package has printed what is wrong
	case err != nil:
		fmt.Fprintln(os.Stderr, "kproxy:", err)
		os.Exit(1)
	}
}
