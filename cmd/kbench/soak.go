package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// soakConfig is a soak: a steady mixed load of real Kafka clients
// (franz-go) through a proxy for Duration, with the proxy process sampled
// every Interval.
type soakConfig struct {
	Bootstrap  string
	Topic      string
	Partitions int
	Duration   time.Duration
	Interval   time.Duration
	Size       int // record value bytes

	Producers   int
	ProduceRate float64 // records (= Produce requests) per second per producer
	HotRate     float64 // the throttled producer's offered rate; 0: none
	Fetchers    int
	FetchRate   float64 // Fetch requests per second per fetcher
	Members     int     // consumer group members
	CommitEvery time.Duration
	Rejoin      time.Duration // one member is replaced this often; 0: never
	Churn       int           // clients that connect, work and close, over and over
	ChurnHold   time.Duration // how long a churn client keeps its connections (0.5x-1.5x)

	PID   int    // the proxy process to sample; 0: the load alone
	Admin string // the proxy's admin address, HOST:PORT, for go_goroutines
}

func (c soakConfig) check() error {
	switch {
	case c.Bootstrap == "":
		return errors.New("--bootstrap is required")
	case c.Duration <= 0 || c.Interval <= 0:
		return errors.New("-t and --interval must be positive")
	case c.Producers > 0 && c.ProduceRate <= 0, c.Fetchers > 0 && c.FetchRate <= 0:
		return errors.New("--produce-rate and --fetch-rate must be positive")
	case c.Churn > 0 && c.ChurnHold <= 0:
		return errors.New("--churn-hold must be positive")
	case c.PID > 0 && c.Admin == "":
		return errors.New("--pid needs --admin (the proxy's admin address, for its goroutines)")
	}
	return nil
}

// soakResult is a whole run's counts by kind.
type soakResult struct {
	Kinds     map[string]kindTally
	Throttles int64
	Samples   int
}

// errors is the run's error count and the last one seen.
func (r soakResult) errors() (n int64, last error) {
	for _, k := range soakKinds {
		if t := r.Kinds[k]; t.Errors > 0 {
			n += t.Errors
			last = t.LastErr
		}
	}
	return n, last
}

// runSoak runs the load and writes one CSV row to out per Interval; a
// progress line per row goes to progress. It stops at Duration or when
// ctx ends, or at once if the proxy process can no longer be sampled.
func runSoak(ctx context.Context, cfg soakConfig, out, progress io.Writer) (soakResult, error) {
	if err := cfg.check(); err != nil {
		return soakResult{}, err
	}
	stats := newSoakStats()
	load := &soakLoad{cfg: cfg, stats: stats, value: make([]byte, cfg.Size)}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { load.run(ctx) })

	res, err := sampleSoak(ctx, cfg, stats, out, progress)
	cancel()
	wg.Wait()
	res.Kinds, res.Throttles = stats.total()
	return res, err
}

// sampleSoak writes a row per Interval until ctx ends.
func sampleSoak(ctx context.Context, cfg soakConfig, stats *soakStats, out, progress io.Writer) (soakResult, error) {
	var res soakResult
	cw := csv.NewWriter(out)
	cw.Write(soakColumns)
	cw.Flush()
	client := &http.Client{Timeout: 5 * time.Second}
	metrics := "http://" + cfg.Admin + "/metrics"
	begin := time.Now()
	var prevCPU time.Duration
	if cfg.PID > 0 {
		prevCPU, _ = processCPU(cfg.PID)
	}
	prev := begin
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for tick(ctx, t) {
		w, throttles := stats.take()
		now := time.Now()
		var p procSample
		var cpuPct float64
		if cfg.PID > 0 {
			var err error
			if p, err = sampleProcess(client, cfg.PID, metrics); err != nil {
				return res, fmt.Errorf("sampling process %d: %w", cfg.PID, err)
			}
			cpuPct = 100 * float64(p.CPU-prevCPU) / float64(now.Sub(prev))
			prevCPU = p.CPU
		}
		prev = now
		row := soakRow(now.Sub(begin), p, cpuPct, w, cfg.Interval, throttles)
		cw.Write(row)
		cw.Flush()
		if err := cw.Error(); err != nil {
			return res, err
		}
		res.Samples++
		fmt.Fprintf(progress, "%6ss  rss %s MiB  goroutines %s  fds %s  p99 %s ms  %s ops/s  errors %s  throttles %s  cpu %s%%  load %s\n",
			row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[13], row[14])
	}
	return res, nil
}

