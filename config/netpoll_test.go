package config

import (
	"testing"

	"github.com/cloudwego/netpoll"
)

// Loading a configuration leaves netpoll's process-wide settings alone:
// only a program that serves (cmd/kproxy's run and demo) configures them,
// through proxy.ConfigureNetpoll. Before, importing proxy (as config
// does, for its section) changed them in an init.
func TestLoadLeavesNetpollAlone(t *testing.T) {
	before := netpoll.LinkBufferCap
	if _, _, err := Load("testdata/full.yaml"); err != nil {
		t.Fatal(err)
	}
	if netpoll.LinkBufferCap != before || before == 1<<10 {
		t.Fatalf("netpoll's LinkBufferCap is %d (was %d before Load): loading a configuration reconfigured netpoll", netpoll.LinkBufferCap, before)
	}
}
