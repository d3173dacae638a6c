package kafkasource_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
)

// EndOffsets lists each partition's end as the brokers have it now, also
// for records the source has not fetched (its processor holds the first
// record); before the source runs it has no client (ErrNoClient).
func TestEndOffsetsAreTheBrokersEndsNow(t *testing.T) {
	c := newCluster(t, 2)
	produce(t, c, 4, 2)
	src := newSource(t, c, "gends", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := src.EndOffsets(ctx); !errors.Is(err, kafkasource.ErrNoClient) {
		t.Fatalf("before Run: %v, want ErrNoClient", err)
	}
	first, release := make(chan struct{}, 1), make(chan struct{})
	startEngine(t, src, core.ProcessorFunc(func(*core.Cycle, any) error {
		select {
		case first <- struct{}{}:
		default:
		}
		<-release
		return nil
	}))
	t.Cleanup(func() { close(release) }) // before the engine's stop
	select {
	case <-first: // the client is up
	case <-ctx.Done():
		t.Fatal("no record within 30s")
	}
	want := produce(t, c, 6, 2) // records the held source has not taken
	got, err := src.EndOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got[topic], want) || len(got) != 1 {
		t.Errorf("end offsets %v, want %s: %v", got, topic, want)
	}
}
