// Command kfake is the node tests' broker image: franz-go's in-process
// fake Kafka (kfake) as a process, listening on one address and
// advertising another, as a broker behind a sidecar in its pod does (it
// listens on loopback, clients reach it through kproxy's port).
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// advertised is a listener that reports the address clients are told.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

func main() {
	listen := flag.String("listen", "127.0.0.1:19092", "address to listen on")
	advertise := flag.String("advertise", "", "host:port clients are given in Metadata (default: the listen address)")
	flag.Parse()
	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake: --listen:", err)
		os.Exit(2)
	}
	var p int
	fmt.Sscan(port, &p)
	listenFn := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, net.JoinHostPort(host, port))
		if err != nil || *advertise == "" {
			return ln, err
		}
		addr, err := net.ResolveTCPAddr("tcp", *advertise)
		if err != nil {
			ln.Close()
			return nil, err
		}
		return advertised{ln, addr}, nil
	}
	c, err := kfake.NewCluster(kfake.Ports(p), kfake.ListenFn(listenFn), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Printf("kfake listening on %s, advertising %v\n", *listen, c.ListenAddrs())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	c.Close()
}
