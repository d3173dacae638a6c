package csvstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/store"
)

// benchLines are lines as the recorder writes them for the ledger app.
var benchLines = [][]byte{
	[]byte("ledger,2,DELIVERY,input,1,,1,,1,0,,,\n"),
	[]byte(`ledger,3,INLINE,input,1,2026-11-29T19:09:26.103608132Z,0,,0,1,"""acct0,1""",,2026-11-29T19:09:26.103617991Z` + "\n"),
	[]byte(`ledger,4,OUTPUT,ledger,1,,0,,0,0,"{""account"":""acct0"",""amount"":1,""balance"":1,""at"":""2026-11-29T19:09:26.103617991Z""}",,` + "\n"),
}

func benchDecode(b *testing.B, decode func(d *decoder, line []byte) (store.Entry, *RowError)) {
	d := newDecoder()
	for b.Loop() {
		for _, l := range benchLines {
			if _, re := decode(d, l); re != nil {
				b.Fatal(re)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(benchLines))/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkDecodeFull(b *testing.B) {
	benchDecode(b, func(d *decoder, l []byte) (store.Entry, *RowError) { return d.decodeAs(l, full) })
}

func BenchmarkDecodeCheck(b *testing.B) {
	benchDecode(b, func(d *decoder, l []byte) (store.Entry, *RowError) { return d.decodeAs(l, check) })
}

func BenchmarkDecodeGocsv(b *testing.B) {
	benchDecode(b, (*decoder).decodeGocsv)
}

// agree checks that the decoder (fast path first) and gocsv decode line
// alike: the same Entry, or the same error; and that the check mode reads
// the same row, but for the fields it leaves zero, and the borrowing mode
// the same row.
func agree(t *testing.T, line []byte) {
	t.Helper()
	d := newDecoder()
	got, gre := d.decode(line)
	want, wre := newDecoder().decodeGocsv(line)
	if (gre == nil) != (wre == nil) || (gre != nil && *gre != *wre) {
		t.Fatalf("%q: decode error %v, gocsv %v", line, gre, wre)
	}
	if d := cmp.Diff(want, got); d != "" || !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: decode (-gocsv +decode):\n%s", line, d)
	}
	// The borrowing mode (Streams) reads the same row.
	b, bre := newDecoder().decodeAs(line, borrow)
	if (bre == nil) != (gre == nil) || (bre != nil && *bre != *gre) {
		t.Fatalf("%q: borrow error %v, decode %v", line, bre, gre)
	}
	if d := cmp.Diff(got, b); d != "" || !reflect.DeepEqual(got, b) {
		t.Fatalf("%q: borrow mode (-decode +borrow):\n%s", line, d)
	}
	c, cre := d.decodeAs(line, check)
	if (cre == nil) != (gre == nil) || (cre != nil && *cre != *gre) {
		t.Fatalf("%q: check error %v, decode %v", line, cre, gre)
	}
	if cre == nil {
		want.Payload, want.Detail, want.Key, want.Reads = nil, "", "", nil
		c.Payload, c.Detail, c.Key, c.Reads = nil, "", "", nil // set when gocsv decoded the line
		if d := cmp.Diff(want, c); d != "" {
			t.Fatalf("%q: check mode (-gocsv +check):\n%s", line, d)
		}
	}
}

func TestFastDecoderAgrees(t *testing.T) {
	var lines [][]byte
	example, err := os.ReadFile("testdata/example.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, bytes.SplitAfter(example, []byte("\n"))[1:]...)
	lines = append(lines, benchLines...)
	for _, l := range []string{
		"", "\n", "\r\n", ",", `"`, `""`, "a,b\n",
		`p,1,START,,0,,0,,0,0,,,`,
		`"p",1,START,,0,,0,,0,0,,,`,
		`"p""",1,START,,0,,0,,0,0,,,`,
		`p",1,START,,0,,0,,0,0,,,`,
		`"p"x,1,START,,0,,0,,0,0,,,`,
		`"p,1,START,,0,,0,,0,0,,,`,
		`p,1,START,,0,,0,,0,0,,,,`,
		`p,1,START,,0,,0,,0,0,,`,
		`p,1,START,,0,,0,,0,0,,,""`,
		`p,1,START,,0,,0,,0,0,,,"`,
		` p,1,START,,0,,0,,0,0,,,`,
		` "p",1,START,,0,,0,,0,0,,,`,
		"p\r,1,START,,0,,0,,0,0,,,",
		"\"p\r\",1,START,,0,,0,,0,0,,,",
		"\"p\n\",1,START,,0,,0,,0,0,,,",
		"p,1,START,,0,,0,,0,0,\"a\nb\",,",
		"p,1,START,,0,,0,,0,0,,,\r",
		"p,1,START,,0,,0,,0,0,,,\r\n",
		`p,01,START,,0,,0,,0,0,,,`,
		`p,-0,START,,0,,0,,0,0,,,`,
		`p,+1,START,,0,,0,,0,0,,,`,
		`p,-1,START,,0,,0,,0,0,,,`,
		`p,,START,,0,,0,,0,0,,,`,
		`p,9223372036854775807,START,,0,,0,,0,0,,,`,
		`p,-9223372036854775808,START,,0,,0,,0,0,,,`,
		`p,9223372036854775808,START,,0,,0,,0,0,,,`,
		`p,999999999999999999,START,,0,,0,,0,0,,,`,
		`p,-999999999999999999,START,,0,,0,,0,0,,,`,
		`,0,DELIVERY,,0,,1000000000000000000,k,0,0,x,y,`,
		`p,2,DELIVERY,input,1,,-6486943132747005354,,11,0,,,`,
		`p,2,DELIVERY,input,1,,9223372036854775808,,11,0,,,`,
		`p,2,DELIVERY,input,1,,-9223372036854775809,,11,0,,,`,
		`p,2,DELIVERY,input,1,,99999999999999999999,,11,0,,,`,
		`p,1,start,,0,,0,,0,0,,,`,
		`p,1,"START",,0,,0,,0,0,,,`,
		`p,1,START ,,0,,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,0001-01-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,0000-01-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,0000-02-29T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,1900-02-29T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2000-02-29T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-02-30T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-04-31T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,9999-12-31T23:59:59.999999999Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T24:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T23:60:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T23:59:60Z,0,,0,0,,,`,
		`p,1,START,,0,2024-13-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-00-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-00T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00.5Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00.50Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00.Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00.000000001Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00.0000000001Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00+00:00,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01t00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,+024-01-01T00:00:00Z,0,,0,0,,,`,
		`p,1,START,,0,2024-01-01T00:00:00z,0,,0,0,,,`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,0001-01-01T00:00:00Z`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,0001-01-01T00:00:00Z;2024-01-01T00:00:00.1Z`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,2024-01-01T00:00:00Z;`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,;2024-01-01T00:00:00Z`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,;`,
		`p,1,INLINE,f,1,2024-01-01T00:00:00Z,0,,0,0,,,"2024-01-01T00:00:00Z"`,
		`p,1,INLINE,f,1,,0," k",0,0,"{""a"":1}",d,`, // key and detail: an INLINE does not use them
		`p,1,DELIVERY,f,1,,3," k",9,0,,,`,
		`p,1,DELIVERY,f,1,,3,"k,""q""",9,0,,,`,
		`p,1,INLINE,f,1,,0,,0,0,"{""a"":1}",,`,
		`p,1,DROPPED,f,1,,0,,9,2,,"a, ""b""",`,
		`p,1,INLINE,f,1,,0,k,0,0,"""",d,`,
		`p,1,INLINE,f,1,,0,k,0,0,"a""""b",d,`,
		`,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/1""}",`,
		`,2,JOURNAL,f,1,,0,,0,0,{},,`,
	} {
		lines = append(lines, []byte(l), []byte(l+"\n"))
	}
	for _, l := range lines {
		agree(t, l)
	}
}

// TestFastDecoderCovers checks that the fast decoder, not gocsv, reads the
// lines writers write: the speed of reading depends on it.
func TestFastDecoderCovers(t *testing.T) {
	example, err := os.ReadFile("testdata/example.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(example, []byte("\n"))[1:]
	lines = append(lines[:len(lines)-1], benchLines...) // the last is empty
	for _, l := range lines {
		var e store.Entry
		if !newDecoder().fast.decode(bytes.TrimSuffix(l, []byte("\n")), full, &e) {
			t.Errorf("%q: left to gocsv", l)
		}
	}
}

// TestARowWithANineteenDigitEpochIsReadByTheFastDecoder: a file source's
// epoch is a random 64-bit number, mostly of 19 digits; its DELIVERY rows
// (one per input) must not go through gocsv, and every int64 is read as
// strconv.ParseInt reads it.
func TestARowWithANineteenDigitEpochIsReadByTheFastDecoder(t *testing.T) {
	for _, epoch := range []int64{-6486943132747005354, 1<<63 - 1, -1 << 63, 1000000000000000000, -1000000000000000000} {
		line := fmt.Sprintf("p,2,DELIVERY,input,1,,%d,,11,0,,,", epoch)
		var e store.Entry
		if !newDecoder().fast.decode([]byte(line), full, &e) {
			t.Errorf("%q: left to gocsv", line)
		} else if e.Epoch != epoch {
			t.Errorf("%q: epoch %d, want %d", line, e.Epoch, epoch)
		}
		agree(t, []byte(line+"\n"))
	}
}

// TestFastInstantAgrees checks fastInstant against store.ParseReads (one
// reading: the zero time allowed) on canonical instants and mutations of
// them: what it accepts, the store accepts as the same time.
func TestFastInstantAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789-:TZ.+z 9")
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	accepted, missed := 0, 0
	defer func() { t.Logf("%d of %d accepted, %d valid left to the store", accepted, n, missed) }()
	for i := range n {
		var ts time.Time
		switch i % 4 {
		case 0:
			ts = time.Unix(rng.Int64N(253402300800+62167219200)-62167219200, 0).UTC() // years 0-9999
		case 1:
			ts = time.Unix(rng.Int64N(4102444800), rng.Int64N(1e9)).UTC()
		case 2:
			ts = time.Date(rng.IntN(10000), time.Month(1+rng.IntN(12)), 1+rng.IntN(31), rng.IntN(24), rng.IntN(60), rng.IntN(60),
				int(rng.Int64N(1e9)/[]int64{1, 10, 1e3, 1e6, 1e8}[rng.IntN(5)]), time.UTC)
		default:
			ts = time.Time{}
		}
		b := ts.AppendFormat(nil, time.RFC3339Nano)
		for range rng.IntN(3) {
			switch k := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b[k] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = append(b[:k], b[k+1:]...)
			default:
				b = append(b[:k], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[k:]...)...)
			}
			if len(b) == 0 {
				break
			}
		}
		got, ok := fastInstant(b)
		want, wok := store.ParseReads(string(b))
		if ok {
			accepted++
		}
		if !ok {
			if _, wok := store.ParseReads(string(b)); wok {
				missed++
			}
			continue // left to gocsv
		}
		if !wok || len(want) != 1 || !reflect.DeepEqual(got, want[0]) {
			t.Fatalf("%q: fastInstant %v, store.ParseReads %v %v", b, got, want, wok)
		}
		if pi, pok := store.ParseInstant(string(b)); pok != !got.IsZero() || (pok && !reflect.DeepEqual(pi, got)) {
			t.Fatalf("%q: fastInstant %v, store.ParseInstant %v %v", b, got, pi, pok)
		}
	}
}
