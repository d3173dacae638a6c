package console

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/blackbox-audit/blackbox/engine"
)

// The series of /metrics: docs/OPERATIONS.md documents each (a test checks
// it lists every one the exposition has).
var (
	lFeed      = []string{"feed"}
	lGroup     = []string{"group"}
	lBinding   = []string{"feed", "group"}
	lPartition = []string{"feed", "partition"}

	descRead        = desc("feed_items_read_total", "Items the feed's source published: the feed's head, its last sequence.", lFeed)
	descCommitted   = desc("feed_items_committed_total", "Items committed to the source: the feed's committed position, its highest sequence committed.", lFeed)
	descPending     = desc("feed_uncommitted_items", "Items read and not committed yet.", lFeed)
	descPendingAge  = desc("feed_oldest_uncommitted_age_seconds", "The age of the oldest item read and not committed yet, since the feed took it; 0 when none (a feed that commits).", lFeed)
	descRetries     = desc("feed_retries_total", "A processor's tries of an item after a failed one (the items that then failed every try included).", lFeed)
	descFailed      = desc("feed_items_failed_total", "Items skipped after a processor's retries ran out (a loss).", lFeed)
	descCompFailed  = desc("feed_completion_failures_total", "Completion callbacks skipped after their retries (a loss).", lFeed)
	descLost        = desc("feed_lost_items_total", "Items lost, by reason: dropped, refused, released and the source's reasons (oversized, unread, retention ...).", []string{"feed", "reason"})
	descDowngraded  = desc("feed_downgraded_total", "Publishes that found a PAUSE or BLOCK queue full and could neither wait nor pause.", lFeed)
	descPaused      = desc("feed_paused", "1 while the feed refuses items (overload pause), 0 otherwise.", lFeed)
	descPauses      = desc("feed_pauses_total", "Overload pauses of the feed.", lFeed)
	descPausedSec   = desc("feed_paused_seconds_total", "Time the feed spent paused.", lFeed)
	descSettled     = desc("feed_settled", "1 while the feed is settled (caught up, drained, committed), 0 otherwise.", lFeed)
	descLossless    = desc("feed_lossless", "1 while the feed lost nothing within its loss window, 0 otherwise.", lFeed)
	descDispatched  = desc("queue_items_completed_total", "Items of the feed the group completed (its position: the sequence it is done through).", lBinding)
	descQueued      = desc("queue_items", "Items of the feed given to the group's queue and not completed yet (queued or being handled).", lBinding)
	descBlocked     = desc("queue_blocked_total", "BLOCK publishes that waited for room in the queue.", lBinding)
	descBlockedSec  = desc("queue_blocked_seconds_total", "Time BLOCK publishes waited for room in the queue.", lBinding)
	descLossState   = desc("binding_loss_state", "The loss state of the group's binding to the feed: 1 on the current state, 0 on the others.", []string{"feed", "group", "state"})
	descFenced      = desc("group_fenced", "1 while the group is fenced (an operator pause, a seek), 0 otherwise.", lGroup)
	descWorkers     = desc("group_workers", "The group's workers.", lGroup)
	descInFlight    = desc("group_items_in_flight", "Items handed to the group's workers and not finished (groups of several workers).", lGroup)
	descGap         = desc("group_gap_items", "Items completed beyond their queue's oldest pending one (groups of several workers).", lGroup)
	descGapMax      = desc("group_gap_max_items", "The bound on group_gap_items per queue.", lGroup)
	descGapBlocked  = desc("group_gap_blocked_seconds_total", "Time the group waited with a queue's gap full.", lGroup)
	descOldest      = desc("group_oldest_pending_sequence", "The feed sequence of the oldest item taken and not completed, 0 when none (groups of several workers).", lGroup)
	descStale       = desc("group_stale_tokens_total", "Completions refused for a stale token (a released or skipped item).", lGroup)
	descStateSaves  = desc("group_state_saves_total", "Durable saves of the group's app state (--state): writes of the state file that succeeded.", lGroup)
	descKilled      = desc("killed", "1 once the run was killed, 0 otherwise.", nil)
	descRows        = desc("recording_rows_total", "Rows written to the recording, by kind.", []string{"kind"})
	descAppends     = desc("recording_appends_total", "Writes to the recording (each a batch of rows).", nil)
	descBatchRows   = desc("recording_batch_rows", "Rows per write to the recording (its batch sizes).", nil)
	descBytes       = desc("recording_bytes", "The size of the recording's files on disk.", nil)
	descHoleBytes   = desc("file_hole_bytes_total", "NUL bytes a file source skipped as a hole a stale writer left: an intended skip, not a loss.", lFeed)
	descReplaced    = desc("file_replaced_total", "Times a file source found its input replaced and read it from its start: not a loss by itself.", lFeed)
	descKafkaLag    = desc("kafka_partition_lag", "The partition's end minus the group's committed offset: the end the brokers listed for the scrape, else its end at the last fetch.", lPartition)
	descKafkaCommit = desc("kafka_partition_committed_offset", "The group's committed offset of the partition.", lPartition)
	descKafkaHWM    = desc("kafka_partition_high_watermark", "The partition's end at the last fetch.", lPartition)
	descKafkaEnd    = desc("kafka_partition_end_offset", "The partition's end the brokers listed for the scrape (its high watermark now).", lPartition)
	descKafkaLost   = desc("kafka_partition_lost_records_total", "Records of the partition deleted before the group read them.", lPartition)
)

