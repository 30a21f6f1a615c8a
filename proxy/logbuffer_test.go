package proxy

import (
	"strings"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// logBuffer collects kproxy's log lines for assertions.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) contains(s string) bool { return strings.Contains(l.String(), s) }

// count is how many times s appears in the log.
func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }
