package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The trace-stitch column: a client produces through one kproxy with
// tracing.propagation.inject and consumes through another with
// tracing.links.fetch, both exporting to a real Jaeger. It passes if every
// record arrived once, byte-equal, carrying a traceparent the consumer
// library handed over as kproxy wrote it, naming a Produce span of the
// first kproxy that Jaeger holds, and a Fetch span of the second kproxy
// links to each of those Produce spans (trace id and span id equal).

const (
	stitchProduceService = "kproxy-stitch-produce"
	stitchConsumeService = "kproxy-stitch-consume"
	stitchRecords        = 200
	stitchSpanWait       = 60 * time.Second
)

// stitchPaths is the column's one run: there is no direct control, as
// only kproxy adds the headers the cell checks.
var stitchPaths = []path{{name: "kproxy-to-kproxy", proxied: true}}

// stitchFixture is Jaeger and the column's two kproxies, each in front of
// its own listener of the broker (which advertises it, as a broker-pod
// sidecar is reached).
type stitchFixture struct {
	jaeger           *harness.Jaeger
	produce, consume *harness.Kproxy
}

func startStitchFixture(t *testing.T, k *harness.Kafka) *stitchFixture {
	t.Helper()
	j := harness.StartJaeger(t)
	dir := t.TempDir()
	config := func(service, section string) string {
		path := filepath.Join(dir, service+".yaml")
		yaml := fmt.Sprintf("tracing:\n  enabled: true\n  endpoint: http://%s\n  protocol: grpc\n  service_name: %s\n  sample_ratio: 1\n%s",
			j.OTLPGRPC, service, section)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return &stitchFixture{
		jaeger: j,
		produce: harness.StartKproxy(t, stitchProduceService, k.ProxyStitchProduce, k.StitchProduce,
			"--config", config(stitchProduceService, "  propagation:\n    inject: true\n")),
		consume: harness.StartKproxy(t, stitchConsumeService, k.ProxyStitchConsume, k.StitchConsume,
			"--config", config(stitchConsumeService, "  links:\n    fetch: true\n    decompress: true\n    max: 128\n")),
	}
}

func (f *stitchFixture) kproxies() []*harness.Kproxy {
	if f == nil {
		return nil
	}
	return []*harness.Kproxy{f.produce, f.consume}
}

// traceStitch is the column's cell (see the column's comment).
func (c *cell) traceStitch() error {
	start := time.Now()
	k := c.env.kafka
	k.CreateTopic(c.t, c.topic, compatParts)
	want := records(c.topic, stitchRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	var got []kclients.Delivered
	err := c.watched(func() error {
		po := kclients.ProduceOpts{Conn: kclients.Conn{Bootstrap: k.ProxyStitchProduce}, Topic: c.topic, Acks: "all", Compression: "none"}
		if err := c.driver.Produce(ctx, po, want); err != nil {
			return fmt.Errorf("produce through %s: %w", stitchProduceService, err)
		}
		var err error
		got, err = c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: kclients.Conn{Bootstrap: k.ProxyStitchConsume}, Topic: c.topic, Group: c.topic,
			Count: len(want), Timeout: compatTimeout, Protocol: "classic", Members: 1})
		if err != nil {
			return fmt.Errorf("consume through %s: %w", stitchConsumeService, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sum, err := check(want, got, true, nil)
	if err != nil {
		return err
	}
	named := map[string]bool{} // trace id/span id of each traceparent delivered
	for _, d := range got {
		id, ok := parseTraceparent(d.Traceparent)
		if !ok {
			return fmt.Errorf("record %s reached the application with traceparent %q, want the one kproxy injected (00-<trace id>-<span id>-01)", d.Key, d.Traceparent)
		}
		named[id] = true
	}
	if fetches := c.env.stitch.consume.Metric(c.t, requestsOf("Fetch")); fetches == 0 {
		return fmt.Errorf("the consumer sent no Fetch through %s", stitchConsumeService)
	}
	j := c.env.stitch.jaeger
	lookback := time.Since(start) + time.Minute
	var missing, unlinked []string
	deadline := time.Now().Add(stitchSpanWait)
	for {
		missing, unlinked, err = stitched(ctx, j, c.topic, lookback, named)
		if err == nil && len(missing) == 0 && len(unlinked) == 0 {
			break
		}
		if time.Now().After(deadline) {
			switch {
			case err != nil:
				return fmt.Errorf("querying jaeger: %w", err)
			case len(missing) > 0:
				return fmt.Errorf("%d of the %d traceparents delivered name no Produce span of %s in Jaeger after %v (first: %s)",
					len(missing), len(named), stitchProduceService, stitchSpanWait, missing[0])
			}
			return fmt.Errorf("%d of the %d Produce spans the records name are linked by no Fetch span of %s in Jaeger after %v (first: %s)",
				len(unlinked), len(named), stitchConsumeService, stitchSpanWait, unlinked[0])
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.t.Logf("%s: %d records, digest %s, %d Produce spans named by the records, each linked from a Fetch span",
		c.path.name, len(want), sum, len(named))
	return nil
}

// stitched returns the ids of named with no Produce span of the topic in
// Jaeger (missing), and those with one but no Fetch span linking to it
// (unlinked).
func stitched(ctx context.Context, j *harness.Jaeger, topic string, lookback time.Duration, named map[string]bool) (missing, unlinked []string, err error) {
	produces, err := j.SpansV3(ctx, stitchProduceService, "Produce "+topic, lookback)
	if err != nil {
		return nil, nil, err
	}
	fetches, err := j.SpansV3(ctx, stitchConsumeService, "Fetch "+topic, lookback)
	if err != nil {
		return nil, nil, err
	}
	held := map[string]bool{}
	for _, s := range produces {
		held[strings.ToLower(s.TraceID+"/"+s.SpanID)] = true
	}
	linked := map[string]bool{}
	for _, s := range fetches {
		for _, l := range s.Links {
			linked[strings.ToLower(l.TraceID+"/"+l.SpanID)] = true
		}
	}
	for id := range named {
		switch {
		case !held[id]:
			missing = append(missing, id)
		case !linked[id]:
			unlinked = append(unlinked, id)
		}
	}
	return missing, unlinked, nil
}

// parseTraceparent is a sampled W3C traceparent's "trace id/span id".
func parseTraceparent(v string) (string, bool) {
	f := strings.Split(v, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || f[3] != "01" {
		return "", false
	}
	return f[1] + "/" + f[2], true
}