// printSoak reports the run's totals by kind.
func printSoak(w io.Writer, res soakResult, elapsed time.Duration) {
	fmt.Fprintf(w, "%-10s %10s %9s %8s %10s %10s\n", "kind", "ops", "ops/s", "errors", "p50", "p99")
	for _, k := range soakKinds {
		t := res.Kinds[k]
		p50, p99 := fmtDur(t.Hist.quantile(0.5)), fmtDur(t.Hist.quantile(0.99))
		if k == kindConsume { // polls that returned records: no latency
			p50, p99 = "-", "-"
		}
		fmt.Fprintf(w, "%-10s %10d %9.1f %8d %10s %10s\n", k, t.Ops, float64(t.Ops)/elapsed.Seconds(), t.Errors, p50, p99)
	}
	fmt.Fprintf(w, "throttled responses: %d; samples: %d\n", res.Throttles, res.Samples)
}

func soakCmd(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var cfg soakConfig
	fs.StringVar(&cfg.Bootstrap, "bootstrap", "", "proxy address clients bootstrap from, HOST:PORT (in front of kbench kfake)")
	fs.StringVar(&cfg.Topic, "topic", "kbench-soak", "topic (kbench kfake creates it)")
	fs.IntVar(&cfg.Partitions, "partitions", 8, "partitions of --topic; fetchers spread over them")
	fs.DurationVar(&cfg.Duration, "t", 30*time.Minute, "duration")
	fs.DurationVar(&cfg.Interval, "interval", 10*time.Second, "sampling interval: one CSV row each")
	fs.IntVar(&cfg.Size, "s", 256, "record value bytes")
	fs.IntVar(&cfg.Producers, "producers", 4, "paced producers, one record per Produce")
	fs.Float64Var(&cfg.ProduceRate, "produce-rate", 50, "records per second per producer")
	fs.Float64Var(&cfg.HotRate, "hot-rate", 30, "records per second offered by the producer with client id "+hotClientID+", for a rate rule to throttle (0: none)")
	fs.IntVar(&cfg.Fetchers, "fetchers", 4, "fetchers (Fetch with no wait, each on one partition)")
	fs.Float64Var(&cfg.FetchRate, "fetch-rate", 50, "Fetch requests per second per fetcher")
	fs.IntVar(&cfg.Members, "members", 3, "consumer group members")
	fs.DurationVar(&cfg.CommitEvery, "commit-every", time.Second, "a member commits what it consumed at most this often")
	fs.DurationVar(&cfg.Rejoin, "rejoin", time.Minute, "replace one group member this often (0: never)")
	fs.IntVar(&cfg.Churn, "churn", 100, "clients that connect (three connections each with franz-go: the seed's and two to the broker), send Metadata and one Produce, hold, close, and start over")
	fs.DurationVar(&cfg.ChurnHold, "churn-hold", 10*time.Second, "how long a churn client holds its connections (0.5x to 1.5x, and as long again between failed cycles)")
	fs.IntVar(&cfg.PID, "pid", 0, "process id of the proxy to sample (RSS, open files); 0: the load only")
	fs.StringVar(&cfg.Admin, "admin", "", "the proxy's admin address, HOST:PORT (go_goroutines from /metrics)")
	csvPath := fs.String("csv", "", "write the samples here (default stdout)")
	if err := parse(fs, args); err != nil {
		return err
	}
	out := io.Writer(os.Stdout)
	progress := io.Writer(os.Stderr)
	if *csvPath != "" {
		f, err := os.Create(*csvPath)
		if err != nil {
			return err
		}
		defer f.Close()
		out, progress = f, os.Stdout
	}
	fmt.Fprintf(progress, "kbench soak: %s for %v; %d producers x %g/s, hot producer %g/s, %d fetchers x %g/s, %d group members (commit every %v, one replaced every %v), %d churn clients (hold %v); sampling pid %d every %v\n",
		cfg.Bootstrap, cfg.Duration, cfg.Producers, cfg.ProduceRate, cfg.HotRate, cfg.Fetchers, cfg.FetchRate,
		cfg.Members, cfg.CommitEvery, cfg.Rejoin, cfg.Churn, cfg.ChurnHold, cfg.PID, cfg.Interval)
	begin := time.Now()
	res, err := runSoak(context.Background(), cfg, out, progress)
	printSoak(progress, res, time.Since(begin))
	if err != nil {
		return err
	}
	if n, last := res.errors(); n > 0 {
		return fmt.Errorf("%d operations failed; the last: %v", n, last)
	}
	return nil
}
