package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kproxyChild is a kproxy process compare started and must stop.
type kproxyChild struct {
	cmd  *exec.Cmd
	addr string
	done chan error // receives Wait's result once
	once sync.Once
}

// startKproxy runs `bin run` in front of upstream on a free loopback port,
// with the admin port on a free one too (so it never collides with a
// kproxy already running), and waits until it accepts connections.
func startKproxy(bin, upstream string, extra []string) (*kproxyChild, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"run", "--listen", addr, "--upstream", upstream,
		"--admin", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &kproxyChild{cmd: cmd, addr: addr, done: make(chan error, 1)}
	go func() { k.done <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return k, nil
		}
		select {
		case err := <-k.done:
			return nil, fmt.Errorf("%s %s exited before listening: %v", bin, strings.Join(args, " "), err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.stop()
			return nil, fmt.Errorf("%s did not listen on %s within 10s", bin, addr)
		}
	}
}

// stop asks kproxy to drain with SIGTERM and kills it if it has not exited
// after 5 s. It signals only the process it started; calls after the first
// return at once.
func (k *kproxyChild) stop() {
	k.once.Do(func() {
		k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(5 * time.Second):
			k.cmd.Process.Kill()
			<-k.done
		}
	})
}

// freeAddr is a loopback address with a port the kernel just handed out.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
