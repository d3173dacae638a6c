package storetest

import (
	"strconv"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// Alerts is the second processor of Recording: a name with a comma, quotes
// and non-ASCII letters, so that every store quotes and escapes it.
const Alerts = `alerts "é", 2`

// Instants of Recording: nanosecond precision, given in other zones than
// UTC (stores keep them in UTC).
var (
	T0 = time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.UTC)
	t1 = time.Date(2024, 3, 1, 9, 0, 0, 1, time.FixedZone("CET", 3600))
	t2 = time.Date(2024, 3, 1, 8, 0, 0, 999999999, time.UTC)
	t3 = time.Date(2024, 3, 1, 8, 0, 1, 0, time.FixedZone("EST", -5*3600))
)

// Recording returns a complete recording without problems that uses every
// kind but FAILED (a FAILED row ends what its stream proves: a recording
// holding one is not complete, see Failed) and every field: two processors
// (ledger and Alerts) that each handle every seq of their feed, journalled
// (INDEXED) and inline inputs, a journal row written after the inputs that
// name it, a journal row of a feed no processor takes, zero and non-ASCII
// values, commas and quotes in payloads, details and keys, several clock
// readings, nanosecond instants, and payloads a text cannot hold as they
// are (a line break, NUL, invalid UTF-8, a leading '~'), stored in base64.
//
// Row positions (META = 1) used by the suite's corruption cases:
//
//	 1 META            2 JOURNAL orders/1   3 JOURNAL orders/2
//	 4 START ledger 1  5 START alerts 1
//	 6 DELIVERY ledger 2   7 INDEXED ledger 3 (n=2)  8 OUTPUT ledger 4  9 OUTPUT ledger 5
//	10 DELIVERY alerts 2  11 INDEXED alerts 3 (n=0) 12 JOURNAL audit/1
//	13 DELIVERY ledger 6  14 INDEXED ledger 7 (n=1) 15 OUTPUT ledger 8
//	16 DROPPED alerts 4   17 DELIVERY alerts 5      18 INDEXED alerts 6 (n=1) 19 OUTPUT alerts 7
//	20 INLINE ledger 9    21 OUTPUT ledger 10       22 TIMER ledger 11 (n=1)  23 OUTPUT ledger 12
//	24 DELIVERY ledger 13 25 INDEXED ledger 14 (n=0) 26 JOURNAL orders/3
//	27 LOST alerts 8      28 END ledger 15          29 END alerts 9
func Recording() []store.Entry {
	meta := store.EncodeMeta(store.Meta{
		Created: T0,
		Apps:    map[string]string{"ledger": "ledger", Alerts: "alerts"},
		Options: map[string]string{"durability": "fsync", "codec": "json"},
		Streams: []string{Alerts, "ledger"},
	})
	g := func(i int64, kind store.Kind) store.Entry { return store.Entry{Index: i, Kind: kind} }
	l := func(i int64, kind store.Kind) store.Entry {
		return store.Entry{Processor: "ledger", Index: i, Kind: kind}
	}
	a := func(i int64, kind store.Kind) store.Entry {
		return store.Entry{Processor: Alerts, Index: i, Kind: kind}
	}
	with := func(e store.Entry, f func(*store.Entry)) store.Entry { f(&e); return e }
	const feed = "orders"
	return []store.Entry{
		meta,
		with(g(2, store.KindJournal), func(e *store.Entry) {
			e.Source, e.Seq, e.Payload = feed, 1, []byte(`{"id":1,"amount":"12,50 €"}`)
		}),
		with(g(3, store.KindJournal), func(e *store.Entry) {
			e.Source, e.Seq, e.Payload = feed, 2, []byte(`{"id":2,"note":"say \"hi\", twice"}`)
		}),
		with(l(1, store.KindStart), func(e *store.Entry) { e.Instant, e.Payload = T0, []byte("{\n  \"balance\": 0\r\n}") }),
		a(1, store.KindStart), // every field zero
		with(l(2, store.KindDelivery), func(e *store.Entry) {
			e.Source, e.Seq, e.Epoch, e.Offset = feed, 1, 1<<62, 120
		}),
		with(l(3, store.KindIndexed), func(e *store.Entry) {
			e.Source, e.Seq, e.Instant, e.N = feed, 1, t1, 2
			e.Reads = []time.Time{t1, t1.Add(1), t1.Add(time.Second - 1)}
		}),
		with(l(4, store.KindOutput), func(e *store.Entry) {
			e.Source, e.Seq, e.Payload = "book", 1, []byte(`{"ok":true}`)
		}),
		with(l(5, store.KindOutput), func(e *store.Entry) {
			e.Source, e.Seq, e.Payload = "book", 2, []byte(`{"résumé":"ünïcødé 日本語","q":"\"","c":","}`)
		}),
		with(a(2, store.KindDelivery), func(e *store.Entry) {
			e.Source, e.Seq, e.Epoch, e.Key, e.Offset, e.N = feed, 1, 7, `p,"0"`, 120, 1
		}),
		with(a(3, store.KindIndexed), func(e *store.Entry) {
			e.Source, e.Seq, e.Instant, e.Reads = feed, 1, t1, []time.Time{t1}
		}),
		with(g(4, store.KindJournal), func(e *store.Entry) { e.Source, e.Seq, e.Payload = "audit", 1, []byte(`~3`) }),
		with(l(6, store.KindDelivery), func(e *store.Entry) { e.Source, e.Seq, e.Epoch, e.Offset = feed, 2, 1<<62, 240 }),
		with(l(7, store.KindIndexed), func(e *store.Entry) { e.Source, e.Seq, e.Instant, e.N = feed, 2, t2, 1 }),
		with(l(8, store.KindOutput), func(e *store.Entry) { e.Source, e.Seq, e.Payload = "book", 1, []byte(`{}`) }),
		with(a(4, store.KindDropped), func(e *store.Entry) {
			e.Source, e.Seq, e.Offset, e.N = feed, 2, 240, 1
			e.Detail = "overload: drop-after-spin, exact; seqs 2-2"
		}),
		with(a(5, store.KindDelivery), func(e *store.Entry) { e.Source, e.Seq, e.Epoch, e.Offset = feed, 3, 7, 360 }),
		with(a(6, store.KindIndexed), func(e *store.Entry) { e.Source, e.Seq, e.Instant, e.N = feed, 3, t2, 1 }),
		with(a(7, store.KindOutput), func(e *store.Entry) { e.Source, e.Seq, e.Payload = "pager", 1, []byte(`"page; now"`) }),
		with(l(9, store.KindInline), func(e *store.Entry) {
			e.Source, e.Seq, e.Instant, e.N = "push", 1, t2, 1
			e.Payload = []byte(`{"text":"a,b \"c\" d","tab":"\t","nul":"\u0000"}`)
			e.Reads = []time.Time{{}, t2} // a zero reading is kept
		}),
		with(l(10, store.KindOutput), func(e *store.Entry) {
			e.Source, e.Seq, e.Payload = "book", 1, []byte(" leading space, NUL \x00 and invalid UTF-8 \xff")
		}),
		with(l(11, store.KindTimer), func(e *store.Entry) { e.Seq, e.Instant, e.N, e.Reads = 1, t3, 1, []time.Time{t3} }),
		with(l(12, store.KindOutput), func(e *store.Entry) { e.Source, e.Seq, e.Payload = "book", 1, []byte(`null`) }),
		with(l(13, store.KindDelivery), func(e *store.Entry) { e.Source, e.Seq, e.Epoch, e.Offset = feed, 3, 1<<62, 480 }),
		with(l(14, store.KindIndexed), func(e *store.Entry) { e.Source, e.Seq, e.Instant = feed, 3, t3 }),
		with(g(5, store.KindJournal), func(e *store.Entry) { e.Source, e.Seq, e.Payload = feed, 3, []byte(`"three"`) }),
		with(a(8, store.KindLost), func(e *store.Entry) {
			e.Source, e.Seq, e.Epoch, e.Key, e.Offset, e.N = feed, 3, 7, `p,"0"`, 360, 1
			e.Detail = `{"reason":"oversized","to":600,"detail":"in.txt (identity 1f): a line of 240 bytes, \"ünïcødé\""}`
		}),
		with(l(15, store.KindEnd), func(e *store.Entry) { e.Instant, e.N = t3, 5 }),
		with(a(9, store.KindEnd), func(e *store.Entry) { e.Instant, e.N = t3, 2 }),
	}
}

