package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one target's line in a results table.
type row struct {
	name   string
	res    loadResult
	cpu    time.Duration // CPU time of the target's process over its runs, when known
	hasCPU bool
	rounds []roundFig // compare's rounds, in order
}

// printTable prints rows as an aligned table. With direct set, each row
// also gets its req/s ratio to direct and the p50/p99 it adds.
func printTable(w io.Writer, rows []row, direct *loadResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"target", "requests", "req/s", "MB/s", "p50", "p99", "p999"}
	if direct != nil {
		cols = append(cols, "req/s vs direct", "+p50", "+p99")
	}
	anyCPU := false
	for _, r := range rows {
		anyCPU = anyCPU || r.hasCPU
	}
	if anyCPU {
		cols = append(cols, "proxy CPU/req")
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, r := range rows {
		h := r.res.Hist
		f := []string{r.name, fmt.Sprint(r.res.Requests), fmt.Sprintf("%.0f", r.res.reqPerSec()),
			fmt.Sprintf("%.2f", r.res.mbPerSec()), fmtDur(h.quantile(0.50)), fmtDur(h.quantile(0.99)), fmtDur(h.quantile(0.999))}
		if direct != nil {
			d := direct.Hist
			f = append(f, fmt.Sprintf("%.1f%%", 100*r.res.reqPerSec()/direct.reqPerSec()),
				fmtSigned(h.quantile(0.50)-d.quantile(0.50)), fmtSigned(h.quantile(0.99)-d.quantile(0.99)))
		}
		if anyCPU {
			cpu := "-"
			if r.hasCPU && r.res.Requests > 0 {
				cpu = fmtDur(r.cpu / time.Duration(r.res.Requests))
				if r.cpu == 0 {
					cpu = "<" + fmtDur(clockTick/time.Duration(r.res.Requests))
				}
			}
			f = append(f, cpu)
		}
		fmt.Fprintln(tw, strings.Join(f, "\t")+"\t")
	}
	tw.Flush()
}

// fmtDur prints a duration with three significant digits in µs or ms,
// which is where request latencies live.
func fmtDur(d time.Duration) string {
	switch us := float64(d) / 1e3; {
	case us < 10:
		return fmt.Sprintf("%.2fµs", us)
	case us < 1000:
		return fmt.Sprintf("%.1fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}
