package engine

import (
	"fmt"
	"strings"
	"time"
)

// PolicyKind names an overload policy: the type of Policy.Kind, which
// ParsePolicyKind returns.
type PolicyKind string

// The overload policies (docs/GUARANTEES.md).
const (
	// DropAfterSpinKind: on a full queue, spin up to the spin bound, then
	// drop the item for that queue only, count it and carry on.
	DropAfterSpinKind PolicyKind = "DROP_AFTER_SPIN"
	// BlockKind: wait outside the lock, up to the deadline, until every
	// blocking queue has room; deliver to all of them or refuse.
	BlockKind PolicyKind = "BLOCK_WITH_DEADLINE"
	// PauseKind: a re-readable source keeps the item and offers it again on
	// its next duty cycle; nothing waits and nothing is lost.
	PauseKind PolicyKind = "PAUSE"
)

// ParsePolicyKind reads a policy's name as configuration files and flags
// write it: a kind's own name (PAUSE, DROP_AFTER_SPIN, BLOCK_WITH_DEADLINE)
// or its short form (pause, drop, block), in any case, with '-' or '_'.
// Anything else is an error wrapping ErrConfig.
func ParsePolicyKind(name string) (PolicyKind, error) {
	switch strings.ReplaceAll(strings.ToUpper(name), "-", "_") {
	case "PAUSE":
		return PauseKind, nil
	case "DROP", "DROP_AFTER_SPIN":
		return DropAfterSpinKind, nil
	case "BLOCK", "BLOCK_WITH_DEADLINE":
		return BlockKind, nil
	}
	return "", fmt.Errorf("%w: unknown overload policy %q (want pause, drop or block)", ErrConfig, name)
}

// DefaultSpin is the spin bound of a drop (and of a push publish's fallback
// from PAUSE) when none is set.
const DefaultSpin = 10 * time.Millisecond

// Policy is what a feed does when a subscriber's queue is full. The zero
// Policy is invalid: a feed must say what it wants (New refuses a missing
// policy). Policy values are immutable and safe to share.
type Policy struct {
	Kind     PolicyKind
	Spin     time.Duration // drop: how long to spin; others: the push fallback's spin
	Deadline time.Duration // block only
	spinSet  bool
}

// DropAfterSpin drops for a full queue after spinning up to spin (0 drops at
// once).
func DropAfterSpin(spin time.Duration) Policy {
	return Policy{Kind: DropAfterSpinKind, Spin: spin, spinSet: true}
}

// BlockWithDeadline waits up to deadline for room in every blocking queue,
// then delivers to all or refuses with a *RefusedError. Feed.Offer, and a
// Feed.Publish with a context the engine served (Cycle.Context) or nested
// in a publish, never waits: it falls back to a drop, counted as
// downgraded.
func BlockWithDeadline(deadline time.Duration) Policy {
	return Policy{Kind: BlockKind, Deadline: deadline, Spin: DefaultSpin}
}

// Pause makes TryPublish return false on a full queue: the source keeps the
// item and offers it again. A push Publish into a full PAUSE queue falls back
// to a drop after spin, counted as downgraded and dropped.
func Pause() Policy { return Policy{Kind: PauseKind, Spin: DefaultSpin} }

// WithSpin returns the policy with another spin bound.
func (p Policy) WithSpin(spin time.Duration) Policy { p.Spin = spin; p.spinSet = true; return p }

func (p Policy) String() string {
	switch p.Kind {
	case DropAfterSpinKind:
		return fmt.Sprintf("%s(%s)", p.Kind, p.Spin)
	case BlockKind:
		return fmt.Sprintf("%s(%s)", p.Kind, p.Deadline)
	}
	return string(p.Kind)
}

func (p Policy) validate() (key string, err error) {
	switch p.Kind {
	case "":
		return "policy", fmt.Errorf("%w: missing policy", ErrConfig)
	case DropAfterSpinKind, PauseKind:
		if p.Deadline != 0 {
			return "deadline", fmt.Errorf("%w: a deadline on %s (only %s takes one)", ErrConfig, p.Kind, BlockKind)
		}
	case BlockKind:
		if p.Deadline <= 0 {
			return "deadline", fmt.Errorf("%w: %s needs a positive deadline, got %s", ErrConfig, p.Kind, p.Deadline)
		}
	default:
		return "policy", fmt.Errorf("%w: unknown policy %q", ErrConfig, p.Kind)
	}
	if p.Spin < 0 {
		return "spin", fmt.Errorf("%w: negative spin %s", ErrConfig, p.Spin)
	}
	return "", nil
}