// failed returns Recording with a FAILED row in place of its LOST row (row
// 27: Alerts index 8): the first failed attempt of a timer, after which
// Alerts' stream is not reproducible. Its one problem is that row's
// (store.ProblemFailed).
func failed() []store.Entry {
	rows := Recording()
	rows[26] = store.Entry{Processor: Alerts, Index: 8, Kind: store.KindFailed, Seq: 2, Instant: t3,
		Detail: `attempt 1: boom, "bad" input; ünïcødé`}
	return rows
}

// Groups splits rows as a recorder appends them: an input with its
// DELIVERY row and its OUTPUT rows together, every other row alone.
func Groups(rows []store.Entry) [][]store.Entry {
	var out [][]store.Entry
	for i, e := range rows {
		joins := e.Kind == store.KindOutput ||
			(e.Kind.IsInput() && i > 0 && rows[i-1].Kind == store.KindDelivery && rows[i-1].Processor == e.Processor)
		if joins && len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], e)
			continue
		}
		out = append(out, []store.Entry{e})
	}
	return out
}

// Input returns the i-th input (i >= 1) of a processor stream that starts
// with a START at index 1: a DELIVERY, an INLINE input with one clock
// reading and its one OUTPUT, at indexes 3i-1, 3i and 3i+1, as a recorder
// appends them with one Append. Benchmarks and the concurrency test use it.
func Input(processor string, i int64) []store.Entry {
	at := T0.Add(time.Duration(i) * time.Millisecond)
	return []store.Entry{
		{Processor: processor, Index: 3*i - 1, Kind: store.KindDelivery, Source: "orders", Seq: i, Epoch: 1, Offset: 64 * i},
		{Processor: processor, Index: 3 * i, Kind: store.KindInline, Source: "orders", Seq: i, Instant: at, N: 1,
			Payload: []byte(`{"id":` + strconv.FormatInt(i, 10) + `,"account":"ACC-001","amount":"12.50","note":"a,\"b\""}`),
			Reads:   []time.Time{at}},
		{Processor: processor, Index: 3*i + 1, Kind: store.KindOutput, Source: "book", Seq: 1,
			Payload: []byte(`{"account":"ACC-001","balance":"` + strconv.FormatInt(i, 10) + `.00"}`)},
	}
}
