package telemetry

import (
	"errors"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/kproxy/kproxy/records"
)

// Clients answers the two KIP-714 APIs in the broker's place and hands
// what clients push to an OTLP exporter. Nothing of either API reaches
// the broker, so client metrics need no ClientTelemetry plugin there. One
// Clients serves every listener of the process; its methods run on the
// relay's goroutines, never on the poller (PushTelemetry inflates).
type Clients struct {
	cfg      ClientsConfig
	sub      int32  // the subscription id: a checksum of the subscription
	accepted []int8 // codecs kproxy inflates: none, gzip, snappy, lz4, zstd
	res      resourceAttrs
	exp      *clientsExporter
	m        *ClientsMetrics
	now      func() time.Time

	mu   sync.Mutex
	last map[[16]byte]time.Time // each client instance's last push
}

// ClientMeta is what kproxy knows of the connection that pushed, added to
// the metrics' resource.
type ClientMeta struct {
	ClientID  string
	Principal string // the verified TLS identity; "" for none
	Address   string // the client's address
}

// maxInstances bounds the instances whose last push is remembered (to
// refuse pushes that come too often); past it, old entries are swept and
// new instances are not throttled until there is room.
const maxInstances = 100_000

// inflateWait bounds how long a push waits for one of the process's
// inflation slots (shared with the record path) before it is refused
// with a throttle, which clients answer by pushing at the next interval.
const inflateWait = time.Second

// NewClients starts the exporter to col; nil (and no goroutine) when the
// section is off. env reads the pod's names from the environment.
func NewClients(cfg ClientsConfig, col Collector, m *ClientsMetrics, getenv func(string) string) (*Clients, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	exp, err := newClientsExporter(col, m)
	if err != nil {
		return nil, err
	}
	return &Clients{cfg: cfg, sub: subscriptionID(cfg), accepted: []int8{0, 1, 2, 3, 4},
		res: podAttrs(getenv), exp: exp, m: m, now: time.Now, last: make(map[[16]byte]time.Time)}, nil
}

// subscriptionID names the subscription: it changes when what is asked
// of clients changes, so a client pushing under an older one is told to
// ask again (UNKNOWN_SUBSCRIPTION_ID).
func subscriptionID(c ClientsConfig) int32 {
	h := crc32.NewIEEE()
	h.Write([]byte(strings.Join(c.Metrics, "\x00")))
	h.Write([]byte(strconv.FormatInt(c.PushInterval.Milliseconds(), 10) + "/" + strconv.Itoa(c.MaxBytes)))
	return int32(h.Sum32())
}

// Subscriptions answers GetTelemetrySubscriptions. A client that sends
// the zero UUID is given a new instance id.
func (c *Clients) Subscriptions(req *kmsg.GetTelemetrySubscriptionsRequest) *kmsg.GetTelemetrySubscriptionsResponse {
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	resp.ClientInstanceID = req.ClientInstanceID
	if resp.ClientInstanceID == ([16]byte{}) {
		resp.ClientInstanceID = uuid.New()
	}
	resp.SubscriptionID = c.sub
	resp.AcceptedCompressionTypes = c.accepted
	resp.PushIntervalMillis = int32(c.cfg.PushInterval.Milliseconds())
	resp.TelemetryMaxBytes = int32(c.cfg.MaxBytes)
	resp.DeltaTemporality = false // cumulative: what Prometheus and most backends store
	resp.RequestedMetrics = c.cfg.Metrics
	c.m.subscriptions.Inc()
	return resp
}

// Push answers PushTelemetry: the payload is checked, inflated within
// max_bytes, decoded as OTLP MetricsData, given kproxy's resource
// attributes and queued for export. Errors are the broker's codes.
func (c *Clients) Push(req *kmsg.PushTelemetryRequest, meta ClientMeta) *kmsg.PushTelemetryResponse {
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	code, result := c.push(req, meta)
	resp.ErrorCode = code
	c.m.pushes.WithLabelValues(result).Inc()
	return resp
}

func (c *Clients) push(req *kmsg.PushTelemetryRequest, meta ClientMeta) (int16, string) {
	switch {
	case req.ClientInstanceID == [16]byte{}:
		return kerr.InvalidRequest.Code, "invalid_request"
	case req.SubscriptionID != c.sub:
		return kerr.UnknownSubscriptionID.Code, "unknown_subscription"
	case req.CompressionType < 0 || req.CompressionType > 4:
		return kerr.UnsupportedCompressionType.Code, "unsupported_compression"
	case len(req.Metrics) > c.cfg.MaxBytes:
		return kerr.TelemetryTooLarge.Code, "too_large"
	}
	if !c.admit(req.ClientInstanceID, req.Terminating) {
		return kerr.ThrottlingQuotaExceeded.Code, "throttled"
	}
	if len(req.Metrics) == 0 {
		return 0, "ok" // a client with nothing to report (a terminating push may be empty)
	}
	raw := req.Metrics
	if req.CompressionType != 0 {
		if !records.WaitSlot(inflateWait) {
			return kerr.ThrottlingQuotaExceeded.Code, "busy"
		}
		out, err := records.Inflate(nil, int(req.CompressionType), req.Metrics, c.cfg.MaxBytes)
		records.GiveSlot()
		switch {
		case errors.Is(err, records.ErrOverBudget):
			return kerr.TelemetryTooLarge.Code, "too_large"
		case err != nil:
			return kerr.InvalidRecord.Code, "invalid_record"
		}
		raw = out
	}
	md := new(metricspb.MetricsData)
	if err := proto.Unmarshal(raw, md); err != nil {
		return kerr.InvalidRecord.Code, "invalid_record"
	}
	for _, rm := range md.ResourceMetrics {
		c.res.addTo(rm, meta, req.ClientInstanceID)
	}
	c.exp.enqueue(md.ResourceMetrics, len(raw))
	return 0, "ok"
}

// admit reports whether instance may push now: not sooner than half the
// push interval after its last push (clients jitter their first push
// between half and one and a half intervals), unless it is terminating.
// A terminating instance is forgotten.
func (c *Clients) admit(instance [16]byte, terminating bool) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if terminating {
		delete(c.last, instance)
		return true
	}
	if t, ok := c.last[instance]; ok && now.Sub(t) < c.cfg.PushInterval/2 {
		return false
	}
	if _, ok := c.last[instance]; !ok && len(c.last) >= maxInstances {
		for k, t := range c.last { // sweep instances that stopped pushing
			if now.Sub(t) > 3*c.cfg.PushInterval {
				delete(c.last, k)
			}
		}
		if len(c.last) >= maxInstances {
			return true // no room to remember it: let it through unthrottled
		}
	}
	c.last[instance] = now
	return true
}

// Close flushes what is queued, waiting at most until the deadline d.
func (c *Clients) Close(d time.Duration) {
	if c != nil {
		c.exp.close(d)
	}
}
