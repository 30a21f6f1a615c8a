package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingTB keeps the errors reported to it instead of failing the test.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// The test broker fails the test, with the bytes, on a frame that cannot
// be a request (here a response, as a torn stream from kproxy would show
// it) or a size no test sends, instead of handing it to a handler that
// would panic reading its header; it closes that connection and the
// others go on.
func TestFakeUpstreamReportsFramesThatAreNotRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  []byte
		want []string
	}{
		{"response", []byte{0, 0, 0, 6, 0, 0, 0, 9, 0, 0},
			[]string{"frame 1", "is not a request", "size 6 is shorter than a request header", "00 00 00 06 00 00 00 09 00 00"}},
		{"misaligned", []byte{0, 0, 0, 8, 0, 8, 0x72, 0x61, 0x77, 0x2d, 0x74, 0x65}, // "raw-te" read as a header
			[]string{"frame 1", "is not a request", "OffsetCommit version 29281 is outside"}},
		{"huge size", []byte{0x72, 0x61, 0x77, 0x2d},
			[]string{"frame 1", "too large", "72 61 77 2d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			up := startFakeUpstream(rec, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
			c, err := net.Dial("tcp", up.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			good := apiVersionsV0(5)
			c.Write(good)
			if f, err := readFrame(c); err != nil || corrOf(f) != 5 {
				t.Fatalf("a valid request was not answered: %v", err)
			}
			c.Write(tc.bad)
			// Closed: at EOF, or reset when bytes behind the frame were unread.
			if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the broker did not close the connection")
			}
			errs := rec.reported()
			if len(errs) != 1 {
				t.Fatalf("reported %d errors, want 1: %q", len(errs), errs)
			}
			for _, w := range append(tc.want, fmt.Sprintf("% x", good)) { // the frame before too
				if !strings.Contains(errs[0], w) {
					t.Errorf("the report lacks %q:\n%s", w, errs[0])
				}
			}
			// Another connection is still served.
			d := dialRaw(t, up.addr())
			d.SetDeadline(time.Now().Add(10 * time.Second))
			d.Write(apiVersionsV0(7))
			if f, err := readFrame(d); err != nil || corrOf(f) != 7 {
				t.Fatalf("another connection was not answered: %v", err)
			}
		})
	}
}