// series lists the names of the series described (desc), in order.
var series []string

func desc(name, help string, labels []string) *prometheus.Desc {
	series = append(series, "blackbox_"+name)
	return prometheus.NewDesc("blackbox_"+name, help, labels, nil)
}

// SeriesNames lists every series /metrics may have (a run has those of
// its feeds, groups and sources).
func SeriesNames() []string { return slices.Clone(series) }

// lossStates are the states binding_loss_state has a series for.
var lossStates = []engine.LossState{engine.LossUp, engine.LossDegraded, engine.LossLatched}

// collector reads the engine's status (and the recorder's counts, the Kafka
// partitions) at each scrape: nothing is counted on the run's hot path.
type collector struct{ w *Window }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRead, descCommitted, descPending, descPendingAge, descRetries, descFailed,
		descCompFailed, descLost, descDowngraded, descPaused, descPauses, descPausedSec, descSettled, descLossless,
		descDispatched, descQueued, descBlocked, descBlockedSec, descLossState, descFenced, descWorkers,
		descInFlight, descGap, descGapMax, descGapBlocked, descOldest, descStale, descStateSaves, descKilled, descRows,
		descAppends, descBatchRows, descBytes, descHoleBytes, descReplaced, descKafkaLag, descKafkaCommit, descKafkaHWM,
		descKafkaEnd, descKafkaLost} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.w.cfg.Engine.Status()
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	for _, f := range st.Feeds {
		counter(descRead, float64(f.Sequence), f.Feed)
		counter(descCommitted, float64(f.Acknowledged), f.Feed)
		gauge(descPending, float64(f.PendingAcks), f.Feed)
		if c.w.cfg.Engine.Feed(f.Feed).Commits() {
			gauge(descPendingAge, f.OldestUncommitted.Seconds(), f.Feed)
		}
		counter(descRetries, float64(f.Retries), f.Feed)
		counter(descFailed, float64(f.Failures), f.Feed)
		counter(descCompFailed, float64(f.CompletionFailures), f.Feed)
		losses := map[string]int64{"dropped": f.Dropped, "refused": f.Refused, "released": f.Released}
		for r, n := range f.Losses {
			losses[r] += n
		}
		for _, r := range slices.Sorted(maps.Keys(losses)) {
			counter(descLost, float64(losses[r]), f.Feed, r)
		}
		counter(descDowngraded, float64(f.Downgraded), f.Feed)
		gauge(descPaused, b2f(f.Paused), f.Feed)
		counter(descPauses, float64(f.Pauses), f.Feed)
		counter(descPausedSec, f.PausedTime.Seconds(), f.Feed)
		gauge(descSettled, b2f(f.Settled), f.Feed)
		gauge(descLossless, b2f(f.Lossless), f.Feed)
		for _, s := range f.Subscribers {
			if s.Removed {
				continue
			}
			g := s.Group
			counter(descDispatched, float64(c.w.queuePosition(s)), f.Feed, g) // never backwards across a release or a seek
			gauge(descQueued, float64(max(0, s.Position-s.Dispatched)), f.Feed, g)
			counter(descBlocked, float64(s.Blocked), f.Feed, g)
			counter(descBlockedSec, s.BlockedTime.Seconds(), f.Feed, g)
			cur := lossState(s.Loss)
			for _, state := range lossStates {
				gauge(descLossState, b2f(string(state) == cur), f.Feed, g, string(state))
			}
		}
		if skips := c.w.cfg.Files[f.Feed]; skips != nil {
			sk := skips()
			counter(descHoleBytes, float64(sk.HoleBytes), f.Feed)
			counter(descReplaced, float64(sk.Replaced), f.Feed)
		}
		if parts := c.w.cfg.Partitions[f.Feed]; parts != nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.w.cfg.ProbeTimeout)
			ps := parts(ctx)
			cancel()
			for _, p := range ps {
				l := []string{f.Feed, p.Topic + "/" + strconv.Itoa(int(p.Partition))}
				lag := p.Lag
				if p.End >= 0 {
					gauge(descKafkaEnd, float64(p.End), l...)
					if p.Committed >= 0 {
						lag = p.End - p.Committed
					}
				}
				if lag >= 0 {
					gauge(descKafkaLag, float64(lag), l...)
				}
				if p.Committed >= 0 {
					gauge(descKafkaCommit, float64(p.Committed), l...)
				}
				if p.HighWatermark >= 0 {
					gauge(descKafkaHWM, float64(p.HighWatermark), l...)
				}
				counter(descKafkaLost, float64(p.Lost), l...)
			}
		}
	}
	for _, g := range st.Groups {
		gauge(descFenced, b2f(g.Fenced), g.Group)
		gauge(descWorkers, float64(g.Workers), g.Group)
		counter(descStale, float64(g.StaleTokens), g.Group)
		if saves := c.w.cfg.StateSaves[g.Group]; saves != nil {
			counter(descStateSaves, float64(saves()), g.Group)
		}
		if g.Workers > 1 { // the engine keeps these for groups of several workers only
			gauge(descInFlight, float64(g.InFlight), g.Group)
			gauge(descGap, float64(g.Gap), g.Group)
			gauge(descGapMax, float64(g.MaxGap), g.Group)
			counter(descGapBlocked, g.GapBlocked.Seconds(), g.Group)
			gauge(descOldest, float64(g.OldestPending), g.Group)
		}
	}
	gauge(descKilled, b2f(st.Killed != ""))
	if c.w.cfg.Recording != nil {
		rec := c.w.cfg.Recording()
		for _, k := range slices.Sorted(maps.Keys(rec.Rows)) {
			counter(descRows, float64(rec.Rows[k]), k)
		}
		counter(descAppends, float64(rec.Appends))
		n, sum, buckets := rec.Batches.cumulative()
		ch <- prometheus.MustNewConstHistogram(descBatchRows, n, sum, buckets)
		if rec.Bytes >= 0 {
			gauge(descBytes, float64(rec.Bytes))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// batchBounds are the upper bounds of recording_batch_rows' buckets (rows
// per write).
var batchBounds = [...]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}

// Batches is a histogram of the rows per write to a recording (its batch
// sizes): Recording.Batches. The zero value is empty. Not safe for
// concurrent use: its owner's lock guards it; a plain value, copied to be
// read.
type Batches struct {
	counts [len(batchBounds) + 1]uint64 // per bucket, the last one past every bound
	rows   uint64
}

// Add counts one write of rows rows.
func (b *Batches) Add(rows int) {
	i, _ := slices.BinarySearch(batchBounds[:], float64(rows)) // the first bound at or above rows
	b.counts[i]++
	b.rows += uint64(max(rows, 0))
}

// cumulative is the histogram as Prometheus has it: the writes, the rows
// and, per bound, the writes of at most that many rows.
func (b Batches) cumulative() (n uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(batchBounds))
	for i, le := range batchBounds {
		n += b.counts[i]
		buckets[le] = n
	}
	return n + b.counts[len(batchBounds)], float64(b.rows), buckets
}
