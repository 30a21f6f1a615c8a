package audit

import (
	"os"
	"strings"
	"sync"
)

// stream is an output that is not a regular file: a named pipe a log
// shipper reads, or a device. It is never rotated (renaming a pipe would
// cut the shipper off) and it is opened by the writer goroutine at the
// first line, not by Open: opening a pipe waits for its reader, and
// kproxy must start, and relay, whether or not one is there yet.
type stream struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// isStream reports whether path is an existing named pipe or device, or
// a path under /dev or /proc (/dev/stderr is a link to whatever fd 2 is,
// which may be a regular file that must not be renamed by a rotation).
func isStream(path string) bool {
	if strings.HasPrefix(path, "/dev/") || strings.HasPrefix(path, "/proc/") {
		return true
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeDevice|os.ModeCharDevice) != 0
}

func (s *stream) Write(b []byte) (int, error) {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		var err error
		if f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			return 0, err
		}
		s.mu.Lock()
		s.f = f
		s.mu.Unlock()
	}
	return f.Write(b)
}

func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}
