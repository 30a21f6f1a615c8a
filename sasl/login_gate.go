package sasl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Every client connection under sasl.upstream costs a login at the
// brokers, so a port scanner, a probe loop or a flood of clients could
// load the brokers or the identity provider, and with wrong credentials
// lock the service account out. The gate bounds them for the whole
// process: a rate, a number under way at once, and, once logins keep
// failing, a backoff window during which new clients are refused at once.

// Backoff after failed logins: from failuresBeforeBackoff failures in a
// row, new clients are refused for a window that starts at backoffMin and
// doubles with each failure after it, up to backoffMax; a login that
// works ends it.
const (
	failuresBeforeBackoff = 3
	backoffMin            = time.Second
	backoffMax            = 30 * time.Second
)

// ErrBackoff is a client refused without a login because logins keep
// failing.
var ErrBackoff = errors.New("upstream logins keep failing: new clients are refused until the backoff ends")

// loginGate bounds the initial logins of upstream connections.
type loginGate struct {
	limit *rate.Limiter
	slots chan struct{}
	m     *Metrics
	log   zerolog.Logger

	mu       sync.Mutex
	failures int       // failed logins in a row
	until    time.Time // new clients are refused until then
	window   time.Duration
	told     bool // this window was logged
}

func newLoginGate(u Upstream, m *Metrics, log zerolog.Logger) *loginGate {
	perSecond, concurrent := u.MaxLoginsPerSecond, u.MaxConcurrentLogins
	if perSecond == 0 {
		perSecond = defaultLoginsPerSecond
	}
	if concurrent == 0 {
		concurrent = defaultConcurrentLogins
	}
	return &loginGate{limit: rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond))),
		slots: make(chan struct{}, concurrent), m: m, log: log}
}

// admit refuses a new client at once during a backoff window; the window
// is logged once.
func (g *loginGate) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !time.Now().Before(g.until) {
		return nil
	}
	if !g.told {
		g.told = true
		g.log.Warn().Int("failed_logins", g.failures).Dur("for", time.Until(g.until).Round(time.Millisecond)).
			Msg("upstream logins keep failing: new clients are reset without a login until the backoff ends")
	}
	g.m.refuse(RefusedBackoff)
	return ErrBackoff
}

// enter waits, bounded by ctx, for the login rate and a login slot; the
// returned func gives the slot back.
func (g *loginGate) enter(ctx context.Context) (func(), error) {
	if err := g.limit.Wait(ctx); err != nil {
		g.m.refuse(RefusedLimit)
		return nil, fmt.Errorf("waiting for a login (sasl.upstream.max_logins_per_second): %w", err)
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	case <-ctx.Done():
		g.m.refuse(RefusedLimit)
		return nil, fmt.Errorf("waiting for a login (sasl.upstream.max_concurrent_logins): %w", ctx.Err())
	}
}

// done records a login's result: a failure adds to the run of failures
// and, past failuresBeforeBackoff, opens or widens a backoff window; a
// login that worked ends the run.
func (g *loginGate) done(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.failures, g.window, g.until = 0, 0, time.Time{}
		return
	}
	g.failures++
	if g.failures < failuresBeforeBackoff {
		return
	}
	if g.window == 0 {
		g.window = backoffMin
	} else {
		g.window = min(2*g.window, backoffMax)
	}
	g.until, g.told = time.Now().Add(g.window), false
}

// inBackoff reports whether a backoff window is open.
func (g *loginGate) inBackoff() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Now().Before(g.until)
}
