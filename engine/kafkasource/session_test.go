package kafkasource_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The session test runs the member it kills as a child process (this test
// binary, re-executed with -test.run=^TestKafkaSessionChild$), so that it
// dies with SIGKILL and never leaves the group.
const (
	sessionBrokersEnv = "KAFKASOURCE_SESSION_BROKERS"
	sessionGroup      = "gsession"
	sessionParts      = 4
	sessionTimeout    = time.Second
	// sessionSlack is what the rebalance after the session expired may
	// take: the new member's join and sync.
	sessionSlack = 500 * time.Millisecond
)

// sessionSource is a member of sessionGroup with a session of
// sessionTimeout (Options.SessionTimeout).
func sessionSource(t testing.TB, brokers []string) *kafkasource.Source {
	t.Helper()
	src, err := kafkasource.New(kafkasource.Options{Brokers: brokers, Topics: []string{topic}, Group: sessionGroup,
		PollInterval: 10 * time.Millisecond, SessionTimeout: sessionTimeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// ownsAll reports whether src owns every partition of topic.
func ownsAll(src *kafkasource.Source) bool {
	n := 0
	for _, p := range src.Status().Partitions {
		if p.Owned {
			n++
		}
	}
	return n == sessionParts
}

var nothing = core.ProcessorFunc(func(*core.Cycle, any) error { return nil })

func TestKafkaSessionChild(t *testing.T) {
	brokers := os.Getenv(sessionBrokersEnv)
	if brokers == "" {
		t.Skip("the child of TestAKilledMembersPartitionsAreReassignedWithinItsSessionTimeout")
	}
	src := sessionSource(t, strings.Split(brokers, ","))
	startEngine(t, src, nothing)
	testutil.PollUntil(t, time.Minute, "the child owns every partition", func() bool { return ownsAll(src) })
	fmt.Println("owns")
	select {} // killed by the parent
}

// A member with a session of 1s (Options.SessionTimeout; a child process)
// owns every partition of its group and is killed with SIGKILL: it never
// leaves the group, and its partitions stay its own until its session
// expires. A member started right after the kill owns them all within the
// session (and the rebalance's slack) of the kill, where franz-go's default
// session would hold them 45s.
func TestAKilledMembersPartitionsAreReassignedWithinItsSessionTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process killed")
	}
	c := newShortSessionCluster(t, sessionParts)
	produce(t, c, 200, 50)

	cmd, sc := startChild(t, "TestKafkaSessionChild", sessionBrokersEnv+"="+strings.Join(c.ListenAddrs(), ","))
	owns := false
	for !owns && sc.Scan() {
		owns = sc.Text() == "owns"
	}
	if !owns {
		t.Fatalf("the child ended before it owned the partitions: %v", sc.Err())
	}
	cmd.Process.Kill() // SIGKILL: no LeaveGroup
	cmd.Wait()
	at := time.Now()

	src := sessionSource(t, c.ListenAddrs())
	startEngine(t, src, nothing)
	testutil.PollUntil(t, time.Minute, "the new member owns every partition", func() bool { return ownsAll(src) })
	if took := time.Since(at); took > sessionTimeout+sessionSlack {
		t.Errorf("the new member owned the killed member's partitions %s after the kill, want within its session (%s) and %s", took, sessionTimeout, sessionSlack)
	} else {
		t.Logf("the new member owned the killed member's partitions %s after the kill", took)
	}
}

// A session the brokers refuse (1s, below kfake's default
// group.min.session.timeout.ms of 6s) leaves the member out of the group:
// the feed stays BEHIND and, while no partition is assigned, its detail
// names the group's error (the poll that failed to join said it once, and
// the next poll's "no partition assigned" hid it).
func TestASessionTheBrokersRefuseIsNamedInTheFeedsDetail(t *testing.T) {
	c := newCluster(t, 2)
	produce(t, c, 10, 5)
	src := sessionSource(t, c.ListenAddrs())
	eng := startEngine(t, src, nothing)
	unassigned := "no partition assigned in group " + sessionGroup
	var detail string
	testutil.PollUntil(t, 10*time.Second, "the detail says no partition is assigned, and why", func() bool {
		fs := eng.Status().Feeds[0]
		if fs.Detail != nil {
			detail = *fs.Detail
		}
		return fs.State == engine.StateBehind && strings.HasPrefix(detail, unassigned) &&
			strings.Contains(detail, kerr.InvalidSessionTimeout.Message)
	})
	if ps := src.Status().Partitions; len(ps) > 0 {
		t.Errorf("the refused member has partitions: %+v", ps)
	}
}
