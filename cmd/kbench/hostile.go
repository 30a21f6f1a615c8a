package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// hostileConfig is one hostile run against a proxy: a victim load of
// small produces runs alone (quiet), then beside each attack in turn, then
// beside all of them, while the proxy process's resident memory is sampled.
type hostileConfig struct {
	Addr     string
	PID      int
	Duration time.Duration // victim load per phase
	Victim   loadConfig

	BombConns, BombBatches, BombInflate int
	BombRate                            float64 // per connection per second; 0: unpaced
	OversizeConns, OversizeParts        int
	OversizeRate                        float64 // per connection per second; 0: unpaced
	HogConns, HogSize, HogHold          int
	HogPause                            time.Duration

	// Budget is the proxy's configured memory budget in bytes
	// (max_buffered_bytes and what else it bounds): RSS is judged
	// against it plus 64 MiB. 0: RSS is reported, not judged.
	Budget int64
}

// hostilePhase is one phase's measurements.
type hostilePhase struct {
	Name         string
	Victim       loadResult
	VictimErr    error
	Before, Peak int64
	Attack       map[string]*attackTally
}

// hostileAttack is one named attack of a run.
type hostileAttack struct {
	name  string
	conns int
	a     attacker
}

func (cfg hostileConfig) attacks() []hostileAttack {
	return []hostileAttack{
		{"bomb", cfg.BombConns, repeatFrame(bombFrame(cfg.Victim.Topic, cfg.BombBatches, cfg.BombInflate), perSecond(cfg.BombRate))},
		{"oversize", cfg.OversizeConns, repeatFrame(manyPartitionsFrame(cfg.Victim.Topic, cfg.OversizeParts), perSecond(cfg.OversizeRate))},
		{"hog", cfg.HogConns, hog(cfg.HogSize, cfg.HogHold, cfg.HogPause)},
	}
}

// runHostile runs the quiet phase, one phase per attack and one with all.
func runHostile(cfg hostileConfig) ([]hostilePhase, error) {
	attacks := cfg.attacks()
	phases := [][]hostileAttack{nil}
	for _, a := range attacks {
		phases = append(phases, []hostileAttack{a})
	}
	phases = append(phases, attacks)
	var out []hostilePhase
	for _, set := range phases {
		ph, err := runHostilePhase(cfg, set)
		if err != nil {
			return out, err
		}
		out = append(out, ph)
	}
	return out, nil
}

func runHostilePhase(cfg hostileConfig, set []hostileAttack) (hostilePhase, error) {
	ph := hostilePhase{Name: "quiet", Attack: map[string]*attackTally{}}
	if len(set) == 1 {
		ph.Name = set[0].name
	} else if len(set) > 1 {
		ph.Name = "all"
	}
	rss, err := watchRSS(cfg.PID)
	if err != nil {
		return ph, err
	}
	stop := make(chan struct{})
	var attackers sync.WaitGroup
	for _, a := range set {
		t := &attackTally{}
		ph.Attack[a.name] = t
		runAttackers(cfg.Addr, a.conns, a.a, stop, t, &attackers)
	}
	if len(set) > 0 {
		time.Sleep(300 * time.Millisecond) // the attacks under way first
	}
	if t, ok := ph.Attack["hog"]; ok {
		// Victims are measured while the hogs hold what they sent, not
		// while they send it.
		for deadline := time.Now().Add(10 * time.Second); t.settled.Load() < int64(cfg.HogConns) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	victim := cfg.Victim
	victim.Addr, victim.Duration = cfg.Addr, cfg.Duration
	ph.Victim, ph.VictimErr = runLoad(victim)
	close(stop)
	attackers.Wait()
	err = rss.stop()
	ph.Before, ph.Peak = rss.Before, rss.Peak
	return ph, err
}

// printHostile reports each phase against the quiet one: the victims'
// p99 (target: at most 2x quiet) and the proxy's peak RSS (target: under
// the budget + 64 MiB).
func printHostile(w io.Writer, cfg hostileConfig, phases []hostilePhase) {
	if len(phases) == 0 {
		return
	}
	quiet := phases[0].Victim.Hist.quantile(0.99)
	fmt.Fprintf(w, "%-9s %10s %9s %9s %8s %11s %11s  %s\n", "phase", "victim/s", "p50", "p99", "p99/q", "RSS before", "RSS peak", "attack (sent/answered/closed)")
	for _, ph := range phases {
		p99 := ph.Victim.Hist.quantile(0.99)
		ratio := float64(p99) / float64(max(quiet, 1))
		verdict := ""
		if ph.Name != "quiet" {
			verdict = judge(ratio <= 2, "p99")
			if cfg.Budget > 0 {
				verdict += " " + judge(ph.Peak <= cfg.Budget+64<<20, "RSS")
			}
		}
		fmt.Fprintf(w, "%-9s %10.0f %9s %9s %7.2fx %11s %11s  %s%s\n", ph.Name, ph.Victim.reqPerSec(),
			fmtDur(ph.Victim.Hist.quantile(0.5)), fmtDur(p99), ratio, mib(ph.Before), mib(ph.Peak), attackSummary(ph), verdict)
		if ph.VictimErr != nil {
			fmt.Fprintf(w, "          victim error: %v\n", ph.VictimErr)
		}
	}
	if cfg.Budget > 0 {
		fmt.Fprintf(w, "targets: p99 within 2x of quiet; RSS under %s (budget %s + 64 MiB)\n", mib(cfg.Budget+64<<20), mib(cfg.Budget))
	}
}

// perSecond is the interval between events at rate per second (0: none).
func perSecond(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / rate)
}

