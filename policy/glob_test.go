package policy

import (
	"path"
	"testing"
)

// Every compiled glob agrees with path.Match, which defines the syntax,
// on names without '/'.
func TestGlobAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"", "app", "app-*", "*-prod", "batch-?", "a*b*c", "*", "**", "?", "a?c*", "*x?", "web-[0-9]", `a\\*b`}
	names := []string{"", "app", "app-1", "app-", "x-prod", "-prod", "batch-1", "batch-12", "abc", "axbyc", "ab", "a", "acx",
		"aXcdef", "zzxy", "web-5", "web-x", `a*b`}
	for _, p := range patterns {
		g := compileGlob(p)
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := g.match(n); got != want {
				t.Errorf("glob %q on %q: %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}

// Unlike path.Match, '*' also matches '/': client ids are not paths.
func TestGlobStarCrossesSlash(t *testing.T) {
	for _, p := range []string{"app-*", "*", "a*x", "*/x", "app-?/*"} {
		if !compileGlob(p).match("app-1/x") {
			t.Errorf("glob %q does not match app-1/x", p)
		}
	}
}
