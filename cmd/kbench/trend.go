package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// trendRule says how much a soak series may grow over the judged window
// and still count as flat: the least-squares line's change across the
// window must stay under Rel of the series' mean, or under Floor (in the
// series' unit) when that is larger, so a small series is not failed for
// noise.
type trendRule struct {
	Column string
	Rel    float64
	Floor  float64
}

// soakTrendRules are the series the soak judges. p99 gets a wide margin:
// the machine is shared, and other processes' bursts move it.
var soakTrendRules = []trendRule{
	{"rss_mib", 0.10, 4},
	{"goroutines", 0.10, 20},
	{"fds", 0.10, 20},
	{"p99_ms", 0.50, 5},
}

// trendVerdict is one series' fit over the window.
type trendVerdict struct {
	Column string
	N      int     // samples in the window
	Span   float64 // seconds the samples span
	Mean   float64
	Slope  float64 // per second
	Change float64 // the fitted change across Span
	Limit  float64 // the largest change that counts as flat
	Grew   bool
}

// fitLine is the least-squares slope of ys against xs and the mean of ys.
func fitLine(xs, ys []float64) (slope, mean float64) {
	n := float64(len(xs))
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, my
	}
	return sxy / sxx, my
}

// judgeTrends fits each rule's series over the last window of the run
// (by elapsed_s, which starts with the load). A run shorter than 1.5
// windows is judged over its last two thirds instead, so the warm-up is
// left out of short runs too.
func judgeTrends(s soakSeries, window time.Duration, rules []trendRule) ([]trendVerdict, error) {
	xs := s["elapsed_s"]
	if len(xs) < 3 {
		return nil, fmt.Errorf("soak CSV: %d samples; at least 3 are needed to fit a trend", len(xs))
	}
	last := xs[len(xs)-1]
	w := window.Seconds()
	if last < 1.5*w {
		w = last * 2 / 3
	}
	from := 0
	for from < len(xs)-3 && xs[from] < last-w {
		from++
	}
	var out []trendVerdict
	for _, r := range rules {
		ys, ok := s[r.Column]
		if !ok || len(ys) != len(xs) {
			return nil, fmt.Errorf("soak CSV: no column %s", r.Column)
		}
		v := trendVerdict{Column: r.Column, N: len(xs) - from, Span: last - xs[from]}
		v.Slope, v.Mean = fitLine(xs[from:], ys[from:])
		v.Change = v.Slope * v.Span
		v.Limit = max(r.Rel*v.Mean, r.Floor)
		v.Grew = v.Change > v.Limit
		out = append(out, v)
	}
	return out, nil
}

// printTrends writes one line per series and returns an error naming the
// series that grew, if any.
func printTrends(w io.Writer, vs []trendVerdict) error {
	fmt.Fprintf(w, "%-11s %8s %10s %12s %12s %12s  %s\n", "series", "samples", "mean", "slope/min", "change", "flat limit", "verdict")
	var grew []string
	for _, v := range vs {
		verdict := "flat"
		if v.Grew {
			verdict = "GREW"
			grew = append(grew, fmt.Sprintf("%s by %.2f over %.1f min (limit %.2f)", v.Column, v.Change, v.Span/60, v.Limit))
		}
		fmt.Fprintf(w, "%-11s %8d %10.2f %12.4f %12.2f %12.2f  %s\n", v.Column, v.N, v.Mean, v.Slope*60, v.Change, v.Limit, verdict)
	}
	if len(grew) > 0 {
		return errors.New("not flat: " + strings.Join(grew, "; "))
	}
	return nil
}

// trendCmd judges a soak CSV: exit 1 when a series grew.
func trendCmd(args []string) error {
	fs := flag.NewFlagSet("trend", flag.ContinueOnError)
	path := fs.String("csv", "", "soak CSV (kbench soak --csv)")
	window := fs.Duration("window", 20*time.Minute, "judge the last WINDOW of the run (a run under 1.5 windows: its last two thirds)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		err := errors.New("--csv is required")
		fmt.Fprintln(fs.Output(), err)
		return usageError{err}
	}
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := readSoakCSV(f)
	if err != nil {
		return err
	}
	vs, err := judgeTrends(s, *window, soakTrendRules)
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		fmt.Printf("trend over the last %.1f min of %s (least squares; flat: change under the limit)\n", vs[0].Span/60, *path)
	}
	return printTrends(os.Stdout, vs)
}
