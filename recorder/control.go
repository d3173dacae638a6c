package recorder

import (
	"fmt"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// Control writes a CONTROL row now: an operator's action on the run
// (store.Control), with the COMMIT and STATE rows pending before it, and
// forces it to stable storage before it returns, so that an action the
// operator was told was done is in the recording. Call it once the action
// took effect (its positions after are known); a seek and a release are
// recorded by the recorder's Observer (engine.Observer.Acted) before they
// take effect, for every caller of engine.Engine.Seek and Release: do not
// record them again; a failure is returned and
// breaks nothing (the row is not written). Refused: a row the format cannot
// hold (a *store.FieldError or an error wrapping store.ErrMalformed), a
// closed recorder (ErrClosed). Safe for concurrent use.
func (r *Recorder) Control(c store.Control) error {
	row := c.Entry(0)
	if err := store.Validate(row); err != nil {
		return err
	}
	if _, err := store.ControlOf(row); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("%w: CONTROL row", ErrClosed)
	}
	// The COMMIT and STATE rows reported before it first, in order.
	n, err := r.appendLocked(nil, true)
	if err != nil {
		return fmt.Errorf("recorder: CONTROL row: %w", err)
	}
	r.unsynced += n
	row.Index = r.globalNext
	if n, err = r.appendLocked([]store.Entry{row}, false); err != nil {
		return fmt.Errorf("recorder: CONTROL row: %w", err)
	}
	r.globalNext++
	r.unsynced += n
	return r.syncLocked()
}

// acted is the Observer.Acted hook: the engine tells of an operator's
// action (a seek, a release) before it takes effect, and the recorder writes its
// CONTROL row at once, synced, as Control does (the row the console wrote
// for a seek before the engine did): an error refuses the action. Called
// with the engine's locks held: Control takes the recorder's lock only,
// which is never held while the recorder waits for the engine.
func (r *Recorder) acted(a engine.OperatorAction) error {
	action := a.Action
	switch a.Action {
	case engine.ActionSeek:
		action = store.ControlSeek
	case engine.ActionRelease:
		action = store.ControlRelease
	}
	return r.Control(store.Control{Feed: a.Feed, Group: a.Group, Action: action, Who: a.Who, Reason: a.Reason,
		At: a.At, Before: a.Before, After: a.After, Released: a.Unprocessed + a.Processed, Processed: a.Processed})
}
