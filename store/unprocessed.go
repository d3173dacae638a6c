package store

import (
	"encoding/json"
	"fmt"
)

// Unprocessed is a run of seqs of a feed that a clean stop left
// unprocessed: the feed published them (their JOURNAL rows may be in the
// recording) and the processor's group never took them from its queue
// before the engine's drain timeout ran out. They were not processed, so
// the source did not commit them and the next run delivers them again. An
// END row's detail lists them (EndDetail, UnprocessedOf); a recording made
// before END rows carried it has none.
type Unprocessed struct {
	Feed  string `json:"feed"`
	First int64  `json:"first"`
	Last  int64  `json:"last"`
}

// endDetail is the JSON of an END row's detail column.
type endDetail struct {
	Unprocessed []Unprocessed `json:"unprocessed"`
}

// EndDetail is the detail of an END row that lists u: "" for none.
func EndDetail(u []Unprocessed) string {
	if len(u) == 0 {
		return ""
	}
	b, err := json.Marshal(endDetail{Unprocessed: u})
	if err != nil { // strings and ints
		panic(err)
	}
	return string(b)
}

// UnprocessedOf reads the unprocessed seqs an END row lists: none for an
// empty detail. A detail that is not that JSON, or a run whose First is
// below 1 or above its Last, or whose feed is empty, is an error wrapping
// ErrMalformed.
func UnprocessedOf(e Entry) ([]Unprocessed, error) {
	if e.Detail == "" {
		return nil, nil
	}
	var d endDetail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return nil, fmt.Errorf("%w: END detail: %v", ErrMalformed, err)
	}
	for _, u := range d.Unprocessed {
		if u.Feed == "" || u.First < 1 || u.Last < u.First {
			return nil, fmt.Errorf("%w: END detail: unprocessed seqs %d-%d of feed %q", ErrMalformed, u.First, u.Last, u.Feed)
		}
	}
	return d.Unprocessed, nil
}
