package telemetry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The lag series are made at scrape time from the table, so a Fetch
// costs no label lookup and a series that went idle simply stops being
// written.
var (
	lagLabels      = []string{"client_id", "group", "topic", "partition"}
	lagRecordsDesc = prometheus.NewDesc("kproxy_consumer_lag_records",
		"Records between a partition's end (high watermark, or last stable offset for read_committed) and the offset its consumer last fetched from, read from Fetch traffic.", lagLabels, nil)
	lagSecondsDesc = prometheus.NewDesc("kproxy_consumer_lag_seconds",
		"Age of the oldest record batch a consumer had yet to read when it last fetched it (0 when caught up); absent until a fetch returned records.", lagLabels, nil)
	lagSeriesDesc = prometheus.NewDesc("kproxy_consumer_lag_partitions",
		"Partitions whose lag kproxy tracks, by how they are exported: own (a series each) or folded (summed per topic past telemetry.lag.max_series).", []string{"export"}, nil)
	lagDroppedDesc = prometheus.NewDesc("kproxy_consumer_lag_dropped_total",
		"Lag measurements and group names not kept: past every bound of the lag table.", nil, nil)
)

// folded is the partition label of a topic's sum.
const foldedPartition = "all"

// Register adds the lag collector to reg; nothing when l is nil.
func (l *Lag) Register(reg prometheus.Registerer) {
	if l != nil {
		reg.MustRegister(lagCollector{l})
	}
}

type lagCollector struct{ l *Lag }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagRecordsDesc, lagSecondsDesc, lagSeriesDesc, lagDroppedDesc} {
		ch <- d
	}
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(l.now())
	for k, v := range l.series {
		labels := []string{k.client, l.groups[k.client].group, k.topic, strconv.Itoa(int(k.partition))}
		ch <- prometheus.MustNewConstMetric(lagRecordsDesc, prometheus.GaugeValue, float64(v.records.Load()), labels...)
		if secs, ok := v.secondsValue(); ok {
			ch <- prometheus.MustNewConstMetric(lagSecondsDesc, prometheus.GaugeValue, secs, labels...)
		}
	}
	for tk, parts := range l.folded {
		var records int64
		var seconds float64
		has := false
		for _, v := range parts {
			records += v.records.Load()
			if secs, ok := v.secondsValue(); ok {
				seconds, has = max(seconds, secs), true
			}
		}
		labels := []string{tk.client, l.groups[tk.client].group, tk.topic, foldedPartition}
		ch <- prometheus.MustNewConstMetric(lagRecordsDesc, prometheus.GaugeValue, float64(records), labels...)
		if has {
			ch <- prometheus.MustNewConstMetric(lagSecondsDesc, prometheus.GaugeValue, seconds, labels...)
		}
	}
	ch <- prometheus.MustNewConstMetric(lagSeriesDesc, prometheus.GaugeValue, float64(len(l.series)), "own")
	ch <- prometheus.MustNewConstMetric(lagSeriesDesc, prometheus.GaugeValue, float64(l.nFolded), "folded")
	ch <- prometheus.MustNewConstMetric(lagDroppedDesc, prometheus.CounterValue, float64(l.dropped))
}
