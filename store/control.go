package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The actions a CONTROL row names (the operator window's, console.Action).
const (
	ControlPause   = "pause"
	ControlResume  = "resume"
	ControlClear   = "clear"
	ControlRelease = "release"
	ControlSeek    = "seek"
	ControlKill    = "kill"
)

// controlActions lists the actions a CONTROL row may name.
var controlActions = []string{ControlPause, ControlResume, ControlClear, ControlRelease, ControlSeek, ControlKill}

// Control is what a CONTROL row says (docs/FORMAT.md, "Kinds"): operator
// Who (the name of the token the action came with) did Action on group
// Group's binding to feed Feed (both empty for a kill, which names the
// run) At an instant of the run's clock, for Reason; Before and After are
// the feed sequences the group was done through around it (0 when the
// action moves none: a kill). Until is the end of a pause, zero for an
// indefinite one and for another action. A plain value.
type Control struct {
	Feed   string
	Group  string
	Action string
	Who    string
	Reason string
	At     time.Time
	Before int64
	After  int64
	Until  time.Time
	// Released counts the items a release or a forward seek took from the
	// group's queue (the status's released: unprocessed and processed);
	// Processed those of them the group had completed that still held the
	// commit (not made durable by a processing checkpoint, or completed
	// beyond an item not completed). The unprocessed ones have DROPPED
	// rows; the processed ones have their rows and no DROPPED row, but
	// the operator gave up their commit's wait for what applied them to
	// be saved: a loss of the run all the same (docs/GUARANTEES.md,
	// "Release"). Zero for other actions, and in recordings written before
	// the engine counted them.
	Released, Processed int64
}

// controlDetail is the JSON of a CONTROL row's detail column.
type controlDetail struct {
	Group  string `json:"group,omitempty"`
	Action string `json:"action"`
	Who    string `json:"who"`
	Reason string `json:"reason"`
	Before int64  `json:"before"`
	After  int64  `json:"after"`
	Until  string `json:"until,omitempty"`
	// Released and Processed: additive, absent when zero.
	Released  int64 `json:"released,omitempty"`
	Processed int64 `json:"processed,omitempty"`
}

// Entry returns c as the CONTROL row at index (among the rows of no
// processor).
func (c Control) Entry(index int64) Entry {
	d := controlDetail{Group: c.Group, Action: c.Action, Who: c.Who, Reason: c.Reason, Before: c.Before, After: c.After,
		Released: c.Released, Processed: c.Processed}
	if !c.Until.IsZero() {
		d.Until = FormatInstant(c.Until)
	}
	b, err := json.Marshal(d)
	if err != nil { // strings and integers
		panic(err)
	}
	return Entry{Index: index, Kind: KindControl, Source: c.Feed, Instant: c.At, Detail: string(b)}
}

// ControlOf reads a CONTROL row. It refuses, with an error wrapping
// ErrMalformed, a row with no instant, a detail that is not the JSON a
// writer writes, an action that is not one of the six, no operator, no
// reason, a feed without a group (or a group without a feed) but for a
// kill, negative positions, and an Until on another action than a pause.
func ControlOf(e Entry) (Control, error) {
	bad := func(why string, args ...any) (Control, error) {
		return Control{}, fmt.Errorf("%w: CONTROL row: %s", ErrMalformed, fmt.Sprintf(why, args...))
	}
	if e.Instant.IsZero() {
		return bad("no instant")
	}
	var d controlDetail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return bad("detail: %v", err)
	}
	var until time.Time
	if d.Until != "" {
		t, ok := ParseInstant(d.Until)
		if !ok || t.IsZero() {
			return bad("until %q is not an instant", d.Until)
		}
		until = t
	}
	switch {
	case !slices.Contains(controlActions, d.Action):
		return bad("action %q (want pause, resume, clear, release, seek or kill)", d.Action)
	case d.Who == "":
		return bad("no operator")
	case d.Reason == "":
		return bad("no reason")
	case d.Action != ControlKill && (e.Source == "" || d.Group == ""):
		return bad("%s without a feed and a group", d.Action)
	case d.Before < 0 || d.After < 0:
		return bad("position %d -> %d", d.Before, d.After)
	case !until.IsZero() && d.Action != ControlPause:
		return bad("until on a %s", d.Action)
	case d.Released < 0 || d.Processed < 0 || d.Processed > d.Released:
		return bad("released %d, processed %d", d.Released, d.Processed)
	case d.Released != 0 && d.Action != ControlRelease && d.Action != ControlSeek:
		return bad("released on a %s", d.Action)
	}
	return Control{Feed: e.Source, Group: d.Group, Action: d.Action, Who: d.Who, Reason: d.Reason,
		At: normTime(e.Instant), Before: d.Before, After: d.After, Until: until, Released: d.Released, Processed: d.Processed}, nil
}

// String is the action for a person: `2030-01-01T00:00:00Z alice: pause
// feed "in" group "g" (position 4 -> 4) until 2030-01-01T00:05:00Z: reason`.
func (c Control) String() string {
	out := FormatInstant(c.At) + " " + c.Who + ": " + c.Action
	if c.Feed != "" {
		out += fmt.Sprintf(" feed %q group %q (position %d -> %d)", c.Feed, c.Group, c.Before, c.After)
	}
	if !c.Until.IsZero() {
		out += " until " + FormatInstant(c.Until)
	}
	return out + ": " + c.Reason
}
