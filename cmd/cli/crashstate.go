package cli

import (
	"errors"

	"github.com/blackbox-audit/blackbox/core"
)

// stateOption is the app option crashtest (and `run --state`) names an
// app's durable state file with.
const stateOption = "state"

// hasDurableState reports whether app keeps durable state crashtest can
// check: it takes the state option and its processor implements
// core.Durable. dir is a folder for a probe state file (not created by an
// app that only reads it on construction). An app refusing the option
// (core.ErrOption) has none; any other error is the app's.
func hasDurableState(app core.App, probe string) (bool, error) {
	p, err := app.Build(map[string]string{stateOption: probe})
	if errors.Is(err, core.ErrOption) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, ok := p.(core.Durable)
	return ok, nil
}

// durableState builds app over the state file path (as a restarted run
// would) and returns what the state holds.
func durableState(app core.App, path string) (core.DurableState, error) {
	p, err := app.Build(map[string]string{stateOption: path})
	if err != nil {
		return core.DurableState{}, &fileError{path, err}
	}
	d, ok := p.(core.Durable)
	if !ok {
		return core.DurableState{}, &fileError{path, errors.New("the app's processor does not implement core.Durable")}
	}
	return d.DurableState(), nil
}
