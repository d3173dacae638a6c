package store

import (
	"encoding/json"
	"fmt"
)

// Unprocessed is a run of seqs of a feed that a clean stop left
// unprocessed: the feed published them (their JOURNAL rows may be in the
// recording) and the processor's group never took them from its queue
// before the engine's drain timeout ran out (or a kill, which drains
// nothing). They were not processed, so the source did not commit them and
// the next run delivers them again. An END row's detail lists them
// (EndDetail, UnprocessedOf); a recording made before END rows carried it
// has none.
type Unprocessed struct {
	Feed  string `json:"feed"`
	First int64  `json:"first"`
	Last  int64  `json:"last"`
}

// End is what an END row's detail says of the stop that closed the
// stream: the seqs it left unprocessed, and, for a run an operator killed
// (engine.Engine.Kill), why. The zero End is the empty detail of a stop
// that left nothing unprocessed. A plain value.
type End struct {
	// Killed is the reason the run was killed, "" for a stop.
	Killed      string
	Unprocessed []Unprocessed
}

// endDetail is the JSON of an END row's detail column. Killed is a
// pointer so that a present but empty reason is told from none.
type endDetail struct {
	Killed      *string       `json:"killed,omitempty"`
	Unprocessed []Unprocessed `json:"unprocessed,omitempty"`
}

// Detail is the END row's detail that says d: "" for the zero End.
func (d End) Detail() string {
	if d.Killed == "" && len(d.Unprocessed) == 0 {
		return ""
	}
	j := endDetail{Unprocessed: d.Unprocessed}
	if d.Killed != "" {
		j.Killed = &d.Killed
	}
	b, err := json.Marshal(j)
	if err != nil { // strings and ints
		panic(err)
	}
	return string(b)
}

// EndDetail is the detail of an END row that lists u: "" for none.
func EndDetail(u []Unprocessed) string { return End{Unprocessed: u}.Detail() }

// EndOf reads what an END row's detail says: the zero End for an empty
// detail. A detail that is not that JSON, a run whose First is below 1 or
// above its Last, or whose feed is empty, or an empty reason for a kill,
// is an error wrapping ErrMalformed.
func EndOf(e Entry) (End, error) {
	if e.Detail == "" {
		return End{}, nil
	}
	var d endDetail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return End{}, fmt.Errorf("%w: END detail: %v", ErrMalformed, err)
	}
	for _, u := range d.Unprocessed {
		if u.Feed == "" || u.First < 1 || u.Last < u.First {
			return End{}, fmt.Errorf("%w: END detail: unprocessed seqs %d-%d of feed %q", ErrMalformed, u.First, u.Last, u.Feed)
		}
	}
	end := End{Unprocessed: d.Unprocessed}
	if d.Killed != nil {
		if *d.Killed == "" {
			return End{}, fmt.Errorf("%w: END detail: killed without a reason", ErrMalformed)
		}
		end.Killed = *d.Killed
	}
	return end, nil
}

// UnprocessedOf reads the unprocessed seqs an END row lists: none for an
// empty detail. It fails as EndOf does.
func UnprocessedOf(e Entry) ([]Unprocessed, error) {
	end, err := EndOf(e)
	return end.Unprocessed, err
}
