package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// series builds a soak run of n samples 10 s apart with the four judged
// columns from f (sample index -> value per column), plus noise.
func series(n int, noise float64, f func(i int) [4]float64) soakSeries {
	r := rand.New(rand.NewPCG(1, 2))
	s := soakSeries{}
	for i := range n {
		s["elapsed_s"] = append(s["elapsed_s"], float64(10*(i+1)))
		v := f(i)
		for j, c := range soakTrendRules {
			s[c.Column] = append(s[c.Column], v[j]*(1+noise*(2*r.Float64()-1)))
		}
	}
	return s
}

func flatValues(int) [4]float64 { return [4]float64{60, 17, 700, 8} }

func TestFitLine(t *testing.T) {
	slope, mean := fitLine([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11})
	if slope != 2 || mean != 8 {
		t.Fatalf("slope %v mean %v, want 2 and 8", slope, mean)
	}
	if slope, mean := fitLine([]float64{4, 4}, []float64{1, 3}); slope != 0 || mean != 2 {
		t.Fatalf("one x: slope %v mean %v, want 0 and 2", slope, mean)
	}
}

func TestFlatNoisySeriesPasses(t *testing.T) {
	// 30 minutes; every value wanders 20% either way around a constant.
	vs, err := judgeTrends(series(180, 0.2, flatValues), 20*time.Minute, soakTrendRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := printTrends(&strings.Builder{}, vs); err != nil {
		t.Fatalf("a flat noisy run was judged: %v", err)
	}
	if vs[0].N != 121 || vs[0].Span != 1200 {
		t.Errorf("judged %d samples over %v s, want the last 20 min: 121 over 1200", vs[0].N, vs[0].Span)
	}
}

func TestGrowingSeriesFails(t *testing.T) {
	// RSS grows 0.1 MiB a sample (12 MiB over 20 min, about 15% of its
	// mean), under 5% noise; the rest stays flat.
	grow := func(i int) [4]float64 { v := flatValues(i); v[0] = 60 + 0.1*float64(i); return v }
	vs, err := judgeTrends(series(180, 0.05, grow), 20*time.Minute, soakTrendRules)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = printTrends(&out, vs)
	if err == nil || !strings.Contains(err.Error(), "rss_mib") {
		t.Fatalf("err %v, want rss_mib named\n%s", err, out.String())
	}
	for _, c := range []string{"goroutines", "fds", "p99_ms"} {
		if strings.Contains(err.Error(), c) {
			t.Errorf("flat %s named: %v", c, err)
		}
	}
	if got := vs[0].Slope * 60; got < 0.5 || got > 0.7 {
		t.Errorf("rss slope %.3f MiB/min, want about 0.6", got)
	}
}

func TestWarmUpBeforeTheWindowIsNotATrend(t *testing.T) {
	// Goroutines and RSS climb for the first 10 minutes, then hold.
	warm := func(i int) [4]float64 {
		v := flatValues(i)
		if i < 60 {
			v[0], v[1] = 20+float64(i)*2/3, 5+float64(i)/5
		}
		return v
	}
	vs, err := judgeTrends(series(180, 0.02, warm), 20*time.Minute, soakTrendRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := printTrends(&strings.Builder{}, vs); err != nil {
		t.Fatalf("the warm-up was judged: %v", err)
	}
	// The same climb late in the run is growth.
	late := func(i int) [4]float64 {
		v := flatValues(i)
		v[1] += float64(max(i-120, 0)) // one more goroutine every 10 s
		return v
	}
	vs, err = judgeTrends(series(180, 0.02, late), 20*time.Minute, soakTrendRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := printTrends(&strings.Builder{}, vs); err == nil || !strings.Contains(err.Error(), "goroutines") {
		t.Fatalf("a climb in the last 10 minutes: err %v, want goroutines named", err)
	}
}

func TestShortRunIsJudgedOverItsLastTwoThirds(t *testing.T) {
	vs, err := judgeTrends(series(12, 0, flatValues), 20*time.Minute, soakTrendRules)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Span != 80 || vs[0].N != 9 {
		t.Errorf("%d samples over %v s of a 120 s run, want its last two thirds: 9 over 80", vs[0].N, vs[0].Span)
	}
	if _, err := judgeTrends(series(2, 0, flatValues), time.Minute, soakTrendRules); err == nil {
		t.Error("two samples were judged")
	}
	if _, err := judgeTrends(soakSeries{"elapsed_s": {1, 2, 3}}, time.Minute, soakTrendRules); err == nil {
		t.Error("a CSV without the judged columns was judged")
	}
}
