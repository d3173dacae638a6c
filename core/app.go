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

// ErrNoSplit is wrapped by an App's KeyFor when the app, with the options
// given, cannot run on several workers: its outputs depend on more than
// one key's items (a total over every key), so each worker's share would
// give results of its own. A run asking for several workers is refused.
var ErrNoSplit = errors.New("core: app cannot run on several workers")

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
	// KeyFor, if set, returns the key of an item for key-ordered workers
	// (engine GroupConfig.Key) of the processors New builds with options:
	// the items of one key reach one worker, in order. An app whose
	// outputs depend only on its key's state gives the same outputs with
	// any number of key-ordered workers. It returns a nil key when the
	// app, with these options, has none (it runs on several workers only
	// unordered), and an error wrapping ErrNoSplit when it cannot run on
	// several workers at all (or ErrOption for options it cannot use).
	// Use KeyFunc to read it.
	KeyFor func(options map[string]string) (func(item any) string, error)
	// Key is the key of an item whatever the options, used when KeyFor is
	// nil.
	//
	// Deprecated: set KeyFor, which sees the options (an app whose keying
	// depends on them gave per-worker results with Key). Key is kept for
	// one release.
	Key func(item any) string
	// Live names the options of New that point the processor at live
	// side effects (a state file, and how it is saved): the recorder
	// leaves them out of the options it writes in META (RecordedOptions),
	// so that a replay, which builds the processor with the recorded
	// options, never touches what the run did. An option not named here
	// is recorded, and a replay is given it.
	Live []string
}

// KeyFunc returns the key of an item for key-ordered workers of the
// processors built with options: KeyFor's, else Key; nil when the app has
// none (several workers run it only unordered). An error wraps ErrNoSplit
// (with these options the app runs on one worker only) or ErrOption, and
// names the app.
func (a App) KeyFunc(options map[string]string) (func(item any) string, error) {
	if a.KeyFor == nil {
		return a.Key, nil
	}
	key, err := a.KeyFor(options)
	if err != nil {
		return nil, fmt.Errorf("app %q: %w", a.Name, err)
	}
	return key, nil
}

// RecordedOptions returns the options of a processor built with options
// that a recording holds, for a replay to build it with: options without
// those a.Live names; an empty map, never nil, for none.
func (a App) RecordedOptions(options map[string]string) map[string]string {
	out := make(map[string]string, len(options))
	for k, v := range options {
		if !slices.Contains(a.Live, k) {
			out[k] = v
		}
	}
	return out
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
