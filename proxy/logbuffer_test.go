package proxy

import (
	"strings"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// logBuffer collects kproxy's log lines for assertions.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) contains(s string) bool { return strings.Contains(l.String(), s) }
