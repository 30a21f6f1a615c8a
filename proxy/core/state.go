package core

import "sync/atomic"

// State is where a connection is in its lifecycle (see the package
// doc's diagram).
type State int32

// The states, in the only order a connection moves through them.
const (
	StateOpening State = iota
	StateRelaying
	StateDraining
	StateClosed
)

var stateNames = [...]string{StateOpening: "opening", StateRelaying: "relaying", StateDraining: "draining", StateClosed: "closed"}

func (s State) String() string { return stateNames[s] }

// lifecycle holds a connection's state; every move is one of its methods,
// each a compare-and-swap, so two goroutines racing (a drain and a close,
// two sides failing at once) make at most one move.
type lifecycle struct{ s atomic.Int32 }

func (l *lifecycle) load() State { return State(l.s.Load()) }

// relay moves opening to relaying, at registration.
func (l *lifecycle) relay() bool {
	return l.s.CompareAndSwap(int32(StateOpening), int32(StateRelaying))
}

// drain moves relaying to draining.
func (l *lifecycle) drain() bool {
	return l.s.CompareAndSwap(int32(StateRelaying), int32(StateDraining))
}

// close moves any state but closed to closed, and reports whether this
// call did.
func (l *lifecycle) close() bool {
	for {
		s := l.s.Load()
		if State(s) == StateClosed {
			return false
		}
		if l.s.CompareAndSwap(s, int32(StateClosed)) {
			return true
		}
	}
}
