package kafkasource_test

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// errBrokerGone is what the cluster answers every request with while it is
// "gone": the connection is closed.
var errBrokerGone = errors.New("broker gone")

// TestABrokerThatGoesAwayMakesTheFeedBehindAndTheRunResumesWhenItIsBack:
// the consumer is caught up; then the broker closes the connection of
// every request (as a broker that went away): the feed turns BEHIND with
// the broker's address and the error as its detail. When the broker is
// back, the records produced since are processed and committed and the
// feed is CAUGHT_UP again.
func TestABrokerThatGoesAwayMakesTheFeedBehindAndTheRunResumesWhenItIsBack(t *testing.T) {
	c := newCluster(t, 2)
	hwm := produce(t, c, 100, 10)
	var gone atomic.Bool
	c.ControlKey(-1, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if gone.Load() {
			return nil, errBrokerGone, true
		}
		return nil, nil, false
	})
	src := newSource(t, c, "ggone", nil)
	var handled atomic.Int64
	eng := startEngine(t, src, core.ProcessorFunc(func(*core.Cycle, any) error {
		handled.Add(1)
		return nil
	}))
	feed := func() engine.FeedStatus { return eng.Status().Feeds[0] }
	testutil.PollUntil(t, time.Minute, "caught up", func() bool { return allCommitted(src, hwm) && feed().State == engine.StateCaughtUp })

	gone.Store(true)
	host, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(host, port)
	testutil.PollUntil(t, time.Minute, "the feed BEHIND, naming the broker", func() bool {
		fs := feed()
		return fs.State == engine.StateBehind && fs.Detail != nil && strings.Contains(*fs.Detail, addr)
	})
	if d := feed().Detail; d != nil {
		t.Logf("while the broker is gone: %s", *d)
	}

	gone.Store(false)
	more := produce(t, c, 100, 10)
	testutil.PollUntil(t, time.Minute, "the records produced after the broker came back committed, the feed caught up", func() bool {
		return allCommitted(src, more) && feed().State == engine.StateCaughtUp
	})
	if got := handled.Load(); got < 200 {
		t.Fatalf("%d records handled, want the 200 produced", got)
	}
}
