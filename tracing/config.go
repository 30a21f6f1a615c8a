package tracing

import "github.com/kproxy/kproxy/internal/fielderr"

// Config is the `tracing:` section of kproxy.yaml. The standard OTEL_*
// environment variables override it (see Resolve), so a Kubernetes manifest
// can point a shared config file at its own collector.
type Config struct {
	// Enabled turns tracing on. Setting OTEL_EXPORTER_OTLP_ENDPOINT (or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) also turns it on.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP collector, e.g. "http://127.0.0.1:4317" for
	// gRPC or "http://127.0.0.1:4318" for HTTP. Empty: the exporter's
	// default (localhost). For HTTP, a URL without a path gets the
	// /v1/traces path; one with a path is used as is.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" (default) or "http/protobuf".
	Protocol string `yaml:"protocol"`
	// ServiceName is service.name; default "kproxy".
	ServiceName string `yaml:"service_name"`
	// ResourceAttributes are added to the resource.
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	// SampleRatio is the fraction of requests traced when no parent decides,
	// between 0 and 1; default 1.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// MaxQueueSize bounds spans waiting for export; beyond it spans are
	// dropped (and counted), never waited for, and no new span is built.
	MaxQueueSize int `yaml:"max_queue_size"`
	// Links controls trace context taken from produced and fetched
	// records.
	Links LinksConfig `yaml:"links"`
	// Propagation controls trace context kproxy writes into records.
	Propagation PropagationConfig `yaml:"propagation"`
}

// PropagationConfig is `tracing.propagation`: trace context carried in the
// records themselves, from the producer's pod to the consumer's, for
// applications that write none.
type PropagationConfig struct {
	// Inject adds a W3C traceparent header naming the Produce span to
	// each record of a sampled Produce that has none. A record that
	// carries one is never changed; unsampled produces are relayed
	// untouched. Such produces are relayed from the goroutine pool,
	// never on netpoll's poller.
	Inject bool `yaml:"inject"`
	// MaxBatchBytes bounds a batch grown by the header, measured as sent
	// (after compression): one that would pass it is left as it came.
	// The default, 1 MiB, is the broker's default max.message.bytes.
	MaxBatchBytes int `yaml:"max_batch_bytes"`
}

// LinksConfig is `tracing.links`: W3C traceparent headers found in Produce
// records become span links.
type LinksConfig struct {
	// Max bounds links per span; 0 turns record inspection off.
	Max int `yaml:"max"`
	// Decompress also reads headers inside compressed batches (gzip,
	// snappy, lz4, zstd), at the cost of decompressing produces: sampled
	// ones, and all of them with ChildOfSingleRecord. Such produces are
	// relayed from the goroutine pool, never on netpoll's poller.
	Decompress bool `yaml:"decompress"`
	// MaxDecompressedBytes bounds what one request's batches may inflate
	// to, all together. Decoding stops as soon as it is reached; the links
	// found so far are kept and the span says
	// kproxy.links_incomplete=true and kproxy.links_truncated=true. The
	// request itself is relayed untouched. The default, 1 MiB, is
	// Kafka's default max.request.size: ordinary produces (16 KiB
	// batches, compressed a few times over) inflate well within it, and
	// the first traced records already give the links; a batch crafted
	// to inflate 16 MiB from a few hundred bytes costs ~1 MiB of
	// inflation (plus the decoder's block in progress) instead of 16.
	MaxDecompressedBytes int `yaml:"max_decompressed_bytes"`
	// MaxDecompressedBatches bounds the compressed batches one request
	// may open (a produce has one per partition), since each costs a
	// decoder set-up even when it inflates to nothing; past it the links
	// are marked as above. Default 64.
	MaxDecompressedBatches int `yaml:"max_decompressed_batches"`
	// MaxDecompressedBytesPerSecond bounds what the whole process
	// inflates for links each second (a bucket of one second's worth);
	// 0 removes the bound. The per-request budget bounds one bomb, this
	// a stream of them: each is a few hundred bytes on the wire, and
	// without it one client sending them back to back keeps a CPU
	// inflating. Past it, batches are not opened and the links are
	// marked as above. Default 64 MiB/s, about a tenth of one core's
	// zstd speed: far more than links need at any sensible sample ratio.
	MaxDecompressedBytesPerSecond int `yaml:"max_decompressed_bytes_per_second"`
	// Fetch makes a sampled Fetch span link to the distinct contexts in
	// the traceparent headers of the records it returns (up to Max;
	// compressed batches only with Decompress, within the same budgets),
	// with messaging.batch.message_count for the records returned.
	// Responses are then relayed from the goroutine pool when
	// Decompress is also set.
	Fetch bool `yaml:"fetch"`
	// ChildOfSingleRecord makes the span of a produce that carries exactly
	// one traced record a child of that record's context instead of
	// linking to it.
	ChildOfSingleRecord bool `yaml:"child_of_single_record"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config {
	return Config{Protocol: "grpc", ServiceName: "kproxy", MaxQueueSize: 8192, Links: LinksConfig{Max: 16, MaxDecompressedBytes: 1 << 20, MaxDecompressedBatches: 64, MaxDecompressedBytesPerSecond: 64 << 20},
		Propagation: PropagationConfig{MaxBatchBytes: 1 << 20}}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Protocol != "grpc" && c.Protocol != "http/protobuf":
		return fielderr.New("protocol", `must be "grpc" or "http/protobuf"`)
	case c.SampleRatio != nil && !(*c.SampleRatio >= 0 && *c.SampleRatio <= 1): // also refuses NaN
		return fielderr.New("sample_ratio", "must be between 0 and 1")
	case c.MaxQueueSize < 1:
		return fielderr.New("max_queue_size", "must be at least 1")
	case c.Links.Max < 0 || c.Links.Max > 1000:
		return fielderr.New("links.max", "must be between 0 and 1000")
	case c.Links.MaxDecompressedBytes < 1 || c.Links.MaxDecompressedBytes > 1<<30:
		return fielderr.New("links.max_decompressed_bytes", "must be between 1 and 1073741824 (1 GiB)")
	case c.Links.MaxDecompressedBatches < 1:
		return fielderr.New("links.max_decompressed_batches", "must be at least 1")
	case c.Links.MaxDecompressedBytesPerSecond < 0:
		return fielderr.New("links.max_decompressed_bytes_per_second", "must not be negative (0: no bound)")
	case c.Propagation.MaxBatchBytes < 1 || c.Propagation.MaxBatchBytes > 1<<30:
		return fielderr.New("propagation.max_batch_bytes", "must be between 1 and 1073741824 (1 GiB)")
	case c.ServiceName == "":
		return fielderr.New("service_name", "must not be empty")
	}
	return nil
}
