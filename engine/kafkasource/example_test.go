package kafkasource_test

import (
	"errors"
	"fmt"

	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// A recorded payload is a Record's JSON: Decode rebuilds the *Record (as
// core.App.Decode for a replay with no broker), and PartitionKey gives the
// key of its partition (as engine.GroupConfig.Key).
func ExampleDecode() {
	payload := []byte(`{"topic":"orders","partition":3,"offset":41,"value":"aGVsbG8=","headers":[{"key":"trace","value":"eHl6"}]}`)
	item, err := kafkasource.Decode(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := item.(*kafkasource.Record)
	fmt.Println(kafkasource.PartitionKey(item), r.Offset, string(r.Value), r.Headers[0].Key, string(r.Headers[0].Value))

	_, err = kafkasource.Decode([]byte("a line"))
	fmt.Println(errors.Is(err, kafkasource.ErrPayload))
	// Output:
	// orders/3 41 hello trace xyz
	// true
}

// The epoch of a topic's records is derived from its topic ID; a cluster
// that gives no topic IDs (the zero ID) gives epoch 0.
func ExampleTopicEpoch() {
	id := [16]byte{0: 1, 15: 2}
	fmt.Println(kafkasource.TopicEpoch(id), kafkasource.TopicEpoch([16]byte{}))
	// Output:
	// 72057594037927938 0
}