func judge(ok bool, what string) string {
	if ok {
		return what + " ok"
	}
	return what + " OVER"
}

func attackSummary(ph hostilePhase) string {
	s := ""
	for _, name := range []string{"bomb", "oversize", "hog"} {
		if t, ok := ph.Attack[name]; ok {
			s += fmt.Sprintf("%s %d/%d/%d; ", name, t.sent.Load(), t.answered.Load(), t.closed.Load())
		}
	}
	return s
}

func hostileCmd(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	cfg := hostileConfig{Victim: loadConfig{Size: 113, MaxRequests: 50_000_000}}
	fs.StringVar(&cfg.Addr, "addr", "", "proxy address, HOST:PORT, in front of a broker (kbench broker)")
	fs.IntVar(&cfg.PID, "pid", 0, "process id of the proxy, whose resident memory is sampled")
	fs.DurationVar(&cfg.Duration, "t", 3*time.Second, "victim load per phase")
	fs.IntVar(&cfg.Victim.Conns, "c", 4, "victim connections")
	fs.IntVar(&cfg.Victim.Depth, "d", 1, "victim requests in flight per connection")
	fs.StringVar(&cfg.Victim.Topic, "topic", "kbench", "topic the victims and attacks produce to")
	fs.IntVar(&cfg.BombConns, "bomb-conns", 2, "bomb connections (zstd batches that inflate far)")
	fs.IntVar(&cfg.BombBatches, "bomb-batches", 110, "zstd batches per bomb request")
	fs.Float64Var(&cfg.BombRate, "bomb-rate", 200, "bomb requests per second per connection (0: as fast as answered, which makes the bomb client a heavy producer whose relaying shares the CPU with the victims)")
	fs.IntVar(&cfg.BombInflate, "bomb-inflate", 16<<20-64, "bytes each bomb batch inflates to (just under 16 MiB, a batch limit an older kproxy read whole)")
	fs.IntVar(&cfg.OversizeConns, "oversize-conns", 2, "connections sending oversize Produce requests (for a max_request_bytes rule)")
	fs.IntVar(&cfg.OversizeParts, "oversize-parts", 1_000_000, "partitions each oversize request names (6 bytes each)")
	fs.Float64Var(&cfg.OversizeRate, "oversize-rate", 10, "oversize requests per second per connection (0: as fast as the proxy takes them, a bandwidth flood that shares the CPU with the victims)")
	fs.IntVar(&cfg.HogConns, "hog-conns", 8, "connections each holding a partial frame")
	fs.IntVar(&cfg.HogSize, "hog-size", 100_000_000, "frame size each hog claims")
	fs.IntVar(&cfg.HogHold, "hog-hold", 96<<20, "bytes of its frame each hog sends before it stops")
	fs.DurationVar(&cfg.HogPause, "hog-pause", time.Second, "how long a hog the proxy closed waits before it connects again")
	fs.Int64Var(&cfg.Budget, "budget", 0, "the proxy's memory budget in bytes (e.g. max_buffered_bytes), to judge RSS against; 0: not judged")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needAddrPID(fs, cfg.Addr, cfg.PID); err != nil {
		return err
	}
	fmt.Printf("kbench hostile: %s, victims %d x %d x %d B for %v per phase; bomb %d x %d batches x %s at %g/s; oversize %d x %d partitions at %g/s; hog %d x %s of %s\n",
		cfg.Addr, cfg.Victim.Conns, cfg.Victim.Depth, cfg.Victim.Size, cfg.Duration,
		cfg.BombConns, cfg.BombBatches, mib(int64(cfg.BombInflate)), cfg.BombRate, cfg.OversizeConns, cfg.OversizeParts, cfg.OversizeRate,
		cfg.HogConns, mib(int64(cfg.HogHold)), mib(int64(cfg.HogSize)))
	phases, err := runHostile(cfg)
	printHostile(os.Stdout, cfg, phases)
	return err
}
