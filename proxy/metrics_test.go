package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Counters are added once per batch; pipelined batches that mix APIs must
// still count every request, response and byte under the right API, and
// leave nothing in flight.
func TestCountersAddUpOverMixedBatches(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	c := dialRaw(t, env.addr)
	var batch []byte
	want := map[string]int{}
	for i := 0; i < 300; i++ {
		var req kmsg.Request
		// Runs of one API of varying length, then another.
		if i%7 < 3 {
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 3
			r.ClientSoftwareName, r.ClientSoftwareVersion = "raw", "1"
			req, want["ApiVersions"] = r, want["ApiVersions"]+1
		} else {
			r := kmsg.NewPtrMetadataRequest()
			r.Version = 12
			req, want["Metadata"] = r, want["Metadata"]+1
		}
		batch = append(batch, encodeRequest(req, int32(i))...)
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	respBytes := 0
	for i := 0; i < 300; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		respBytes += len(f)
	}
	waitFor(t, 10*time.Second, "nothing in flight", func() bool { return testutil.ToFloat64(env.m.Relay.InFlight) == 0 })
	for api, n := range want {
		if got := testutil.ToFloat64(env.m.Relay.Requests.WithLabelValues(api)); got != float64(n) {
			t.Errorf("requests_total{api=%q} = %v, want %d", api, got, n)
		}
		if got := testutil.ToFloat64(env.m.Relay.Responses.WithLabelValues(api)); got != float64(n) {
			t.Errorf("responses_total{api=%q} = %v, want %d", api, got, n)
		}
		if got := histogramCount(t, env.m.Relay.Latency.WithLabelValues(api)); got != uint64(n) {
			t.Errorf("request_duration_seconds_count{api=%q} = %d, want %d", api, got, n)
		}
	}
	if got := testutil.ToFloat64(env.m.Relay.BytesIn); got != float64(len(batch)) {
		t.Errorf("bytes in = %v, want %d", got, len(batch))
	}
	if got := testutil.ToFloat64(env.m.Relay.BytesOut); got != float64(respBytes) {
		t.Errorf("bytes out = %v, want %d", got, respBytes)
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
