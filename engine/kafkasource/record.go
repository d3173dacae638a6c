package kafkasource

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Record is the item a Source publishes: one Kafka record. Its JSON form
// (the recorder's default codec) holds every field, so Decode rebuilds it
// from a recorded payload and a replay needs no broker. A Record is
// immutable once published: safe for concurrent reads.
type Record struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key,omitempty"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers,omitempty"`
}

// Header is one record header: the type of Record.Headers' elements.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// PartitionKey is the key of a record's partition, "topic/partition": the
// Key of its delivery position. Used as engine.GroupConfig.Key (or
// core.App.Key) it keeps each partition's records in order on one worker.
// An item that is not a *Record has the empty key.
func PartitionKey(item any) string {
	r, ok := item.(*Record)
	if !ok {
		return ""
	}
	return partitionKey(r.Topic, r.Partition)
}

// Decode rebuilds a *Record from its JSON form (a recorded payload): use it
// as core.App.Decode for an app fed by a Source.
func Decode(payload []byte) (any, error) {
	var r Record
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPayload, err)
	}
	return &r, nil
}

func partitionKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// topicID is a topic's ID (Kafka 2.8+): each incarnation of a topic, each
// creation under its name, has its own.
type topicID [16]byte

// known reports whether id is an ID (a cluster without topic IDs gives
// none).
func (id topicID) known() bool { return id != topicID{} }

// TopicEpoch is the epoch of the positions of a topic's records: a number
// derived from the topic ID (its two halves XORed, the sign bit cleared; 1
// when that is 0), the same for every member, run and generation reading
// that incarnation of the topic, and another for a topic deleted and
// created again under the same name: its offsets, which start at 0 again,
// are another position space. 0 for the zero ID (a cluster that gives no
// topic IDs: then a topic created again is not told apart). An
// application that knows a topic's ID computes with it the epoch of its
// records' deliveries (core.Delivery.Epoch) and of PartitionStatus.Epoch.
func TopicEpoch(id [16]byte) int64 {
	if id == ([16]byte{}) {
		return 0
	}
	e := int64((binary.BigEndian.Uint64(id[:8]) ^ binary.BigEndian.Uint64(id[8:])) & math.MaxInt64)
	if e == 0 {
		e = 1
	}
	return e
}
