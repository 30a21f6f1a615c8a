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
	}
	ok, _ := path.Match(g.pattern, s)
	return ok
}
