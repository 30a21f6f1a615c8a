package policy

import (
	"path"
	"strings"
)

// glob is a compiled client-id or topic pattern. The common shapes (an
// exact name, "prefix*", "*suffix") are plain string tests, which keeps a
// header-only rule cheap; anything else goes to path.Match.
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
	globWild // '*' and '?' only
	globMatch
)

func compileGlob(p string) glob {
	star := strings.IndexByte(p, '*')
	switch {
	case !strings.ContainsAny(p, `*?[\`):
		return glob{p, globExact, p}
	case star == len(p)-1 && !strings.ContainsAny(p[:star], `*?[\`):
		return glob{p, globPrefix, p[:star]}
	case star == 0 && !strings.ContainsAny(p[1:], `*?[\`):
		return glob{p, globSuffix, p[1:]}
	case !strings.ContainsAny(p, `[\/`):
		return glob{p, globWild, ""}
	}
	return glob{p, globMatch, ""}
}

func (g glob) match(s string) bool {
	switch g.kind {
	case globExact:
		return s == g.fix
	case globPrefix:
		return strings.HasPrefix(s, g.fix)
	case globSuffix:
		return strings.HasSuffix(s, g.fix)
	case globWild:
		return wild(g.pattern, s)
	}
	ok, _ := path.Match(g.pattern, s)
	return ok
}

// wild matches s against a pattern of literal bytes, '?' (any one byte)
// and '*' (any run), backtracking to the last star on a mismatch.
func wild(p, s string) bool {
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
