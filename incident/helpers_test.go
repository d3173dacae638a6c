package incident_test

import (
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/incident"
	"github.com/blackbox-audit/blackbox/store"
)

var t0 = time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)

// rec builds a recording row by row: META, then the rows its methods add,
// each stream indexed 1, 2, 3 ... and META/JOURNAL/COMMIT rows among
// themselves.
type rec struct {
	rows []store.Entry
	next map[string]int64
	at   time.Duration
}

func newRec(streams ...string) *rec {
	apps := map[string]string{}
	for _, s := range streams {
		apps[s] = "app"
	}
	r := &rec{next: map[string]int64{"": 2}}
	r.rows = append(r.rows, store.EncodeMeta(store.Meta{Created: t0, Apps: apps, Streams: streams}))
	for _, s := range streams {
		r.add(store.Entry{Processor: s, Kind: store.KindStart, Instant: t0})
	}
	return r
}

// sink sets META's store.OptionSink: what became of the run's outputs.
func (r *rec) sink(s string) *rec {
	m, err := store.DecodeMeta(r.rows[0])
	if err != nil {
		panic(err)
	}
	m.Options = map[string]string{store.OptionSink: s}
	meta := store.EncodeMeta(m)
	meta.Index = r.rows[0].Index
	r.rows[0] = meta
	return r
}

func (r *rec) add(e store.Entry) *rec {
	if _, ok := r.next[e.Processor]; !ok {
		r.next[e.Processor] = 1
	}
	e.Index = r.next[e.Processor]
	r.next[e.Processor]++
	r.rows = append(r.rows, e)
	return r
}

// input adds a positioned INLINE input of feed "in" at offset off (epoch 1)
// with its outputs to sink "out".
func (r *rec) input(proc string, seq, off int64, line string, outs ...string) *rec {
	r.at += time.Millisecond
	r.add(store.Entry{Processor: proc, Kind: store.KindDelivery, Source: "in", Seq: seq, Epoch: 1, Offset: off})
	r.add(store.Entry{Processor: proc, Kind: store.KindInline, Source: "in", Seq: seq, Instant: t0.Add(r.at),
		N: int64(len(outs)), Payload: []byte(line)})
	for k, o := range outs {
		r.add(store.Entry{Processor: proc, Kind: store.KindOutput, Source: "out", Seq: int64(k + 1), Payload: []byte(o)})
	}
	return r
}

func (r *rec) dropped(proc string, seq, n int64) *rec {
	return r.add(store.Entry{Processor: proc, Kind: store.KindDropped, Source: "in", Seq: seq, N: n, Detail: "drop"})
}

func (r *rec) end(procs ...string) *rec {
	for _, p := range procs {
		var n int64
		for _, e := range r.rows {
			if e.Processor == p && e.Kind.IsInput() {
				n++
			}
		}
		r.add(store.Entry{Processor: p, Kind: store.KindEnd, Instant: t0.Add(time.Hour), N: n})
	}
	return r
}

func (r *rec) open(t *testing.T, file string) incident.Recording {
	t.Helper()
	m, err := store.OpenMemory(r.rows...)
	if err != nil {
		t.Fatal(err)
	}
	return incident.Recording{File: file, Reader: m}
}

func explain(t *testing.T, opts incident.Options, recs ...incident.Recording) *incident.Findings {
	t.Helper()
	f, err := incident.Explain(recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// commit adds a COMMIT row of feed "in" through seq at offset off (epoch 1).
func (r *rec) commit(seq, off int64) *rec {
	return r.add(store.Entry{Kind: store.KindCommit, Source: "in", Seq: seq, Epoch: 1, Offset: off})
}

// journal adds a JOURNAL row of feed "in".
func (r *rec) journal(seq int64, line string) *rec {
	return r.add(store.Entry{Kind: store.KindJournal, Source: "in", Seq: seq, Payload: []byte(line)})
}

// indexed adds a positioned INDEXED input of feed "in" with its outputs.
func (r *rec) indexed(proc string, seq, off int64, outs ...string) *rec {
	r.at += time.Millisecond
	r.add(store.Entry{Processor: proc, Kind: store.KindDelivery, Source: "in", Seq: seq, Epoch: 1, Offset: off})
	r.add(store.Entry{Processor: proc, Kind: store.KindIndexed, Source: "in", Seq: seq, Instant: t0.Add(r.at), N: int64(len(outs))})
	for k, o := range outs {
		r.add(store.Entry{Processor: proc, Kind: store.KindOutput, Source: "out", Seq: int64(k + 1), Payload: []byte(o)})
	}
	return r
}

// format sets the META row's format.
func (r *rec) format(f string) *rec {
	m, err := store.DecodeMeta(r.rows[0])
	if err != nil {
		panic(err)
	}
	m.Format = f
	r.rows[0] = store.EncodeMeta(m)
	return r
}

// kinput adds a positioned INLINE input of feed "in" with a position key
// (a Kafka partition) under epoch (its group generation), with its outputs.
func (r *rec) kinput(proc string, seq, epoch int64, key string, off int64, line string, outs ...string) *rec {
	r.at += time.Millisecond
	r.add(store.Entry{Processor: proc, Kind: store.KindDelivery, Source: "in", Seq: seq, Epoch: epoch, Key: key, Offset: off})
	r.add(store.Entry{Processor: proc, Kind: store.KindInline, Source: "in", Seq: seq, Instant: t0.Add(r.at),
		N: int64(len(outs)), Payload: []byte(line)})
	for k, o := range outs {
		r.add(store.Entry{Processor: proc, Kind: store.KindOutput, Source: "out", Seq: int64(k + 1), Payload: []byte(o)})
	}
	return r
}

// kcommit adds a COMMIT row of feed "in" through seq at key's offset off.
func (r *rec) kcommit(seq, epoch int64, key string, off int64) *rec {
	return r.add(store.Entry{Kind: store.KindCommit, Source: "in", Seq: seq, Epoch: epoch, Key: key, Offset: off})
}
