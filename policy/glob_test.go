package policy

import (
	"path"
	"strings"
	"testing"
)

// One table for every shape of pattern, the fast ones and the rest: '*'
// and '?' cross '/' in all of them, because client ids and topics are
// names, not paths.
func TestGlobTable(t *testing.T) {
	cases := []struct {
		pattern string
		kind    globKind
		yes, no []string
	}{
		{"app", globExact, []string{"app"}, []string{"", "ap", "app-1", "App"}},
		{"svc/app", globExact, []string{"svc/app"}, []string{"svc/ap", "svc/app/x"}},
		{"", globExact, []string{""}, []string{"a"}},
		{"app-*", globPrefix, []string{"app-", "app-1", "app-1/x", "app-/"}, []string{"app", "xapp-1"}},
		{"*", globPrefix, []string{"", "a", "/", "a/b/c"}, nil},
		{"svc/*", globPrefix, []string{"svc/", "svc/a/b"}, []string{"svc", "svcx/a"}},
		{"*-prod", globSuffix, []string{"-prod", "a/b-prod", "x-prod"}, []string{"x-prod2", "prod"}},
		{"*/admin", globSuffix, []string{"/admin", "a/b/admin"}, []string{"admin", "a/badmin"}},
		{"a*b*c", globWild, []string{"abc", "axbyc", "a/b/c", "abbc"}, []string{"ab", "acb", "abcd"}},
		{"**", globWild, []string{"", "x/y"}, nil},
		{"batch-?", globWild, []string{"batch-1", "batch-/", "batch-é"}, []string{"batch-", "batch-12"}},
		{"?", globWild, []string{"a", "/", "é"}, []string{"", "ab"}},
		// The case path.Match got wrong: its '*' stops at '/'.
		{"svc/*-admin", globWild, []string{"svc/a/b-admin", "svc/x-admin", "svc/-admin"}, []string{"svc/a-admins", "svx/a-admin"}},
		{"*/*", globWild, []string{"/", "a/b", "a/b/c"}, []string{"ab"}},
		{"app-?/*", globWild, []string{"app-1/x", "app-//"}, []string{"app-12/x"}},
		{"web-[0-9]", globWild, []string{"web-0", "web-5", "web-9"}, []string{"web-x", "web-", "web-10"}},
		{"web-[0-9]*", globWild, []string{"web-1", "web-1/a/b"}, []string{"web-x1"}},
		{"[^a-c]x", globWild, []string{"dx", "/x", "éx"}, []string{"ax", "cx", "x"}},
		{"[ab/]", globWild, []string{"a", "b", "/"}, []string{"c", ""}},
		{`[\]\-\\]`, globWild, []string{"]", "-", `\`}, []string{"a", "[", "]-"}},
		{"[é-ë]", globWild, []string{"é", "ê", "ë"}, []string{"e", "è"}},
		{`a\*b`, globWild, []string{"a*b"}, []string{"axb", "ab", `a\*b`}},
		{`\?*`, globWild, []string{"?", "?a/b"}, []string{"a", ""}},
		{`\[x]`, globWild, []string{"[x]"}, []string{"x"}},
		{`svc\/*`, globWild, []string{"svc/", "svc/a/b"}, []string{`svc\/a`}},
		{"*[0-9]/*", globWild, []string{"a1/b", "x/y2/z", "1/"}, []string{"a/b", "a1b"}},
	}
	for _, c := range cases {
		if err := checkGlob(c.pattern); err != nil {
			t.Errorf("checkGlob(%q): %v", c.pattern, err)
			continue
		}
		g := compileGlob(c.pattern)
		if g.kind != c.kind {
			t.Errorf("%q compiled to kind %d, want %d", c.pattern, g.kind, c.kind)
		}
		for _, s := range c.yes {
			if !g.match(s) {
				t.Errorf("%q does not match %q", c.pattern, s)
			}
		}
		for _, s := range c.no {
			if g.match(s) {
				t.Errorf("%q matches %q", c.pattern, s)
			}
		}
	}
}

// The malformed patterns docs/policies.md rules out, and only those, are
// refused.
func TestGlobCheck(t *testing.T) {
	bad := []string{"[", "app-[", "[]", "[^]", "[a-", "[a-]", "[z-a]", "[-a]", "[]a]", `[\`, `[a\`, `\`, `app\`, "a[b", "[a-b-c]", "[^-a]"}
	for _, p := range bad {
		if checkGlob(p) == nil {
			t.Errorf("checkGlob(%q) accepted a malformed pattern", p)
		}
	}
	good := []string{"", "a", "*", "]", "a]", "-", "^", "/", "[a]", "[^a]", "[a-z0-9_]", `[\]]`, `[\-]`, `[\\]`, `[\a]`, `\a`, `\\`, `\*\?\[`, "é", "[é]", `[a\-b]`, "[a^]", "[a-bx-z]"}
	for _, p := range good {
		if err := checkGlob(p); err != nil {
			t.Errorf("checkGlob(%q): %v", p, err)
		}
	}
}

// Without '/', every pattern means what it means to path.Match, whose
// syntax ours keeps: every pattern of up to three elements from a small
// alphabet, on every name of up to four characters.
func TestGlobAgreesWithPathMatch(t *testing.T) {
	elems := []string{"a", "b", "*", "?", "[ab]", "[^a]", `\*`, "é"}
	chars := []string{"a", "b", "*", "é"}
	var patterns, names []string
	var grow func(out *[]string, from []string, prefix string, n int)
	grow = func(out *[]string, from []string, prefix string, n int) {
		*out = append(*out, prefix)
		if n == 0 {
			return
		}
		for _, e := range from {
			grow(out, from, prefix+e, n-1)
		}
	}
	grow(&patterns, elems, "", 3)
	grow(&names, chars, "", 4)
	for _, p := range patterns {
		g := compileGlob(p)
		for _, n := range names {
			want, err := path.Match(p, n)
			if err != nil {
				t.Fatalf("path.Match(%q): %v", p, err)
			}
			if got := g.match(n); got != want {
				t.Errorf("glob %q on %q: %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}

// A client id with '/' is selected by a rule whose glob has '/' in it,
// and a bad glob is refused at validation, not at match time.
func TestGlobInRule(t *testing.T) {
	e, _ := newEngine(t, deny("no-admin", Selector{ClientID: "svc/*-admin"}))
	if v := request(t, metadata(), "svc/a/b-admin").check(e, t0); v.Outcome != Reject {
		t.Fatalf("svc/a/b-admin: %+v, want Reject", v)
	}
	if v := request(t, metadata(), "svc/a/b-user").check(e, t0); v.Outcome != Pass {
		t.Fatalf("svc/a/b-user: %+v, want Pass", v)
	}
	err := Config{Rules: []Rule{{Name: "x", Action: ActionLog, Match: Selector{ExceptTopics: []string{"[z-a]"}}}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "except_topics.0") {
		t.Fatalf("reversed range: %v, want an error on except_topics.0", err)
	}
}
