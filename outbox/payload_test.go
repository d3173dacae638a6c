package outbox_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/store"
)

// textCodec is a codec of the caller's whose payloads are text, not JSON
// ("n=1"); multiline, one whose payloads are JSON over several lines.
type textCodec struct{ multiline bool }

func (c textCodec) Name() string { return "text" }

func (c textCodec) Encode(v any) ([]byte, error) {
	if o, ok := v.(out); ok && c.multiline {
		return fmt.Appendf(nil, "{\n\"n\": %d,\n\"k\": %d\n}", o.N, o.K), nil
	}
	return fmt.Appendf(nil, "%v", v), nil
}

func (c textCodec) Decode(data []byte) (any, error) { return string(data), nil }

// The file sink holds one line of JSON per output: outputs of a codec of
// the caller's that are not (text, JSON over several lines) are refused,
// live (the outbox fails, nothing written) and again by the next Open's
// recovery, which reads them back from the recording. The recorder's JSON
// codec's outputs are delivered.
func TestAFileSinkRefusesOutputsThatAreNotOneLineOfJSONLiveAndAtRecovery(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec textCodec
		json  bool
	}{
		{"the JSON codec", textCodec{}, true},
		{"text", textCodec{}, false},
		{"JSON over several lines", textCodec{multiline: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			f, box := b.mustOpenFile(outbox.FormatValue)
			tp := newTape(ints(1, 4)...)
			tp.setClosed(true)
			rc := runConfig{Source: tp.source()}
			if !tc.json {
				rc.Codec = tc.codec
			}
			l := b.start(box, rc)
			l.settle()
			_, err := l.stop()
			f.Close()
			if tc.json {
				if err != nil {
					t.Fatalf("outbox: %v", err)
				}
				if diff := cmp.Diff(outputs(1, 4), lines(t, b.out)); diff != "" {
					t.Fatalf("out file (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, outbox.ErrPayload) {
				t.Fatalf("the live outbox closed with %v, want ErrPayload", err)
			}
			if got := readFile(t, b.out); len(got) != 0 {
				t.Fatalf("the out file holds %q, want nothing", got)
			}
			f, box, err = b.openFile(outbox.FormatValue)
			if err == nil {
				box.Close()
				f.Close()
			}
			if !errors.Is(err, outbox.ErrPayload) {
				t.Fatalf("the next Open: %v, want ErrPayload", err)
			}
			if got := readFile(t, b.out); len(got) != 0 {
				t.Fatalf("after the next Open the out file holds %q, want nothing", got)
			}
		})
	}
}

// reading is one input of key "k" at epoch and offset, with one output.
type reading struct {
	epoch, offset int64
	output        string
}

// A position read again in one run before its commit (a Kafka partition
// revoked and assigned back) delivers its last reading's outputs only;
// the same offset in another epoch is another position.
func TestAPositionReadAgainBeforeItsCommitDeliversTheLastReadingsOutputsOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readings []reading
		// Once reading commitAfter (from 1) is written, the source commits
		// through reading commitThrough; then through the last.
		commitAfter, commitThrough int
		want                       []string
	}{
		{"each once", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {1, 3, "3a"}, {1, 4, "4a"}}, 0, 0,
			[]string{"1a", "2a", "3a", "4a"}},
		{"two read again", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {1, 3, "3a"}, {1, 2, "2b"}, {1, 3, "3b"}, {1, 4, "4a"}}, 0, 0,
			[]string{"1a", "2b", "3b", "4a"}},
		{"all read again, then a third time", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {1, 1, "1b"}, {1, 2, "2b"}, {1, 2, "2c"}, {1, 3, "3a"}}, 0, 0,
			[]string{"1b", "2c", "3a"}},
		{"another epoch", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {2, 1, "1b"}, {2, 2, "2b"}, {1, 2, "2c"}, {2, 3, "3b"}}, 0, 0,
			[]string{"1a", "1b", "2b", "2c", "3b"}},
		{"read again across a commit", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {1, 1, "1b"}, {1, 2, "2b"}, {1, 1, "1c"}, {1, 3, "3a"}}, 2, 2,
			[]string{"1a", "2a", "2b", "1c", "3a"}},
		{"read again, a commit between", []reading{{1, 1, "1a"}, {1, 2, "2a"}, {1, 1, "1b"}, {1, 3, "3a"}, {1, 1, "1c"}, {1, 4, "4a"}}, 3, 2,
			[]string{"2a", "3a", "1c", "4a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var (
				mu  sync.Mutex
				got []string
			)
			sink := effectSinkFunc(func(_ int64, effs []core.Effect) error {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range effs {
					got = append(got, strings.Trim(string(e.Payload), `"`))
				}
				return nil
			})
			box := begun(t, dir, sink)
			commit := func(seq int64, r reading) {
				box.Observer().Committed("in", engine.Commit{Seq: seq, Epoch: r.epoch, Position: core.Position{Key: "k", Offset: r.offset}})
			}
			var rows []store.Entry
			for i, r := range tc.readings {
				seq, idx := int64(i+1), int64(3*i+1)
				rows = append(rows,
					store.Entry{Processor: "p", Index: idx, Kind: store.KindDelivery, Source: "in", Seq: seq, Epoch: r.epoch, Key: "k", Offset: r.offset, N: 1},
					store.Entry{Processor: "p", Index: idx + 1, Kind: store.KindIndexed, Source: "in", Seq: seq, N: 1},
					store.Entry{Processor: "p", Index: idx + 2, Kind: store.KindOutput, Source: "out", Seq: 1, Payload: []byte(`"` + r.output + `"`)})
				box.Written(rows[len(rows)-3:]) // one item at a time, as the recorder's flushes may
				if i+1 == tc.commitAfter {
					commit(int64(tc.commitThrough), tc.readings[tc.commitThrough-1])
				}
			}
			commit(int64(len(tc.readings)), tc.readings[len(tc.readings)-1])
			if err := box.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("delivered (-want +got):\n%s", diff)
			}
		})
	}
}
