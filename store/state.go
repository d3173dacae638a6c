package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// The loss states a STATE row names (engine.LossState's values).
const (
	StateUp       = "UP"
	StateDegraded = "DEGRADED"
	StateLatched  = "LATCHED"
)

// State is what a STATE row says (docs/FORMAT.md, "Kinds"): the loss state
// of group Group's binding to feed Feed changed From a state To another
// (StateUp, StateDegraded, StateLatched), for Reason, At an instant of the
// engine's timer clock (the row's instant), applied at Observed (the same
// but for a recovery to UP, applied when the engine observed it). A plain
// value.
type State struct {
	Feed     string
	Group    string
	From, To string
	Reason   string
	At       time.Time
	Observed time.Time
}

// stateDetail is the JSON of a STATE row's detail column.
type stateDetail struct {
	Group    string `json:"group"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
	Observed string `json:"observed"`
}

// Entry returns s as the STATE row at index (among the rows of no
// processor).
func (s State) Entry(index int64) Entry {
	b, err := json.Marshal(stateDetail{Group: s.Group, From: s.From, To: s.To, Reason: s.Reason,
		Observed: FormatInstant(s.Observed)})
	if err != nil { // strings
		panic(err)
	}
	return Entry{Index: index, Kind: KindState, Source: s.Feed, Instant: s.At, Detail: string(b)}
}

// StateOf reads a STATE row. It refuses, with an error wrapping
// ErrMalformed, a row with no feed or no instant, a detail that is not
// the JSON a writer writes, a group that is empty, a state that is not
// one of the three, a change to the state it is from, and an observed
// instant before the row's.
func StateOf(e Entry) (State, error) {
	bad := func(why string, args ...any) (State, error) {
		return State{}, fmt.Errorf("%w: STATE row: %s", ErrMalformed, fmt.Sprintf(why, args...))
	}
	if e.Source == "" || e.Instant.IsZero() {
		return bad("no feed or no instant")
	}
	var d stateDetail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return bad("detail: %v", err)
	}
	observed, ok := ParseInstant(d.Observed)
	switch {
	case d.Group == "":
		return bad("no group")
	case !validState(d.From) || !validState(d.To):
		return bad("state %q -> %q (want %s, %s or %s)", d.From, d.To, StateUp, StateDegraded, StateLatched)
	case d.From == d.To:
		return bad("a change from %s to itself", d.From)
	case !ok || observed.IsZero():
		return bad("observed %q is not an instant", d.Observed)
	case observed.Before(e.Instant):
		return bad("observed at %s, before the change at %s", d.Observed, FormatInstant(e.Instant))
	}
	return State{Feed: e.Source, Group: d.Group, From: d.From, To: d.To, Reason: d.Reason,
		At: normTime(e.Instant), Observed: observed}, nil
}

func validState(s string) bool { return s == StateUp || s == StateDegraded || s == StateLatched }

// String is the change for a person: `feed "in" group "g": UP -> LATCHED
// at 2030-01-01T00:00:00Z: reason`, with the instant it was observed at
// when it differs.
func (s State) String() string {
	at := FormatInstant(s.At)
	if !s.Observed.Equal(s.At) {
		at += " (observed " + FormatInstant(s.Observed) + ")"
	}
	out := fmt.Sprintf("feed %q group %q: %s -> %s at %s", s.Feed, s.Group, s.From, s.To, at)
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}
