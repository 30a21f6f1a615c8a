package tlsconf

import (
	"crypto/sha256"
	"os"
	"time"
)

// Files are watched by polling, not inotify. A Secret volume updates by
// renaming a new ..data symlink over the old one; inotify on the file
// paths sees nothing (the watched inodes are never written), so a watcher
// has to watch the directory and re-resolve, and ConfigMaps, projected
// volumes, bind mounts and editors that write in place each need their own
// case. A stat of each file every reload_interval (os.Stat follows the
// symlinks) sees all of them alike, costs nothing that matters for a few
// files, and needs no new dependency. The content is read and hashed only
// when a stat changed (or the file was modified in the last 2 s, see
// settle), and reloaded only when the hash did.

// source is files loaded together: a certificate and its key, or a CA
// bundle.
type source struct {
	side   string   // metric label: client or upstream
	files  []string // what is watched
	fields []string // the field naming each file, for logs: "listener.cert_file"
	// apply parses the files' contents and, when they are good, installs
	// them and says what is now in force (for the log); else it returns
	// why they are refused.
	apply func(data [][]byte, now time.Time) (string, error)
	// inForce is what apply said last.
	inForce string

	stamps []stamp
	sum    [sha256.Size]byte
	seen   bool // stamps and sum hold a poll's result
	// recheck: a file was modified too recently for its stat to be
	// trusted; read it again next poll.
	recheck bool
	// readErr is the last failure to read, reported once.
	readErr string
}

// settle is how old a modification must be before a stat that has not
// changed is trusted to mean the content has not either: file times are
// kept at a coarse clock tick, so a file rewritten in place with the
// same size within one tick of the last read keeps its stat.
const settle = 2 * time.Second

// stamp is what a stat said about a file.
type stamp struct {
	fi  os.FileInfo
	err string
}

func (a stamp) same(b stamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil && a.err == b.err
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}

// poll looks at the files and applies them when their content changed
// since the last poll. changed says whether it tried; err is why the new
// content was refused (the old stays in force).
func (s *source) poll(now time.Time) (changed bool, err error) {
	stamps := s.stat()
	same := s.seen && !s.recheck
	for i := range stamps {
		same = same && stamps[i].same(s.stamps[i])
	}
	if same {
		return false, nil
	}
	data := make([][]byte, len(s.files))
	h := sha256.New()
	var readErr error
	for i, f := range s.files {
		if data[i], err = os.ReadFile(f); err != nil && readErr == nil {
			readErr = &fileError{s.fields[i], f, err}
		}
		n := len(data[i])
		h.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		h.Write(data[i])
	}
	// A file that changed while being read may have been read half old,
	// half new (a certificate with the previous key): leave it for the
	// next poll, which sees it settled.
	for i, st := range s.stat() {
		if !st.same(stamps[i]) {
			return false, nil
		}
	}
	s.stamps = stamps
	s.recheck = false
	for _, st := range stamps {
		if st.fi != nil && now.Sub(st.fi.ModTime()) < settle {
			s.recheck = true
		}
	}
	if readErr != nil {
		// Reported once, not every poll.
		if s.seen && readErr.Error() == s.readErr {
			return false, nil
		}
		s.seen, s.readErr = true, readErr.Error()
		return true, readErr
	}
	s.readErr = ""
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if s.seen && sum == s.sum {
		return false, nil // touched, not changed
	}
	s.sum, s.seen = sum, true
	what, err := s.apply(data, now)
	if err == nil {
		s.inForce = what
	}
	return true, err
}

// stat stats every file, following symlinks.
func (s *source) stat() []stamp {
	stamps := make([]stamp, len(s.files))
	for i, f := range s.files {
		fi, err := os.Stat(f)
		stamps[i] = stamp{fi: fi}
		if err != nil {
			stamps[i] = stamp{err: err.Error()}
		}
	}
	return stamps
}
