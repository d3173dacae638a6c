package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"

	"github.com/blackbox-audit/blackbox/internal/apps"
)

// DurableState is what `blackbox crashtest` reads of an app's durable state
// (App.State reads it from the app's --state file): how many effects the
// app applied, and the source position of the last input it applied. Two
// runs over the same input, one killed and restarted any number of times,
// must end with the same values. A DurableState that also implements
// EffectsComparer has its effects compared too. Implementations are plain
// values, safe for concurrent use.
type DurableState interface {
	// Applied counts the effects applied (the ledger: postings).
	Applied() int64
	// Position is the (epoch, offset) of the last input applied.
	Position() (epoch, offset int64)
}

// EffectsComparer is a DurableState whose effects can be compared with
// another run's (the ledger: its balances), position aside.
type EffectsComparer interface {
	SameEffects(other DurableState) bool
}

// ledgerDurable is the ledger's state file as a DurableState: a plain
// value, safe for concurrent use.
type ledgerDurable struct{ st apps.LedgerState }

func (l ledgerDurable) Applied() int64                  { return l.st.Applied }
func (l ledgerDurable) Position() (epoch, offset int64) { return l.st.Epoch, l.st.Offset }

// SameEffects compares the balances.
func (l ledgerDurable) SameEffects(other DurableState) bool {
	o, ok := other.(ledgerDurable)
	return ok && maps.Equal(l.st.Balances, o.st.Balances)
}

// readLedgerDurable reads the ledger's state file.
func readLedgerDurable(path string) (DurableState, error) {
	st, err := readLedgerState(path)
	if err != nil {
		return nil, err
	}
	return ledgerDurable{st}, nil
}

func readLedgerState(path string) (apps.LedgerState, error) {
	var st apps.LedgerState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, &fileError{path, unwrapPathError(err)}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, &fileError{path, fmt.Errorf("not a ledger state: %w", err)}
	}
	return st, nil
}
