package store

import (
	"encoding/json"
	"fmt"
)

// Lost is what a LOST row says (docs/FORMAT.md, "Kinds"): input the source
// of Feed lost before the next input of the row's stream. A plain value.
type Lost struct {
	Feed string `json:"feed"`
	// Seq is the feed sequence of the last item published before the
	// loss (0: none in the run).
	Seq int64 `json:"seq"`
	// Epoch and Key place the loss in the source's positions (Key: a Kafka
	// partition, "" for a file); From and To are the lost range of
	// offsets, [From, To), To 0 when its end is unknown.
	Epoch int64  `json:"epoch"`
	Key   string `json:"key,omitempty"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	// Items counts the items lost, 0 when the source could not count them
	// (the unread end of a file that is gone).
	Items int64 `json:"items"`
	// Reason names the loss ("oversized", "unread", "retention" ...);
	// Detail is what the source says of its input (a file's path and
	// identity).
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// lostDetail is the JSON of a LOST row's detail column.
type lostDetail struct {
	Reason string `json:"reason"`
	To     int64  `json:"to"`
	Detail string `json:"detail"`
}

// Entry returns l as the LOST row of processor's stream at index.
func (l Lost) Entry(processor string, index int64) Entry {
	b, err := json.Marshal(lostDetail{Reason: l.Reason, To: l.To, Detail: l.Detail})
	if err != nil { // strings and an int
		panic(err)
	}
	return Entry{Processor: processor, Index: index, Kind: KindLost, Source: l.Feed, Seq: l.Seq, Epoch: l.Epoch,
		Key: l.Key, Offset: l.From, N: l.Items, Detail: string(b)}
}

// LostOf reads a LOST row. A detail that is not the JSON a writer writes
// is kept whole as the Detail, with no Reason and To 0 (unknown).
func LostOf(e Entry) Lost {
	l := Lost{Feed: e.Source, Seq: e.Seq, Epoch: e.Epoch, Key: e.Key, From: e.Offset, Items: e.N}
	var d lostDetail
	if json.Unmarshal([]byte(e.Detail), &d) == nil {
		l.Reason, l.To, l.Detail = d.Reason, d.To, d.Detail
	} else {
		l.Detail = e.Detail
	}
	return l
}

// String is the loss for a person: "oversized: 1 item of feed "input",
// epoch 7 offsets [120, 16777400) (...)".
func (l Lost) String() string {
	items := "items not counted"
	switch {
	case l.Items == 1:
		items = "1 item"
	case l.Items > 1:
		items = fmt.Sprintf("%d items", l.Items)
	}
	at := fmt.Sprintf("epoch %d", l.Epoch)
	if l.Key != "" {
		at += " key " + l.Key
	}
	to := "its end"
	if l.To > 0 {
		to = fmt.Sprint(l.To)
	}
	s := fmt.Sprintf("%s: %s of feed %q lost at %s offsets [%d, %s)", l.Reason, items, l.Feed, at, l.From, to)
	if l.Detail != "" {
		s += ": " + l.Detail
	}
	return s
}
