package sasl

import (
	"slices"
	"testing"
	"time"
)

func TestReauthAt(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := ReauthAt(at, 0); !got.IsZero() {
		t.Errorf("ReauthAt(no lifetime) = %v, want zero", got)
	}
	if got := ReauthAt(at, -time.Second); !got.IsZero() {
		t.Errorf("ReauthAt(negative) = %v, want zero", got)
	}
	l := time.Hour
	lo, hi := at.Add(l*85/100), at.Add(l*95/100)
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := ReauthAt(at, l)
		if got.Before(lo) || got.After(hi) {
			t.Fatalf("ReauthAt = %v after, want within 85-95%% of %v", got.Sub(at), l)
		}
		seen[got.Sub(at)/time.Minute] = true
	}
	// Spread, not a fixed point: 1000 draws over a 6-minute window.
	if len(seen) < 4 {
		t.Errorf("1000 draws fell in %d distinct minutes, want a spread over the window", len(seen))
	}
}

func TestHiddenAPIs(t *testing.T) {
	got := HiddenAPIs()
	if want := []int16{17, 36, 38, 39, 40, 41}; !slices.Equal(got, want) {
		t.Errorf("HiddenAPIs() = %v, want %v", got, want)
	}
	got[0] = 99
	if HiddenAPIs()[0] != 17 {
		t.Error("HiddenAPIs shares its slice with callers")
	}
}
