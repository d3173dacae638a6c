package csvstore

import (
	"bytes"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// The fast row decoder.
//
// gocsv's Unmarshaller costs ~38 allocations and most of the CPU time of a
// row (reflection, one string per field, a new record per row), and every
// reader decodes every line: Open's integrity scan, then Rows, Stream and
// Journal. Reading therefore departs from "gocsv decodes rows" on the
// success path only:
//
//   - gocsv still defines the columns: Header, the header-to-field mapping
//     and its order are gocsv's (init checks that gocsv maps column i of a
//     line to the i-th text of record.fields, which is the order the fast
//     decoder assigns);
//   - gocsv (decodeGocsv) stays the reference decoder: the fast decoder
//     handles only lines it fully understands and returns exactly the
//     Entry gocsv's decoding returns for them; on any other line (a quote
//     out of place, a wrong number of fields, a '\r', a number, kind or
//     instant that is not plainly canonical, an integer out of range ...)
//     it gives up and the line goes through decodeGocsv, so every error,
//     and every row it is not sure of, is gocsv's. TestFastDecoderAgrees
//     and FuzzRowDecode check that both decoders agree on every line.
//
// The split follows encoding/csv (Comma ',', no LazyQuotes, no
// TrimLeadingSpace) over one physical line, as the gocsv path does.

// decodeMode says what of a row the caller needs.
type decodeMode int

const (
	// full: the whole Entry, owning its memory (Payload, Reads ...).
	full decodeMode = iota
	// borrow: the whole Entry, as in full, but its Payload and Reads are
	// the decoder's: valid until it decodes the next line (store.Streams's
	// contract). A row costs no allocation unless it has a Detail or a
	// base64 payload, or goes through gocsv (which gives it its own
	// memory).
	borrow
	// check: the row is validated as in full, but only the fields the
	// store.Checker reads (Processor, Index, Kind, Source, Seq, N, an END
	// row's Detail: what its stop left unprocessed, and a STATE row's: the
	// change it says) and Instant are set; Payload, another row's Detail,
	// Key and Reads are left zero, so checking a row allocates nothing but
	// for the few END and STATE rows.
	check
)

// internLimit bounds the strings a decoder interns, and internMax their
// length: names (processors, feeds, sinks, keys) are few and short.
const (
	internLimit = 1024
	internMax   = 64
)

// fast is the state of the fast decoder, part of a decoder.
type fast struct {
	format string // the recording's format ("": store.Format), for payloads
	fields [columns][]byte
	unq    []byte            // unquoted texts of quoted fields
	names  map[string]string // interned names
	reads  []time.Time       // borrow: the last row's clock readings
}

// intern returns b as a string, shared with earlier calls for the same
// bytes while the table has room.
func (f *fast) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := f.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= internMax && len(f.names) < internLimit {
		if f.names == nil {
			f.names = make(map[string]string)
		}
		f.names[s] = s
	}
	return s
}

// Bytes that end a run of field text: in an unquoted field and in a
// quoted one. A '\r' or '\n' makes the split give up (no row holds one).
var unquotedStop, quotedStop [256]bool

func init() {
	for _, c := range []byte{',', '"', '\r', '\n'} {
		unquotedStop[c] = true
	}
	for _, c := range []byte{'"', '\r', '\n'} {
		quotedStop[c] = true
	}
}

// split splits body (a line without its final "\n") into exactly columns
// fields as encoding/csv does, or reports false for a line it does not
// split cleanly: a quote out of place, another number of fields, a '\r' or
// '\n' anywhere (encoding/csv fails, or the row fails store.Validate).
// Fields that hold no doubled quote are slices of body; the others are
// unquoted into f.unq.
func (f *fast) split(body []byte) bool {
	f.unq = f.unq[:0]
	i, n := 0, 0
	for {
		if n == columns {
			return false
		}
		if i < len(body) && body[i] == '"' {
			i++
			start, seg, u := i, i, -1
			for {
				for i < len(body) && !quotedStop[body[i]] {
					i++
				}
				if i == len(body) || body[i] != '"' {
					return false // quote left open, or a line break
				}
				if i+1 < len(body) && body[i+1] == '"' {
					if u < 0 {
						if cap(f.unq) < len(body) {
							// Room for every unquoted text of the line:
							// f.unq never grows, so fields stay valid.
							f.unq = make([]byte, 0, len(body))
						}
						u = len(f.unq)
					}
					f.unq = append(f.unq, body[seg:i+1]...)
					i += 2
					seg = i
					continue
				}
				break
			}
			if u < 0 {
				f.fields[n] = body[start:i:i]
			} else {
				f.unq = append(f.unq, body[seg:i]...)
				f.fields[n] = f.unq[u:len(f.unq):len(f.unq)]
			}
			n++
			i++ // the closing quote
			if i == len(body) {
				break
			}
			if body[i] != ',' {
				return false // text after the closing quote
			}
			i++
			continue
		}
		start := i
		for i < len(body) && !unquotedStop[body[i]] {
			i++
		}
		f.fields[n] = body[start:i:i]
		n++
		if i == len(body) {
			break
		}
		if body[i] != ',' {
			return false // a bare quote, or a line break
		}
		i++
	}
	return n == columns
}

