package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/rs/zerolog"
)

// Topology is what kproxy knows of the cluster it fronts: the real address
// of each broker it serves, learnt from its own Metadata requests to the
// bootstrap and from every address-bearing response it relays. A
// connection to a node port dials the address last learnt for that node,
// so a broker that moves is re-targeted for new connections.
type Topology struct {
	cfg Config
	log zerolog.Logger

	mu    sync.Mutex
	addrs map[int32]string
	// changed is closed and replaced whenever addrs changes, so Wait can
	// wait on it without polling.
	changed chan struct{}
	// lastErr is why the last discovery failed, nil once one worked.
	lastErr    error
	discovered bool
	// started counts the discoveries begun, ended those that worked: a
	// client waiting for a node gives up once a discovery begun after it
	// came has worked without naming its node.
	started, worked uint64
	// waiting counts the clients waiting for a node (at most maxWaiting).
	waiting int
}

// maxWaiting bounds the clients of node ports that wait at once for a
// node kproxy does not know: each holds a socket and a goroutine, and a
// client of a node that does not exist must not hold them for the whole
// dial_timeout by the hundred.
const maxWaiting = 64

// ErrNoSuchNode is a node that a discovery begun after the client came
// did not find: the client is refused at once.
var ErrNoSuchNode = errors.New("a discovery through the bootstrap since the client came does not name it")

// NewTopology returns an empty topology for cfg's node ids.
func NewTopology(cfg Config, log zerolog.Logger) *Topology {
	return &Topology{cfg: cfg, log: log, addrs: make(map[int32]string), changed: make(chan struct{})}
}

// Learn records the brokers a response named. Controllers and node ids
// outside node_ids are not served and are ignored here (Rewrite refuses
// them), as are entries without a host or port. It logs each broker that
// appears or moves.
func (t *Topology) Learn(seen []Broker) {
	if len(seen) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	moved := false
	for _, b := range seen {
		if b.EndpointType != EndpointBroker {
			continue
		}
		if _, ok := t.cfg.Port(b.NodeID); !ok {
			continue
		}
		if b.Host == "" || b.Port <= 0 {
			// An error's placeholder (a coordinator not found, named
			// node 0 by some brokers): no address to learn.
			continue
		}
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		old, had := t.addrs[b.NodeID]
		if old == addr {
			continue
		}
		t.addrs[b.NodeID] = addr
		moved = true
		port, _ := t.cfg.Port(b.NodeID)
		if had {
			t.log.Info().Int32("node", b.NodeID).Str("from", old).Str("to", addr).Int("port", port).
				Msg("broker re-targeted: new connections to its port go to its new address")
		} else {
			t.log.Info().Int32("node", b.NodeID).Str("broker", addr).Int("port", port).Msg("broker learnt")
		}
	}
	if moved {
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// Addr is the real address of node, if known.
func (t *Topology) Addr(node int32) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.addrs[node]
	return a, ok
}

// Nodes is how many brokers are known.
func (t *Topology) Nodes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.addrs)
}

// Wait returns node's address once it is known, calling ask (which starts
// a discovery) when it is not yet. It fails when ctx ends first, when a
// discovery begun after the call has worked without naming node
// (ErrNoSuchNode), or at once when maxWaiting clients wait already.
func (t *Topology) Wait(ctx context.Context, node int32, ask func()) (string, error) {
	t.mu.Lock()
	a, ok := t.addrs[node]
	if ok {
		t.mu.Unlock()
		return a, nil
	}
	if t.waiting >= maxWaiting && t.discovered {
		// Capped only once the cluster is known: after a restart, clients
		// reconnect straight to node ports by the hundred, and wait for
		// the first discovery.
		t.mu.Unlock()
		return "", fmt.Errorf("node %d is not known and %d clients wait for unknown nodes already", node, maxWaiting)
	}
	t.waiting++
	arrived := t.started
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.waiting--
		t.mu.Unlock()
	}()
	asked := false
	for {
		t.mu.Lock()
		a, ok := t.addrs[node]
		ch := t.changed
		// A discovery begun after the client came, and done: worked
		// counts each one that did, in order.
		settled := t.worked > arrived
		t.mu.Unlock()
		if ok {
			return a, nil
		}
		if settled {
			return "", fmt.Errorf("node %d (%d known): %w", node, t.Nodes(), ErrNoSuchNode)
		}
		if !asked && ask != nil {
			ask()
			asked = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", fmt.Errorf("node %d is not a broker of the cluster as last learnt (%d known): %w", node, t.Nodes(), ctx.Err())
		}
	}
}

// Discovering records that a discovery begins.
func (t *Topology) Discovering() {
	t.mu.Lock()
	t.started++
	t.mu.Unlock()
}

// Discovered records the outcome of a discovery: err nil means the
// bootstrap answered with the brokers (already given to Learn).
func (t *Topology) Discovered(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = err
	if err == nil {
		t.discovered = true
		// Every discovery begun so far has ended (the loop runs one at
		// a time): waiters that came before it learn it did not name
		// their node.
		t.worked = t.started
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// Ready says why the topology cannot serve node ports yet, or nil: no
// discovery has worked (nor found the bootstrap requiring SASL, see
// ErrNeedsAuth) and no response has named a broker, or the last
// discovery found brokers outside node_ids (then no client's Metadata can
// be passed on).
func (t *Topology) Ready() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var outside *OutsideError
	if errors.As(t.lastErr, &outside) {
		return t.lastErr
	}
	if t.discovered || len(t.addrs) > 0 || errors.Is(t.lastErr, ErrNeedsAuth) {
		// With a bootstrap that requires SASL the topology comes with
		// the clients' own responses: waiting for it would keep an
		// application that connects lazily from ever being ready.
		return nil
	}
	if t.lastErr != nil {
		return fmt.Errorf("cluster topology not learnt yet: %w", t.lastErr)
	}
	return errors.New("cluster topology not learnt yet")
}
