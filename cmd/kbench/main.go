// Command kbench measures kproxy: a null Kafka broker, a pipelined Produce
// or Fetch load generator, a side-by-side comparison of direct, kproxy and other
// proxies, and a real-client mode. It needs no Kafka installed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `kbench: load tool for kproxy (no Kafka needed)

Usage:
  kbench broker  --listen HOST:PORT [--advertise HOST:PORT] [--node-id N] [--topic T] [--partitions N] [--tls-dir DIR]
  kbench load    --addr HOST:PORT [-c CONNS] [-d DEPTH] [-s BYTES] [-t DURATION] [--max-requests N]
                 [--api produce|fetch] [--produce-version V] [--fetch-version V]
  kbench compare (--kproxy-bin PATH | --kproxy-addr HOST:PORT) [--other NAME=HOST:PORT[,pid=PID] ...]
                 [-c CONNS] [-d DEPTH] [-s BYTES] [-t DURATION] [--rounds R] [--tls [--tls-dir DIR]]
                 [--traced] [--cluster] [--api produce|fetch] [--produce-version V] [--fetch-version V]
  kbench certs   --dir DIR
  kbench clients --bootstrap HOST:PORT [-t DURATION] [-s BYTES] [--topic T]
  kbench idle    --addr HOST:PORT --pid PID [-n CONNS] [--hold DURATION]
  kbench stall   [--listen HOST:PORT]
  kbench flood   --addr HOST:PORT --pid PID [-s BYTES] [--acks0] [-t DURATION]
  kbench sink    [--listen HOST:PORT]
  kbench hostile --addr HOST:PORT --pid PID [-t DURATION] [--budget BYTES] [attack flags]
  kbench kfake   --listen HOST:PORT --advertise HOST:PORT [--topic T] [--partitions N]
  kbench soak    --bootstrap HOST:PORT [--pid PID --admin HOST:PORT] [-t DURATION] [--csv FILE] [load flags]
  kbench trend   --csv FILE [--window DURATION]

MB/s counts request frame bytes (10^6 bytes/s); latency runs from a request's
write to its response's read. Run "kbench COMMAND -h" for the flags of one command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "broker":
		err = brokerCmd(args)
	case "load":
		err = loadCmd(args)
	case "compare":
		err = compareCmd(args)
	case "certs":
		err = certsCmd(args)
	case "clients":
		err = clientsCmd(args)
	case "idle":
		err = idleCmd(args)
	case "flood":
		err = floodCmd(args)
	case "stall":
		err = stallCmd(args)
	case "sink":
		err = sinkCmd(args)
	case "hostile":
		err = hostileCmd(args)
	case "kfake":
		err = kfakeCmd(args)
	case "soak":
		err = soakCmd(args)
	case "trend":
		err = trendCmd(args)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kbench: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		os.Exit(2) // already printed with the flags

	default:
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line; it exits 2 rather than 1.
type usageError struct{ error }

// parse parses args into fs and refuses positional arguments, which are
// always a mistake here (a forgotten "--").
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return usageError{err}
	}
	return nil
}

// needAddrPID is the usage error of a command that measures a process
// (flood, hostile) when it lacks the address or the process id.
func needAddrPID(fs *flag.FlagSet, addr string, pid int) error {
	if addr != "" && pid > 0 {
		return nil
	}
	err := fmt.Errorf("--addr and --pid are required")
	fmt.Fprintln(fs.Output(), err)
	return usageError{err}
}

// waitForStop blocks until SIGINT or SIGTERM, for the commands that serve
// until stopped (broker, stall, sink).
func waitForStop() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
}
