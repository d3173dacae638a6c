package store_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// A recording whose process died while handling an input: the Checker
// names the input with too few outputs and the stream without END.
func ExampleRecording_Problems() {
	rec := store.NewMemory()
	at := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	_ = rec.Append(store.EncodeMeta(store.Meta{Created: at, Streams: []string{"ledger"}}))
	_ = rec.Append(store.Entry{Processor: "ledger", Index: 1, Kind: store.KindStart, Instant: at})
	_ = rec.Append(
		store.Entry{Processor: "ledger", Index: 2, Kind: store.KindInline, Source: "push", Seq: 1, Instant: at, N: 2,
			Payload: []byte(`{"amount":12}`)},
		store.Entry{Processor: "ledger", Index: 3, Kind: store.KindOutput, Source: "book", Seq: 1, Payload: []byte(`{}`)},
	)
	for _, p := range rec.Problems() {
		fmt.Println(&p, errors.Is(&p, store.ErrOrphan))
	}
	// Output:
	// :3: orphan processor "ledger" index 2 INLINE: has 1 of its 2 OUTPUT rows: k=2 missing true
	// :4: unfinished processor "ledger" index 3 OUTPUT: stream has no END: its last row is OUTPUT index 3 false
}

func ExampleCopy() {
	src := store.NewMemory()
	_ = src.Append(store.EncodeMeta(store.Meta{Streams: []string{"alerts"}}),
		store.Entry{Processor: "alerts", Index: 1, Kind: store.KindStart},
		store.Entry{Processor: "alerts", Index: 2, Kind: store.KindEnd})
	dst := store.NewMemory()
	if err := store.Copy(dst, src); err != nil {
		fmt.Println(err)
	}
	fmt.Println(dst.Len(), dst.Processors(), len(dst.Problems()))
	// Output: 3 [alerts] 0
}
