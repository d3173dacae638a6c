package cli

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// clientMetrics are the Kafka client's own metrics (franz-go's kprom
// plugin: connections, requests, bytes and records by broker and topic,
// named blackbox_kafka_client_*) for the operator window of a run with
// --kafka: a prometheus.Collector of them once the client is made,
// nothing before. kprom's Metrics makes its collectors when the client is
// made (its OnNewClient hook), without a lock; made is set by the hook
// after it (a client runs its hooks in order), so a scrape never reads
// them while they are made. Safe for concurrent use.
type clientMetrics struct {
	m    *kprom.Metrics
	made atomic.Bool
}

func newClientMetrics() *clientMetrics {
	// Registry(nil): kprom registers nothing; the window's registry
	// collects it through this collector.
	return &clientMetrics{m: kprom.NewMetrics("blackbox", kprom.Subsystem("kafka_client"), kprom.Registry(nil))}
}

// hooks is the client option that feeds the metrics.
func (c *clientMetrics) hooks() kgo.Opt { return kgo.WithHooks(c.m, madeHook{c}) }

// madeHook marks the metrics made, after kprom's own OnNewClient.
type madeHook struct{ c *clientMetrics }

func (h madeHook) OnNewClient(*kgo.Client) { h.c.made.Store(true) }

// Describe describes nothing: an unchecked collector, whose series exist
// once the client is made.
func (c *clientMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect collects the client's metrics once it is made.
func (c *clientMetrics) Collect(ch chan<- prometheus.Metric) {
	if c.made.Load() {
		c.m.Collect(ch)
	}
}
