package core

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// refusalLogEvery is the most often one reason of refusal is logged: a
// flood of refused connections is counted exactly
// (kproxy_connections_refused_total) but logged once a period, with how
// many went unlogged since, so it does not become a log flood.
const refusalLogEvery = time.Second

// refusalLog rate-limits the log lines of connections refused before they
// were opened, per reason.
type refusalLog struct {
	mu    sync.Mutex
	last  map[string]time.Time
	quiet map[string]int // refused since the last line
}

// log counts a refusal for why and logs it unless one was logged less
// than refusalLogEvery ago.
func (r *refusalLog) log(log *zerolog.Logger, why string, err error, m *Metrics) {
	m.Refused.WithLabelValues(why).Inc()
	r.line(log, why, err, "connection refused")
}

// line writes msg for why unless one was written less than
// refusalLogEvery ago.
func (r *refusalLog) line(log *zerolog.Logger, why string, err error, msg string) {
	r.mu.Lock()
	if r.last == nil {
		r.last, r.quiet = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if now.Sub(r.last[why]) < refusalLogEvery {
		r.quiet[why]++
		r.mu.Unlock()
		return
	}
	r.last[why] = now
	quiet := r.quiet[why]
	r.quiet[why] = 0
	r.mu.Unlock()
	ev := log.Warn().Str("reason", why)
	if err != nil {
		ev = ev.Err(err)
	}
	if quiet > 0 {
		ev = ev.Int("refused_unlogged", quiet)
	}
	ev.Msg(msg)
}
