package main

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSoakRowsReadBack(t *testing.T) {
	w := newTallies()
	for i := 1; i <= 100; i++ {
		w[kindProduce].Hist.record(time.Duration(i) * time.Millisecond)
		w[kindProduce].Ops++
	}
	w[kindFetch].Ops, w[kindFetch].Errors = 50, 2
	w[kindFetch].Hist.record(3 * time.Millisecond)
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	cw.Write(soakColumns)
	p := procSample{RSS: 48 << 20, Goroutines: 17, FDs: 690}
	cw.Write(soakRow(10*time.Second, p, 12.5, w, 10*time.Second, 7))
	cw.Write(soakRow(20*time.Second, p, 0, newTallies(), 10*time.Second, 0))
	cw.Flush()
	s, err := readSoakCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{
		"elapsed_s": {10, 20}, "rss_mib": {48, 48}, "goroutines": {17, 17}, "fds": {690, 690},
		"req_per_s": {15, 0}, "errors": {2, 0}, "throttles": {7, 0}, "p99_fetch_ms": {3, 0}, "cpu_pct": {12.5, 0},
	}
	for col, vs := range want {
		if got := s[col]; len(got) != 2 || got[0] != vs[0] || got[1] != vs[1] {
			t.Errorf("%s = %v, want %v", col, got, vs)
		}
	}
	// p99 merges produce (1..100 ms) and fetch (3 ms): the 100th of 101.
	if got := s["p99_ms"][0]; got < 98 || got > 101 {
		t.Errorf("p99_ms %v, want about 99", got)
	}
	if len(s) != len(soakColumns) {
		t.Errorf("%d columns read, want %d", len(s), len(soakColumns))
	}
}

func TestReadSoakCSVRejectsBadRows(t *testing.T) {
	for name, in := range map[string]string{
		"empty":      "",
		"not number": "elapsed_s,rss_mib\n10,48\n20,lots\n",
		"short row":  "elapsed_s,rss_mib\n10,48\n20\n",
	} {
		_, err := readSoakCSV(strings.NewReader(in))
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if name == "not number" && !strings.Contains(err.Error(), "line 3: column rss_mib") {
			t.Errorf("%s: %v, want the line and column named", name, err)
		}
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines_total 99\ngo_goroutines 23\ngo_threads 9\n"
	if v, err := metricValue(strings.NewReader(text), "go_goroutines"); err != nil || v != 23 {
		t.Fatalf("go_goroutines = %v, %v; want 23", v, err)
	}
	if _, err := metricValue(strings.NewReader("go_threads 9\n"), "go_goroutines"); err == nil {
		t.Fatal("a missing metric gave no error")
	}
	if _, err := metricValue(strings.NewReader("go_goroutines many\n"), "go_goroutines"); err == nil {
		t.Fatal("a bad value gave no error")
	}
}

// TestSampleProcess samples this test's own process, with go_goroutines
// served the way kproxy's admin serves it.
func TestSampleProcess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("go_gc_duration_seconds{quantile=\"0\"} 0\ngo_goroutines 41\n"))
	}))
	defer srv.Close()
	p, err := sampleProcess(srv.Client(), os.Getpid(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if p.RSS <= 0 || p.FDs < 3 || p.Goroutines != 41 || p.CPU <= 0 {
		t.Fatalf("sample %+v: want RSS > 0, at least 3 open files, 41 goroutines, some CPU used", p)
	}
	bad := httptest.NewServer(http.NotFoundHandler())
	defer bad.Close()
	if _, err := sampleProcess(bad.Client(), os.Getpid(), bad.URL+"/metrics"); err == nil {
		t.Fatal("a 404 from /metrics gave no error")
	}
}
