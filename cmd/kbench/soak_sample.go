package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// soakColumns is the soak CSV's header: one row per 10 s window. The
// process columns (rss, goroutines, fds, cpu_pct: of one core) are
// kproxy's, loadavg is the machine's (1 minute), the others the load's.
var soakColumns = []string{"elapsed_s", "rss_mib", "goroutines", "fds", "p99_ms", "req_per_s", "errors", "throttles",
	"p99_produce_ms", "p99_throttled_ms", "p99_fetch_ms", "p99_commit_ms", "p99_churn_ms", "cpu_pct", "loadavg"}

// procSample is what the sampler reads of the process under test.
type procSample struct {
	RSS        int64 // bytes
	Goroutines int
	FDs        int
	CPU        time.Duration // user + system so far
}

// sampleProcess reads pid's RSS and open files from /proc and its
// goroutines from go_goroutines at metricsURL (kproxy's admin /metrics).
func sampleProcess(client *http.Client, pid int, metricsURL string) (procSample, error) {
	var s procSample
	var err error
	if s.RSS, err = processRSS(pid); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	if s.CPU, err = processCPU(pid); err != nil {
		return s, err
	}
	resp, err := client.Get(metricsURL)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s: %s", metricsURL, resp.Status)
	}
	g, err := metricValue(resp.Body, "go_goroutines")
	s.Goroutines = int(g)
	return s, err
}

// metricValue is the value of an unlabelled metric in a Prometheus text
// exposition.
func metricValue(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: bad value %q", name, rest)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// loadAverage is the machine's 1-minute load average, so a p99 that moves
// can be read against what else ran; 0 where /proc/loadavg is missing.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return v
}

// soakRow is one CSV row: a window of the load, the process sample at its
// end with the share of a core it used over the window, and the load
// average.
func soakRow(elapsed time.Duration, p procSample, cpuPct float64, w map[string]*kindTally, window time.Duration, throttles int64) []string {
	var ops, errs int64
	for _, t := range w {
		ops += t.Ops
		errs += t.Errors
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	return []string{
		strconv.FormatFloat(elapsed.Seconds(), 'f', 1, 64),
		strconv.FormatFloat(float64(p.RSS)/(1<<20), 'f', 2, 64),
		strconv.Itoa(p.Goroutines),
		strconv.Itoa(p.FDs),
		ms(mergedP99(w, requestKinds)),
		strconv.FormatFloat(float64(ops)/window.Seconds(), 'f', 1, 64),
		strconv.FormatInt(errs, 10),
		strconv.FormatInt(throttles, 10),
		ms(w[kindProduce].Hist.quantile(0.99)),
		ms(w[kindThrottled].Hist.quantile(0.99)),
		ms(w[kindFetch].Hist.quantile(0.99)),
		ms(w[kindCommit].Hist.quantile(0.99)),
		ms(w[kindChurn].Hist.quantile(0.99)),
		strconv.FormatFloat(cpuPct, 'f', 1, 64),
		strconv.FormatFloat(loadAverage(), 'f', 2, 64),
	}
}

// soakSeries is a soak CSV read back: each column by its header name.
type soakSeries map[string][]float64

// readSoakCSV parses a CSV with a header row of column names and numeric
// rows, as the soak writes it.
func readSoakCSV(r io.Reader) (soakSeries, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("soak CSV: no header: %w", err)
	}
	out := make(soakSeries, len(header))
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("soak CSV: %w", err)
		}
		for i, field := range rec {
			v, err := strconv.ParseFloat(field, 64)
			if err != nil {
				return nil, fmt.Errorf("soak CSV line %d: column %s: %q is not a number", line, header[i], field)
			}
			out[header[i]] = append(out[header[i]], v)
		}
	}
}