// decode decodes body (a line without its final "\n") into e, or reports
// false when the line must go through gocsv.
func (f *fast) decode(body []byte, mode decodeMode, e *store.Entry) bool {
	if !f.split(body) {
		return false
	}
	fs := &f.fields
	var ok bool
	if e.Index, ok = fastInt(fs[1]); !ok {
		return false
	}
	if e.Kind, ok = fastKind(fs[2]); !ok {
		return false
	}
	if e.Seq, ok = fastInt(fs[4]); !ok {
		return false
	}
	if len(fs[5]) > 0 {
		if e.Instant, ok = fastInstant(fs[5]); !ok || e.Instant.IsZero() {
			return false
		}
	}
	if e.Epoch, ok = fastInt(fs[6]); !ok {
		return false
	}
	if e.Offset, ok = fastInt(fs[8]); !ok {
		return false
	}
	if e.N, ok = fastInt(fs[9]); !ok {
		return false
	}
	if len(fs[12]) > 0 {
		switch mode {
		case full:
			if e.Reads, ok = appendReads(nil, fs[12]); !ok {
				return false
			}
		case borrow:
			if f.reads, ok = appendReads(f.reads[:0], fs[12]); !ok {
				return false
			}
			e.Reads = f.reads[:len(f.reads):len(f.reads)]
		default:
			if !fastReadsValid(fs[12]) {
				return false
			}
		}
	}
	decoded, plain, err := store.ParsePayload(f.format, fs[10])
	if err != nil {
		return false
	}
	// No '\r' or '\n' in the texts and instants of 4-digit years: the row
	// passes store.Validate.
	e.Processor = f.intern(fs[0])
	e.Source = f.intern(fs[3])
	if mode != check {
		e.Key = f.intern(fs[7])
		switch {
		case !plain:
			e.Payload = decoded
		case len(fs[10]) > 0 && mode == borrow:
			e.Payload = fs[10]
		case len(fs[10]) > 0:
			e.Payload = bytes.Clone(fs[10])
		}
		if len(fs[11]) > 0 {
			e.Detail = string(fs[11])
		}
		return store.ValidateFields(e) == nil
	}
	// Check mode keeps no text but an END, STATE, CONTROL or COMPLETED
	// row's detail (the Checker reads them: store.EndOf, store.StateOf,
	// store.ControlOf, store.CompletedOf): validate a stand-in
	// that has the same fields set, without copying them.
	if (e.Kind == store.KindEnd || e.Kind == store.KindState || e.Kind == store.KindControl || e.Kind == store.KindCompleted) && len(fs[11]) > 0 {
		e.Detail = string(fs[11])
	}
	v := *e
	v.Payload = fs[10]
	v.Key, v.Detail, v.Reads = present(fs[7]), present(fs[11]), nil
	if len(fs[12]) > 0 {
		v.Reads = someReads
	}
	return store.ValidateFields(&v) == nil
}

// someReads stands in for a row's clock readings where only their presence
// matters.
var someReads = []time.Time{{}}

// present stands in for a text where only its presence matters.
func present(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return "x"
}

// fastInt accepts exactly the text strconv.FormatInt writes: every int64,
// up to 19 digits (summed in a uint64, which 19 digits cannot overflow, then
// checked against the int64 range). The epochs of file sources are random
// 64-bit numbers, mostly of 19 digits: a row holding one must not cost a
// gocsv decoding.
func fastInt(b []byte) (int64, bool) {
	d := b
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 19 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	var v uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case neg && v <= 1<<63:
		return -int64(v), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && v <= 1<<63-1:
		return int64(v), true
	}
	return 0, false
}

func fastKind(b []byte) (store.Kind, bool) {
	switch string(b) {
	case "META":
		return store.KindMeta, true
	case "START":
		return store.KindStart, true
	case "DELIVERY":
		return store.KindDelivery, true
	case "INDEXED":
		return store.KindIndexed, true
	case "INLINE":
		return store.KindInline, true
	case "TIMER":
		return store.KindTimer, true
	case "OUTPUT":
		return store.KindOutput, true
	case "DROPPED":
		return store.KindDropped, true
	case "FAILED":
		return store.KindFailed, true
	case "END":
		return store.KindEnd, true
	case "JOURNAL":
		return store.KindJournal, true
	case "COMMIT":
		return store.KindCommit, true
	case "LOST":
		return store.KindLost, true
	case "STATE":
		return store.KindState, true
	case "CONTROL":
		return store.KindControl, true
	case "COMPLETED":
		return store.KindCompleted, true
	}
	return "", false
}

// fastInstant accepts the canonical text store.FormatInstant writes for a
// UTC instant, "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (the fraction 1 to 9
// digits, no trailing zero), and returns what time.Parse returns for it
// in UTC. The zero time is returned as such (store.ParseInstant refuses it
// in the instant column, store.ParseReads keeps it).
func fastInstant(b []byte) (time.Time, bool) {
	n := len(b)
	if n < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[n-1] != 'Z' {
		return time.Time{}, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, false
	}
	nsec := 0
	if n > 20 {
		frac := b[20 : n-1]
		if b[19] != '.' || len(frac) == 0 || len(frac) > 9 || frac[len(frac)-1] == '0' {
			return time.Time{}, false
		}
		v, ok := digits(frac)
		if !ok {
			return time.Time{}, false
		}
		for range 9 - len(frac) {
			v *= 10
		}
		nsec = v
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.IsZero() {
		return time.Time{}, true
	}
	return t, true
}

func digits(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// appendReads parses the reads column as store.ParseReads does ("" aside),
// appending the instants to ts (nil: a slice of their exact length).
func appendReads(ts []time.Time, b []byte) ([]time.Time, bool) {
	if ts == nil {
		ts = make([]time.Time, 0, bytes.Count(b, []byte{';'})+1)
	}
	for part := range bytes.SplitSeq(b, []byte{';'}) {
		t, ok := fastInstant(part)
		if !ok {
			return nil, false
		}
		ts = append(ts, t)
	}
	return ts, true
}

// fastReadsValid is fastReads without the slice.
func fastReadsValid(b []byte) bool {
	for part := range bytes.SplitSeq(b, []byte{';'}) {
		if _, ok := fastInstant(part); !ok {
			return false
		}
	}
	return true
}
