package csvstore

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/gocarina/gocsv"

	"github.com/blackbox-audit/blackbox/store"
)

// Header is the first line of every CSV recording (without its "\n"): the
// columns of docs/FORMAT.md, in order.
const Header = "processor,index,kind,source,seq,instant,epoch,key,offset,n,payload,detail,reads"

// record is one CSV row as gocsv maps it: the csv tags are the single
// definition of the columns and their order (TestGocsvMapsTheDocumentedColumns
// checks Header and the fast codec's order against them; nothing reflects
// on it at init). Fields are the column texts; converting them to and from
// an Entry (numbers, instants) is ours, strict, and names the column at
// fault.
//
// One codec: appendRow writes every line (byte for byte what encoding/csv
// writes for record's texts: TestAppendRowWritesWhatEncodingCSVWrites); the
// fast decoder of fast.go reads the lines it fully understands, and every
// other line (so every error, by encoding/csv's rules) goes through
// encoding/csv and gocsv's column mapping (decodeGocsv), the reference the
// fast decoder agrees with (TestFastDecoderAgrees, FuzzRowDecode).
type record struct {
	Processor string `csv:"processor"`
	Index     string `csv:"index"`
	Kind      string `csv:"kind"`
	Source    string `csv:"source"`
	Seq       string `csv:"seq"`
	Instant   string `csv:"instant"`
	Epoch     string `csv:"epoch"`
	Key       string `csv:"key"`
	Offset    string `csv:"offset"`
	N         string `csv:"n"`
	Payload   string `csv:"payload"`
	Detail    string `csv:"detail"`
	Reads     string `csv:"reads"`
}

const columns = 13

// fields appends the column texts of r, in column order.
func (r *record) fields(dst []string) []string {
	return append(dst, r.Processor, r.Index, r.Kind, r.Source, r.Seq, r.Instant, r.Epoch,
		r.Key, r.Offset, r.N, r.Payload, r.Detail, r.Reads)
}

var headerLine = []byte(Header + "\n")

// toRecord converts e (validated, store.CheckRowSize) to column texts, its
// payload as store.PayloadText writes it in a recording of format.
func toRecord(e *store.Entry, r *record, format string) error {
	r.Processor = e.Processor
	r.Index = strconv.FormatInt(e.Index, 10)
	r.Kind = string(e.Kind)
	r.Source = e.Source
	r.Seq = strconv.FormatInt(e.Seq, 10)
	r.Instant = store.FormatInstant(e.Instant)
	r.Epoch = strconv.FormatInt(e.Epoch, 10)
	r.Key = e.Key
	r.Offset = strconv.FormatInt(e.Offset, 10)
	r.N = strconv.FormatInt(e.N, 10)
	var err error
	if r.Payload, err = store.PayloadText(format, e.Payload); err != nil {
		return err
	}
	r.Detail = e.Detail
	r.Reads = store.FormatReads(e.Reads)
	return nil
}

// encoder encodes rows as CSV lines into a reused buffer (appendRow). Not
// safe for concurrent use.
type encoder struct {
	buf  bytes.Buffer
	line []byte // appendRow's
}

func newEncoder() *encoder { return &encoder{} }

// encode returns the lines of rows in a recording of format, valid until
// the next call, or the error of the first row the format cannot hold
// (store.ValidateIn, store.CheckRowSize, store.PayloadText).
func (enc *encoder) encode(rows []store.Entry, format string) ([]byte, error) {
	enc.buf.Reset()
	for i := range rows {
		e := &rows[i]
		err := store.ValidateIn(format, *e)
		if err == nil {
			err = store.CheckRowSize(e, format)
		}
		if err == nil {
			enc.line, err = appendRow(enc.line[:0], e, format)
		}
		if err != nil {
			enc.buf.Reset()
			return nil, err
		}
		enc.buf.Write(enc.line)
	}
	return enc.buf.Bytes(), nil
}

