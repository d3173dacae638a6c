package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrOption is wrapped by an App's New when it is given an option it does
// not know, or a value it cannot use.
var ErrOption = errors.New("core: bad app option")

// App is a processor as the rest of blackbox knows it: by name. The recorder
// writes each processor's app name in the recording's META row; replay,
// golden cases and the CLI find the app by that name and build a fresh
// processor with New. One App value serves all of them. An App is a plain
// value, safe for concurrent use if its functions are.
type App struct {
	// Name names the app in recordings, golden cases and command lines.
	Name string
	// New builds a fresh processor configured by options (golden case
	// options, `blackbox run --option key=value`); nil or empty options
	// give the defaults. An option New does not know, or cannot use, is an
	// error wrapping ErrOption. A replay builds its processors with New
	// too, with the options given to the replay: options that point a
	// processor at live side effects (a state file) must not be given then.
	New func(options map[string]string) (Processor, error)
	// Decode turns a recorded input payload back into the item the
	// processor receives. Nil: the payload is decoded as JSON into generic
	// values (the recorder's JSON codec).
	Decode func(payload []byte) (any, error)
	// Key, if set, is the key of an item for key-ordered workers (engine
	// GroupConfig.Key): the items of one key reach one worker, in order.
	// An app whose outputs depend only on its key's state gives the same
	// outputs with any number of key-ordered workers. Nil: the app runs
	// on several workers only unordered.
	Key func(item any) string
}

// Build builds a processor with a.New(options), naming the app in its
// errors; New returning no processor is an error.
func (a App) Build(options map[string]string) (Processor, error) {
	if a.New == nil {
		return nil, fmt.Errorf("app %q has no New", a.Name)
	}
	p, err := a.New(options)
	if err != nil {
		return nil, fmt.Errorf("app %q: %w", a.Name, err)
	}
	if p == nil {
		return nil, fmt.Errorf("app %q: New returned no processor", a.Name)
	}
	return p, nil
}

// FindApp returns the app of apps named name; false if there is none.
func FindApp(apps []App, name string) (App, bool) {
	i := slices.IndexFunc(apps, func(a App) bool { return a.Name == name })
	if i < 0 {
		return App{}, false
	}
	return apps[i], true
}

// AppNames lists the names of apps, sorted, joined by ", " (for errors
// naming the known apps).
func AppNames(apps []App) string {
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Name
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Durable is implemented by processors that keep durable state of their own
// (for example a state file an app option names) and can say what it holds.
// `blackbox crashtest` builds the app over the state a run left behind and
// compares DurableState between a run killed and restarted and a clean run.
type Durable interface {
	DurableState() DurableState
}

// DurableState is what a processor's durable state holds: how many effects
// it applied, the delivery position of the last one (Epoch and Position, as
// in Delivery), and a digest of the effects themselves, compared between
// runs ("" if the processor gives none). Two runs over the same input, one
// killed and restarted any number of times, must end with equal values.
type DurableState struct {
	Applied  int64
	Epoch    int64
	Position Position
	Effects  string
}
