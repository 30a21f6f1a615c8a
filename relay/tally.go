package relay

import "time"

// tally gathers what one batch of frames adds to the counters, so the
// shared ones (atomics that every session and both directions write, whose
// cache lines bounce between cores) change once per batch rather than once
// per frame. It also reads the clock once per batch: the frames of a batch
// were read together. The request relay owns the requests' tally, and
// whoever writes to the client the responses'.
type tally struct {
	responses bool // counts responses rather than requests
	now       time.Time
	frames    int64 // Kafka requests or responses (raw SASL tokens are not)
	bytes     int64
	inFlight  int64 // entries pushed, less entries popped
	api       *apiMetrics
	apiN      int64 // frames of api's run so far
	// A run of responses of one API that took the same time (answers to
	// one batch of requests, written in one batch), added to the
	// histogram at once.
	lat  *latency
	latD time.Duration
	latN uint64
}

// stamp is the batch's time, read on first use.
func (t *tally) stamp() time.Time {
	if t.now.IsZero() {
		t.now = time.Now()
	}
	return t.now
}

// count adds one request or response of API a. A batch is mostly one API,
// so per-API counts are kept as runs.
func (t *tally) count(a *apiMetrics) {
	if a != t.api {
		t.endRun()
		t.api = a
	}
	t.frames++
	t.apiN++
}

// observe records that a response of API a took d.
func (t *tally) observe(a *apiMetrics, d time.Duration) {
	if a.Latency != t.lat || d != t.latD {
		t.endLatency()
		t.lat, t.latD = a.Latency, d
	}
	t.latN++
}

func (t *tally) endLatency() {
	if t.latN != 0 {
		t.lat.add(t.latD, t.latN)
		t.latN = 0
	}
}

func (t *tally) endRun() {
	if t.apiN == 0 {
		return
	}
	c := t.api.Requests
	if t.responses {
		c = t.api.Responses
	}
	c.Add(float64(t.apiN))
	t.apiN = 0
}

// drop forgets the frames and bytes of a batch that was not written. Its
// in-flight change stays: its entries left the table all the same. Runs of
// an earlier API in a mixed batch have been counted already.
func (t *tally) drop() { t.frames, t.bytes, t.apiN = 0, 0, 0 }

// apply adds the batch to s's and the process's counters and starts the
// next batch.
func (t *tally) apply(s *Session) {
	t.endRun()
	t.endLatency()
	m := s.env.Metrics
	frames, bytes, total := &s.requests, &s.bytesIn, m.BytesIn
	if t.responses {
		frames, bytes, total = &s.responses, &s.bytesOut, m.BytesOut
	}
	if t.frames != 0 {
		frames.Add(t.frames)
	}
	if t.bytes != 0 {
		bytes.Add(t.bytes)
		total.Add(float64(t.bytes))
	}
	if t.inFlight != 0 {
		m.InFlight.Add(float64(t.inFlight))
	}
	*t = tally{responses: t.responses}
}
