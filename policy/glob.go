package policy

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// glob is a compiled client-id or topic pattern. Client ids and topics are
// names, not paths, so one syntax holds for every pattern, docs/policies.md's:
// '*' matches any run of characters ('/' included), '?' one character,
// "[a-z_]" one character of the set and "[^a-z_]" one not in it (inside,
// ']', '-' and '\' are escaped with '\'), and "\c" the character c itself.
// A pattern matches a whole name. A character is a UTF-8 sequence; a byte
// that is not valid UTF-8 counts as one character.
//
// The common shapes (an exact name, "prefix*", "*suffix") are plain string
// tests, which keeps a header-only rule cheap; the rest go through wild.
type glob struct {
	pattern string
	kind    globKind
	fix     string
}

type globKind uint8

const (
	globExact globKind = iota
	globPrefix
	globSuffix
	globWild
)

// special are the bytes that make a pattern more than a literal.
const special = `*?[\`

// errBadGlob is what checkGlob reports; Validate puts it on the field.
var errBadGlob = errors.New("syntax error in pattern")

// compileGlob compiles a pattern that checkGlob accepted.
func compileGlob(p string) glob {
	star := strings.IndexByte(p, '*')
	switch {
	case !strings.ContainsAny(p, special):
		return glob{p, globExact, p}
	case star == len(p)-1 && !strings.ContainsAny(p[:star], special):
		return glob{p, globPrefix, p[:star]}
	case star == 0 && !strings.ContainsAny(p[1:], special):
		return glob{p, globSuffix, p[1:]}
	}
	return glob{p, globWild, ""}
}

func (g glob) match(s string) bool {
	switch g.kind {
	case globExact:
		return s == g.fix
	case globPrefix:
		return strings.HasPrefix(s, g.fix)
	case globSuffix:
		return strings.HasSuffix(s, g.fix)
	}
	return wild(g.pattern, s)
}

// checkGlob reports whether p is a well-formed pattern: every '[' closed
// on a non-empty set of ordered ranges, and no '\' at the end.
func checkGlob(p string) error {
	for i := 0; i < len(p); {
		switch p[i] {
		case '[':
			end, _, err := class(p, i+1, 0)
			if err != nil {
				return err
			}
			i = end
		case '\\':
			if i+1 == len(p) {
				return errBadGlob
			}
			_, w := utf8.DecodeRuneInString(p[i+1:])
			i += 1 + w
		default:
			i++
		}
	}
	return nil
}

// wild matches s against the whole pattern p. Every element but '*'
// matches exactly one character, so on a mismatch it is enough to go back
// to the last star and let it take one more character: no recursion, and
// no allocation.
func wild(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0 // pattern index after the last '*', and where in s it resumed
	for si < len(s) {
		if pi < len(p) {
			if p[pi] == '*' {
				pi++
				star, mark = pi, si
				continue
			}
			if np, ns, ok := one(p, pi, s, si); ok {
				pi, si = np, ns
				continue
			}
		}
		if star < 0 {
			return false
		}
		_, w := utf8.DecodeRuneInString(s[mark:])
		mark += w
		pi, si = star, mark
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// one matches the element of p at pi (not a '*') against the character of
// s at si, and returns where both go on.
func one(p string, pi int, s string, si int) (int, int, bool) {
	c, w := utf8.DecodeRuneInString(s[si:])
	switch p[pi] {
	case '?':
		return pi + 1, si + w, true
	case '[':
		end, in, err := class(p, pi+1, c)
		return end, si + w, in && err == nil
	case '\\':
		pi++
		if pi == len(p) {
			return 0, 0, false
		}
	}
	_, pw := utf8.DecodeRuneInString(p[pi:])
	// Compare bytes, not runes: two different invalid bytes both decode
	// to utf8.RuneError.
	return pi + pw, si + w, p[pi:pi+pw] == s[si:si+w]
}

// class reads the set that starts at p[i], just after its '[', and says
// whether c is in it. end is the index after the closing ']'.
func class(p string, i int, c rune) (end int, in bool, err error) {
	negate := i < len(p) && p[i] == '^'
	if negate {
		i++
	}
	for n := 0; ; n++ {
		if i == len(p) {
			return 0, false, errBadGlob
		}
		if p[i] == ']' && n > 0 {
			return i + 1, in != negate, nil
		}
		var lo, hi rune
		if lo, i, err = classChar(p, i); err != nil {
			return 0, false, err
		}
		hi = lo
		if i < len(p) && p[i] == '-' {
			if hi, i, err = classChar(p, i+1); err != nil {
				return 0, false, err
			}
			if hi < lo {
				return 0, false, errBadGlob
			}
		}
		in = in || lo <= c && c <= hi
	}
}

// classChar reads one character of a set, escaped or not.
func classChar(p string, i int) (rune, int, error) {
	if i == len(p) {
		return 0, 0, errBadGlob
	}
	switch p[i] {
	case ']', '-':
		return 0, 0, errBadGlob
	case '\\':
		if i++; i == len(p) {
			return 0, 0, errBadGlob
		}
	}
	r, w := utf8.DecodeRuneInString(p[i:])
	return r, i + w, nil
}