// appendRow appends the CSV line of e (validated, store.CheckRowSize) in a
// recording of format to dst: byte for byte what toRecord's texts written
// by encoding/csv make (TestAppendRowWritesWhatEncodingCSVWrites), without
// a string per field. Numbers, instants and readings never need quotes;
// the texts are quoted by encoding/csv's rule (appendField).
func appendRow(dst []byte, e *store.Entry, format string) ([]byte, error) {
	dst = appendField(dst, e.Processor)
	dst = strconv.AppendInt(append(dst, ','), e.Index, 10)
	dst = appendField(append(dst, ','), string(e.Kind))
	dst = appendField(append(dst, ','), e.Source)
	dst = strconv.AppendInt(append(dst, ','), e.Seq, 10)
	dst = append(dst, ',')
	if !e.Instant.IsZero() {
		dst = e.Instant.UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	dst = strconv.AppendInt(append(dst, ','), e.Epoch, 10)
	dst = appendField(append(dst, ','), e.Key)
	dst = strconv.AppendInt(append(dst, ','), e.Offset, 10)
	dst = strconv.AppendInt(append(dst, ','), e.N, 10)
	dst = append(dst, ',')
	if format == store.FormatV1 || store.PlainPayload(e.Payload) {
		if format == store.FormatV1 && bytes.ContainsAny(e.Payload, "\r\n") {
			_, err := store.PayloadText(format, e.Payload) // its error
			return dst, err
		}
		dst = appendField(dst, unsafe.String(unsafe.SliceData(e.Payload), len(e.Payload)))
	} else {
		p, err := store.PayloadText(format, e.Payload) // "~" and base64: never quoted
		if err != nil {
			return dst, err
		}
		dst = append(dst, p...)
	}
	dst = appendField(append(dst, ','), e.Detail)
	dst = append(dst, ',')
	for i, t := range e.Reads {
		if i > 0 {
			dst = append(dst, ';')
		}
		dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	return append(dst, '\n'), nil
}

// appendField appends field as encoding/csv's Writer writes it (comma ',',
// UseCRLF false): quoted when it holds a comma, a quote, a CR or an LF,
// is `\.`, or begins with a space (unicode.IsSpace); a quote doubled.
func appendField(dst []byte, field string) []byte {
	if !fieldNeedsQuotes(field) {
		return append(dst, field...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(field); i++ {
		if field[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, field[i])
	}
	return append(dst, '"')
}

func fieldNeedsQuotes(field string) bool {
	if field == "" {
		return false
	}
	if field == `\.` || strings.ContainsAny(field, ",\"\r\n") {
		return true
	}
	r, _ := utf8.DecodeRuneInString(field)
	return unicode.IsSpace(r)
}

var (
	encoders = sync.Pool{New: func() any { return newEncoder() }}
	decoders = sync.Pool{New: func() any { return newDecoder() }}
)

// getDecoder returns a decoder of the rows of a recording of format ("":
// store.Format).
func getDecoder(format string) *decoder {
	d := decoders.Get().(*decoder)
	d.fast.format = format
	return d
}

// putDecoder returns d to the pool unless a long line grew its buffer.
func putDecoder(d *decoder) {
	if cap(d.line) <= 1<<20 && cap(d.fast.unq) <= 1<<20 {
		decoders.Put(d)
	}
}

// EncodeRow returns the CSV line of e in a recording of store.Format, "\n"
// included, or the error of store.Validate or store.CheckRowSize. It is safe
// for concurrent use.
func EncodeRow(e store.Entry) ([]byte, error) { return EncodeRowFormat(e, store.Format) }

// EncodeRowFormat is EncodeRow in a recording of format (store.Format or
// store.FormatV1: see store.PayloadText).
func EncodeRowFormat(e store.Entry, format string) ([]byte, error) {
	enc := encoders.Get().(*encoder)
	defer encoders.Put(enc)
	b, err := enc.encode([]store.Entry{e}, format)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// RowError is why a line is not a row: the column at fault ("" for the
// line as a whole) and the reason. What could be read of the row (its
// processor and index, 0 when unreadable) is kept for the Problem. It is
// not changed after it is returned, so it is safe for concurrent use.
type RowError struct {
	Column    string
	Reason    string
	Processor string
	Index     int64
	Kind      store.Kind // "" when unknown
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return e.Reason
	}
	return fmt.Sprintf("column %s: %s", e.Column, e.Reason)
}

// Unwrap returns store.ErrMalformed.
func (e *RowError) Unwrap() error { return store.ErrMalformed }

// lineFeed serves one line at a time to the csv.Reader of a decoder, then
// io.EOF until the next line is set.
type lineFeed struct{ b []byte }

func (f *lineFeed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// decoder decodes single lines into Entries. Not safe for concurrent use.
//
// The line split uses encoding/csv directly, one physical line at a time
// (lineFeed): a recording's record is one physical line, and parsing the
// file as one CSV stream would let an unbalanced quote in one corrupt line
// swallow the lines after it into one field, so a torn or edited line would
// hide the rows that follow it and no Problem could name its line. gocsv
// then maps the fields of that one line to a record (its Unmarshaller, fed
// by the same csv.Reader, made when a decoder first needs it: gocsv
// reflects on record then, and an error is the line's, never a panic).
//
// Lines are first tried with the fast decoder (fast.go), which handles the
// lines it fully understands and agrees with this gocsv path on them; any
// other line, and so every error, goes through gocsv (decodeGocsv).
type decoder struct {
	feed lineFeed
	cr   *csv.Reader
	um   *gocsv.Unmarshaller
	line []byte
	fast fast
}

func newDecoder() *decoder { return &decoder{} }

// unmarshaller is the decoder's gocsv Unmarshaller over its one-line
// csv.Reader, made on first use (it reads the header line first).
func (d *decoder) unmarshaller() (*gocsv.Unmarshaller, error) {
	if d.um != nil {
		return d.um, nil
	}
	d.cr = csv.NewReader(&d.feed)
	d.cr.FieldsPerRecord = columns
	d.cr.ReuseRecord = true
	d.feed.b = headerLine
	um, err := gocsv.NewUnmarshaller(d.cr, record{})
	d.feed.b = nil
	if err != nil {
		d.cr = nil
		return nil, fmt.Errorf("csvstore: gocsv cannot map the columns: %w", err)
	}
	d.um = um
	return um, nil
}

// DecodeRow decodes one line (its "\n" optional) of a recording of
// store.Format into a row. The error is a *RowError, wrapping
// store.ErrMalformed, naming the column at fault. It is safe for concurrent
// use.
func DecodeRow(line []byte) (store.Entry, error) { return DecodeRowFormat(line, store.Format) }

// DecodeRowFormat is DecodeRow in a recording of format (store.Format or
// store.FormatV1: see store.PayloadBytes).
func DecodeRowFormat(line []byte, format string) (store.Entry, error) {
	dec := getDecoder(format)
	defer putDecoder(dec)
	e, err := dec.decode(line)
	if err != nil {
		return store.Entry{}, err
	}
	return e, nil
}

// decode decodes one line. It never panics and never reads past the line.
func (d *decoder) decode(line []byte) (store.Entry, *RowError) {
	return d.decodeAs(line, full)
}

// decodeAs decodes one line, the fields mode asks for (see decodeMode):
// with the fast decoder when it can, else with gocsv.
func (d *decoder) decodeAs(line []byte, mode decodeMode) (store.Entry, *RowError) {
	body := line
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	if len(body) > 0 {
		var e store.Entry
		if d.fast.decode(body, mode, &e) {
			return e, nil
		}
	}
	return d.decodeGocsv(line)
}

// decodeGocsv decodes one line with gocsv: the reference decoder.
func (d *decoder) decodeGocsv(line []byte) (store.Entry, *RowError) {
	body := line
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	if bytes.IndexByte(body, '\n') >= 0 {
		return store.Entry{}, &RowError{Reason: "line break inside the row"}
	}
	if len(body) == 0 {
		return store.Entry{}, &RowError{Reason: "empty line"}
	}
	if body[len(body)-1] == '\r' {
		// encoding/csv would drop it; no row ends with one.
		return store.Entry{}, &RowError{Reason: `line ends with "\r\n", want "\n"`}
	}
	um, err := d.unmarshaller()
	if err != nil {
		return store.Entry{}, &RowError{Reason: err.Error()}
	}
	d.line = append(append(d.line[:0], body...), '\n')
	d.feed.b = d.line
	v, err := um.Read()
	d.feed.b = nil
	if err != nil {
		re := &RowError{Reason: csvReason(err)}
		if errors.Is(err, csv.ErrFieldCount) {
			re.Column = ""
		}
		return store.Entry{}, re
	}
	r, ok := v.(record)
	if !ok {
		return store.Entry{}, &RowError{Reason: fmt.Sprintf("unexpected record type %T", v)}
	}
	return fromRecord(&r, d.fast.format)
}

func csvReason(err error) string {
	var pe *csv.ParseError
	switch {
	case errors.Is(err, csv.ErrFieldCount):
		return fmt.Sprintf("wrong number of fields, want %d", columns)
	case errors.Is(err, io.EOF):
		return "no record"
	case errors.As(err, &pe):
		return fmt.Sprintf("bad CSV quoting at column %d: %v", pe.Column, pe.Err)
	default:
		return fmt.Sprintf("bad CSV: %v", err)
	}
}

// fromRecord converts column texts of a recording of format to a row,
// strictly: each text must be the one the writer writes for its value.
func fromRecord(r *record, format string) (store.Entry, *RowError) {
	var e store.Entry
	bad := func(col, format string, args ...any) (store.Entry, *RowError) {
		return store.Entry{}, &RowError{Column: col, Reason: fmt.Sprintf(format, args...),
			Processor: e.Processor, Index: e.Index, Kind: e.Kind}
	}
	e.Processor = r.Processor
	var ok bool
	if e.Index, ok = parseInt(r.Index); !ok {
		return bad("index", "%q is not an integer", r.Index)
	}
	if !store.Kind(r.Kind).Valid() {
		return bad("kind", "unknown kind %q", r.Kind)
	}
	e.Kind = store.Kind(r.Kind)
	e.Source = r.Source
	if e.Seq, ok = parseInt(r.Seq); !ok {
		return bad("seq", "%q is not an integer", r.Seq)
	}
	if e.Instant, ok = store.ParseInstant(r.Instant); !ok {
		return bad("instant", "%q is not an RFC3339Nano UTC instant", r.Instant)
	}
	if e.Epoch, ok = parseInt(r.Epoch); !ok {
		return bad("epoch", "%q is not an integer", r.Epoch)
	}
	e.Key = r.Key
	if e.Offset, ok = parseInt(r.Offset); !ok {
		return bad("offset", "%q is not an integer", r.Offset)
	}
	if e.N, ok = parseInt(r.N); !ok {
		return bad("n", "%q is not an integer", r.N)
	}
	var err error
	if e.Payload, err = store.PayloadBytes(format, r.Payload); err != nil {
		return bad("payload", "%v", err)
	}
	e.Detail = r.Detail
	if e.Reads, ok = store.ParseReads(r.Reads); !ok {
		return bad("reads", "%q is not a list of RFC3339Nano UTC instants joined by ';'", r.Reads)
	}
	if err = store.Validate(e); err != nil {
		var fe *store.FieldError
		if errors.As(err, &fe) {
			return bad(fe.Field, "%v", err)
		}
		return bad("", "%v", err)
	}
	return e, nil
}

// parseInt accepts exactly the decimal text strconv.FormatInt writes.
func parseInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}
